// cuda_unavailable.cpp: the cuda backend's entry points in builds without CUDA.
#include "trainer/cuda/cuda_backend.hpp"

namespace quorum::trainer {

Status make_cuda_backend(const BackendOptions &, std::unique_ptr<Backend> *, size_t) {
  return fail(QUORUM_ERR_UNSUPPORTED, "trainer",
              "no CUDA device: this build of quorum has no CUDA support (configured with "
              "-Dcuda=disabled or without nvcc); use --backend cpu");
}

int cuda_device_count(std::string *why) {
  if (why != nullptr) *why = "this build of quorum has no CUDA support";
  return 0;
}

Status cuda_backend_error(Backend &) {
  return kOk;
}

}  // namespace quorum::trainer
