// streaming.cpp: non-temporal copies and reductions (see streaming.hpp).
#include "collectives/reduce/streaming.hpp"

#include <algorithm>
#include <cstdint>
#include <cstring>

#if defined(__SSE2__)
#include <emmintrin.h>
#endif

#include "collectives/reduce/reduce_kernels.hpp"
#include "runtime/memory.hpp"

namespace quorum {

namespace {

// The copy without the closing fence (reduce_out_streaming fences once).
void copy_streaming_unfenced(void *dst, const void *src, size_t bytes) {
#if defined(__SSE2__)
  auto *d = static_cast<uint8_t *>(dst);
  const auto *s = static_cast<const uint8_t *>(src);
  const size_t head = std::min(bytes, (16 - reinterpret_cast<uintptr_t>(d) % 16) % 16);
  std::memcpy(d, s, head);
  d += head;
  s += head;
  bytes -= head;
  for (; bytes >= 64; bytes -= 64, d += 64, s += 64) {
    const __m128i x0 = _mm_loadu_si128(reinterpret_cast<const __m128i *>(s));
    const __m128i x1 = _mm_loadu_si128(reinterpret_cast<const __m128i *>(s + 16));
    const __m128i x2 = _mm_loadu_si128(reinterpret_cast<const __m128i *>(s + 32));
    const __m128i x3 = _mm_loadu_si128(reinterpret_cast<const __m128i *>(s + 48));
    _mm_stream_si128(reinterpret_cast<__m128i *>(d), x0);
    _mm_stream_si128(reinterpret_cast<__m128i *>(d + 16), x1);
    _mm_stream_si128(reinterpret_cast<__m128i *>(d + 32), x2);
    _mm_stream_si128(reinterpret_cast<__m128i *>(d + 48), x3);
  }
  for (; bytes >= 16; bytes -= 16, d += 16, s += 16) {
    _mm_stream_si128(reinterpret_cast<__m128i *>(d),
                     _mm_loadu_si128(reinterpret_cast<const __m128i *>(s)));
  }
  std::memcpy(d, s, bytes);
#else
  std::memcpy(dst, src, bytes);
#endif
}

void store_fence() {
#if defined(__SSE2__)
  _mm_sfence();
#endif
}

}  // namespace

void copy_streaming(void *dst, const void *src, size_t bytes) {
  copy_streaming_unfenced(dst, src, bytes);
  store_fence();
}

Status reduce_out_streaming(void *out, const void *a, const void *b, size_t count,
                            quorum_dtype_t dtype, quorum_op_t op, int average_over) {
  const bool average = op == QUORUM_AVG && average_over > 0;
  // Argument checks, the empty and the in-place cases: reduce_out's own.
  if (count == 0 || out == a || out == b || out == nullptr || a == nullptr || b == nullptr) {
    QUORUM_CHECK(reduce_out(out, a, b, count, dtype, op));
    return average && count > 0 ? scale_average(out, count, dtype, average_over) : kOk;
  }
  constexpr size_t kBlockBytes = 8192;
  alignas(64) uint8_t block[kBlockBytes];
  const size_t esize = dtype_size(dtype);
  if (esize == 0) return reduce_out(out, a, b, count, dtype, op);  // names the bad dtype
  const size_t per_block = kBlockBytes / esize;
  auto *o = static_cast<uint8_t *>(out);
  const auto *pa = static_cast<const uint8_t *>(a);
  const auto *pb = static_cast<const uint8_t *>(b);
  const size_t bytes = count * esize;
  if (ranges_overlap(o, bytes, pa, bytes) || ranges_overlap(o, bytes, pb, bytes)) {
    return reduce_out(out, a, b, count, dtype, op);
  }
  for (size_t done = 0; done < count; done += per_block) {
    const size_t n = std::min(per_block, count - done);
    const size_t off = done * esize;
    QUORUM_CHECK(reduce_out(block, pa + off, pb + off, n, dtype, op));
    if (average) QUORUM_CHECK(scale_average(block, n, dtype, average_over));
    copy_streaming_unfenced(o + off, block, n * esize);
  }
  store_fence();
  return kOk;
}

}  // namespace quorum
