// cuda_kernels.hpp: launchers of the cuda backend's kernels (cuda_kernels.cu).
//
// Two generic kernels carry every functor of kernel_ops.hpp: a grid-stride
// `each` (f(i) for i < n) and a deterministic two-pass row reduction (fixed
// split count, double accumulation, no atomics, so sums are reproducible run
// to run). Instantiated in the .cu for exactly the functors the backend uses.
#pragma once

#include <cuda_runtime_api.h>

#include <cstddef>

#include "trainer/cuda/kernel_ops.hpp"

namespace quorum::trainer::kernels {

// Blocks per row of a reduction at most: the partials buffer holds rows x this.
constexpr int kReduceSplits = 64;

// Runs f(i) for every i < n on `stream`; returns the launch error (cudaSuccess
// also for n == 0, where nothing is launched).
template <class F>
cudaError_t launch_each(cudaStream_t stream, size_t n, const F &f);

// out[r] = sum over c < cols of f(r, c) for r < rows, summed in double and
// converted to T; `partials` is device memory for rows * kReduceSplits doubles.
template <class F, class T>
cudaError_t launch_reduce_rows(cudaStream_t stream, int rows, size_t cols, const F &f,
                               double *partials, T *out);

}  // namespace quorum::trainer::kernels
