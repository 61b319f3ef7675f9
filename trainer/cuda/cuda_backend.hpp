// cuda_backend.hpp: the `cuda` trainer backend (one GPU per rank).
//
// Own kernels (kernel_ops.hpp, cuda_kernels.cu) for im2col/col2im, bias, ReLU,
// max-pool, softmax cross-entropy, SGD and the reductions; cuBLAS SGEMM for the
// convolution and linear products (kernel_backend.hpp has the algorithms). All
// buffers are device memory from cudaMalloc (MemoryKind::Cuda), the gradients
// one contiguous buffer as the interface requires; calls are queued on one
// stream, copies to the host and synchronize() wait for it. That stream is
// ordered with the legacy default stream, so a reducer that copies the
// gradients with plain cudaMemcpy needs no extra synchronisation.
//
// Errors: every CUDA and cuBLAS call is checked. The first failure is reported
// with the backend call, its shapes, the failing CUDA/cuBLAS call and its error
// string (quorum_last_error() and the log). Since the Backend interface has no
// status channel, QUORUM_CUDA_ON_ERROR decides what follows: `exit` (default)
// ends the process with status 1; `continue` makes the error sticky (every later
// call a no-op, allocations nullptr, losses NaN) and cuda_backend_error() reports
// it. A failed allocation alone is not sticky: alloc() returns nullptr.
//
// In builds without CUDA, and where no device is present, make_cuda_backend()
// fails with QUORUM_ERR_UNSUPPORTED ("no CUDA device: cudaGetDeviceCount: ...").
#pragma once

#include <memory>
#include <string>

#include "trainer/backend.hpp"

namespace quorum::trainer {

// Creates the backend on options.device. workspace_bytes bounds the im2col
// workspace (0: QUORUM_CUDA_WORKSPACE_MB).
Status make_cuda_backend(const BackendOptions &options, std::unique_ptr<Backend> *out,
                         size_t workspace_bytes = 0);

// Number of CUDA devices; 0 with the reason in *why when there is none (or no
// driver, or no CUDA in this build).
int cuda_device_count(std::string *why);

// The sticky error of a cuda backend (kOk while healthy, and for other backends).
Status cuda_backend_error(Backend &backend);

}  // namespace quorum::trainer
