// cpu_backend.hpp: the fast host backend.
//
// Convolutions run on oneDNN (its JIT kernels, blocked layouts internally, NCHW
// at the interface); linear layers on OpenBLAS sgemm; element-wise layers,
// pooling, softmax and SGD are plain loops. Threads: one per rank by default
// (OpenBLAS and oneDNN's OpenMP pool are both set to `threads`).
#pragma once

#include <memory>

#include "trainer/backend.hpp"

namespace quorum::trainer {

std::unique_ptr<Backend> make_cpu_backend(const BackendOptions &options);

}  // namespace quorum::trainer
