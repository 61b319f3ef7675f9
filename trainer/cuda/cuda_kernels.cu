// cuda_kernels.cu: the two generic kernels of the cuda backend and their
// instantiations for the functors of kernel_ops.hpp (see cuda_kernels.hpp).
#include <algorithm>

#include "trainer/cuda/cuda_kernels.hpp"

namespace quorum::trainer::kernels {

namespace {

constexpr int kThreads = 256;
// Grid-stride loops: more blocks than this only adds scheduling overhead.
constexpr size_t kMaxBlocks = 65536;

template <class F>
__global__ void each_kernel(size_t n, F f) {
  const size_t stride = size_t(blockDim.x) * gridDim.x;
  for (size_t i = size_t(blockIdx.x) * blockDim.x + threadIdx.x; i < n; i += stride) f(i);
}

// Block (split, row) sums its strided share of the row into partials[row][split].
template <class F>
__global__ void reduce_partials_kernel(int rows, size_t cols, F f, double *partials) {
  __shared__ double shared[kThreads];
  const size_t splits = gridDim.x;
  for (int row = blockIdx.y; row < rows; row += gridDim.y) {
    double acc = 0.0;
    for (size_t c = size_t(blockIdx.x) * kThreads + threadIdx.x; c < cols; c += splits * kThreads)
      acc += f(size_t(row), c);
    shared[threadIdx.x] = acc;
    __syncthreads();
    for (int half = kThreads / 2; half > 0; half /= 2) {
      if (int(threadIdx.x) < half) shared[threadIdx.x] += shared[threadIdx.x + half];
      __syncthreads();
    }
    if (threadIdx.x == 0) partials[size_t(row) * splits + blockIdx.x] = shared[0];
    __syncthreads();
  }
}

// One thread per row adds the row's partials in order.
template <class T>
__global__ void reduce_final_kernel(int rows, int splits, const double *partials, T *out) {
  for (int row = blockIdx.x * blockDim.x + threadIdx.x; row < rows; row += blockDim.x * gridDim.x) {
    double acc = 0.0;
    for (int s = 0; s < splits; ++s) acc += partials[size_t(row) * splits + s];
    out[row] = T(acc);
  }
}

}  // namespace

template <class F>
cudaError_t launch_each(cudaStream_t stream, size_t n, const F &f) {
  if (n == 0) return cudaSuccess;
  const size_t blocks = std::min((n + kThreads - 1) / kThreads, kMaxBlocks);
  each_kernel<F><<<unsigned(blocks), kThreads, 0, stream>>>(n, f);
  return cudaGetLastError();
}

template <class F, class T>
cudaError_t launch_reduce_rows(cudaStream_t stream, int rows, size_t cols, const F &f,
                               double *partials, T *out) {
  if (rows <= 0) return cudaSuccess;
  // About four elements per thread before the tree, at most kReduceSplits blocks per row.
  const size_t per_block = size_t(kThreads) * 4;
  const int splits =
      int(std::clamp<size_t>((cols + per_block - 1) / per_block, 1, size_t(kReduceSplits)));
  const dim3 grid(unsigned(splits), unsigned(std::min(rows, 65535)));
  reduce_partials_kernel<F><<<grid, kThreads, 0, stream>>>(rows, cols, f, partials);
  cudaError_t e = cudaGetLastError();
  if (e != cudaSuccess) return e;
  const int final_blocks = std::min((rows + kThreads - 1) / kThreads, 1024);
  reduce_final_kernel<T>
      <<<unsigned(final_blocks), kThreads, 0, stream>>>(rows, splits, partials, out);
  return cudaGetLastError();
}

#define QUORUM_EACH(F) template cudaError_t launch_each<F>(cudaStream_t, size_t, const F &);
QUORUM_EACH(Im2col)
QUORUM_EACH(Col2im)
QUORUM_EACH(NchwToCnp)
QUORUM_EACH(CnpToNchwBias)
QUORUM_EACH(BroadcastBias)
QUORUM_EACH(ReluForward)
QUORUM_EACH(ReluBackward)
QUORUM_EACH(MaxPoolForward)
QUORUM_EACH(MaxPoolBackward)
QUORUM_EACH(SoftmaxXentRow)
QUORUM_EACH(SgdUpdate)
QUORUM_EACH(Scale)
QUORUM_EACH(AverageInto)
#undef QUORUM_EACH

#define QUORUM_REDUCE(F, T)                                                                     \
  template cudaError_t launch_reduce_rows<F, T>(cudaStream_t, int, size_t, const F &, double *, \
                                                T *);
QUORUM_REDUCE(ConvBiasGradTerm, float)
QUORUM_REDUCE(LinearBiasGradTerm, float)
QUORUM_REDUCE(SquareTerm, double)
QUORUM_REDUCE(XentTotalsTerm, double)
#undef QUORUM_REDUCE

}  // namespace quorum::trainer::kernels
