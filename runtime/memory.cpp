// memory.cpp: buffer kind detection through the CUDA runtime (when built in),
// and prefaulted aligned host allocations.
#include "runtime/memory.hpp"

#include <cstdlib>
#include <cstring>
#include <mutex>

#include "runtime/log.hpp"

#ifdef QUORUM_HAVE_CUDA
#include <cuda_runtime_api.h>
#endif

namespace quorum {

bool cuda_available() {
#ifdef QUORUM_HAVE_CUDA
  static const bool available = [] {
    int n = 0;
    cudaError_t e = cudaGetDeviceCount(&n);
    if (e != cudaSuccess) {
      QLOG_DEBUG("memory", "no CUDA device ({}): buffers are host memory", cudaGetErrorString(e));
      cudaGetLastError();
      return false;
    }
    return n > 0;
  }();
  return available;
#else
  return false;
#endif
}

BufferKind buffer_kind(const void *ptr) {
#ifdef QUORUM_HAVE_CUDA
  if (ptr == nullptr || !cuda_available()) return BufferKind::Host;
  cudaPointerAttributes attr{};
  if (cudaPointerGetAttributes(&attr, ptr) != cudaSuccess) {
    cudaGetLastError();
    return BufferKind::Host;
  }
  return attr.type == cudaMemoryTypeDevice ? BufferKind::Device : BufferKind::Host;
#else
  (void)ptr;
  return BufferKind::Host;
#endif
}

Status device_copy(void *dst, const void *src, size_t bytes) {
#ifdef QUORUM_HAVE_CUDA
  cudaError_t e = cudaMemcpy(dst, src, bytes, cudaMemcpyDefault);
  if (e != cudaSuccess) {
    return fail(QUORUM_ERR_TRANSPORT, "memory", "cudaMemcpy of {} B: {}", bytes,
                cudaGetErrorString(e));
  }
  return kOk;
#else
  (void)dst;
  (void)src;
  (void)bytes;
  return fail(QUORUM_ERR_UNSUPPORTED, "memory", "built without CUDA");
#endif
}

void FreeDeleter::operator()(void *p) const {
  std::free(p);
}

AlignedBuffer allocate_aligned(size_t bytes) {
  size_t rounded = 0;
  if (bytes > kMaxAllocBytes || !round_up(bytes, 64, &rounded)) return AlignedBuffer();
  if (rounded == 0) rounded = 64;
  void *p = std::aligned_alloc(64, rounded);
  if (p) std::memset(p, 0, rounded);
  return AlignedBuffer(static_cast<uint8_t *>(p));
}

}  // namespace quorum
