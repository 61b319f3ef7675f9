// cpu_backend.hpp: the fast host backend.
//
// Convolutions run on oneDNN (its JIT kernels, blocked layouts internally, NCHW
// at the interface); linear layers on oneDNN's sgemm; element-wise layers,
// pooling, softmax and SGD are plain loops. A conv followed by a relu and a
// 2x2 max-pool (conv2d_relu_maxpool2_*) keeps the conv's output and its
// gradient in oneDNN's blocked layout (nChw16c), which the pool reads and
// writes, and so do two such blocks in a row for the tensor between them: on
// fm-s that saves seven reorders a step (the first four 0.6-1.4 ms of 7-9 ms,
// the other three 0-1 ms more, one thread, measured alternating). Threads:
// one per rank by default (oneDNN's OpenMP pool is set to `threads`).
//
// Why not OpenBLAS for the linear layers: Debian 12's OpenBLAS (0.3.21, built
// for every x86 core and choosing at load time by CPU model) does not know
// recent Xeon models (Emerald Rapids, family 6 model 207) and falls back to
// its Prescott (SSE3) kernels there. On fm-s's three linear-layer GEMMs (batch
// 64, 1568 x 128) it took 875-1045 us each against 176-232 us with
// OPENBLAS_CORETYPE=Cooperlake and 143-190 us with oneDNN's sgemm, one thread.
#pragma once

#include <memory>

#include "trainer/backend.hpp"

namespace quorum::trainer {

std::unique_ptr<Backend> make_cpu_backend(const BackendOptions &options);

}  // namespace quorum::trainer
