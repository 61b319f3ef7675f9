// memory.hpp: where a buffer lives (host or CUDA device), copies between the
// two, and aligned host allocations reused across calls (page faults are
// expensive: scratch buffers are allocated once and kept).
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>

#include "runtime/status.hpp"

namespace quorum {

enum class BufferKind { Host, Device };

// Host unless the CUDA runtime is built in, a device exists and ptr is device memory.
BufferKind buffer_kind(const void *ptr);
bool cuda_available();
// cudaMemcpy in either direction (kind of each side detected by the runtime).
Status device_copy(void *dst, const void *src, size_t bytes);

// The largest allocation quorum attempts: no 64-bit platform maps more in one
// process (x86-64 with 5-level paging, the largest, has 2^56 B of user
// address space). Larger sizes are refused before any arithmetic on them.
constexpr size_t kMaxAllocBytes = size_t{1} << 56;

// `bytes` rounded up to a multiple of `align` (a power of two); false when
// the result does not fit in a size_t.
inline bool round_up(size_t bytes, size_t align, size_t *out) {
  if (bytes > SIZE_MAX - (align - 1)) return false;
  *out = (bytes + align - 1) & ~(align - 1);
  return true;
}

// Whether [a, a + a_bytes) and [b, b + b_bytes) share a byte.
inline bool ranges_overlap(const void *a, size_t a_bytes, const void *b, size_t b_bytes) {
  const auto pa = reinterpret_cast<uintptr_t>(a), pb = reinterpret_cast<uintptr_t>(b);
  return a_bytes > 0 && b_bytes > 0 && pa < pb + b_bytes && pb < pa + a_bytes;
}

struct FreeDeleter {
  void operator()(void *p) const;
};
using AlignedBuffer = std::unique_ptr<uint8_t[], FreeDeleter>;
// 64-byte aligned, pages touched so later use takes no page faults; empty
// when out of memory or above kMaxAllocBytes.
AlignedBuffer allocate_aligned(size_t bytes);

}  // namespace quorum
