// memory.hpp: where a buffer lives (host or CUDA device), copies between the
// two, and aligned host allocations reused across calls (page faults are
// expensive: scratch buffers are allocated once and kept).
#pragma once

#include <cstddef>
#include <memory>

#include "runtime/status.hpp"

namespace quorum {

enum class BufferKind { Host, Device };

// Host unless the CUDA runtime is built in, a device exists and ptr is device memory.
BufferKind buffer_kind(const void *ptr);
bool cuda_available();
// cudaMemcpy in either direction (kind of each side detected by the runtime).
Status device_copy(void *dst, const void *src, size_t bytes);

struct FreeDeleter {
  void operator()(void *p) const;
};
using AlignedBuffer = std::unique_ptr<uint8_t[], FreeDeleter>;
// 64-byte aligned, pages touched so later use takes no page faults.
AlignedBuffer allocate_aligned(size_t bytes);

}  // namespace quorum
