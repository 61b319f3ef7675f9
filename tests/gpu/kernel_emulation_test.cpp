// kernel_emulation_test.cpp: the cuda backend's algorithms (kernel_backend.hpp and
// the functors of kernel_ops.hpp) run on the CPU through HostExec and are
// checked against `ref` with the same checks as the device test. Runs on every
// machine, with or without CUDA: it is what verifies the index arithmetic, the
// chunking and the GEMM arguments where no GPU exists.
#include "tests/gpu/host_exec.hpp"
#include "tests/gpu/kernel_backend_checks.hpp"

namespace quorum::trainer::checks {
namespace {

using EmulatedBackend = kernels::KernelBackend<kernels::HostExec>;

// The column-major GEMM arguments are the backend's contract with cuBLAS:
// check the row-major helper directly on a small product.
TEST(RowMajorGemm, MatchesNaiveProducts) {
  kernels::HostExec exec;
  const int M = 3, N = 4, K = 5;
  Vec a = random_vec(M * K, 1), b = random_vec(K * N, 2);
  for (bool ta : {false, true})
    for (bool tb : {false, true}) {
      // Stored shapes: A is MxK (or KxM when transposed), B is KxN (or NxK).
      Vec c(M * N, 0.f), want(M * N, 0.f);
      for (int i = 0; i < M; ++i)
        for (int j = 0; j < N; ++j)
          for (int k = 0; k < K; ++k) {
            float av = ta ? a[k * M + i] : a[i * K + k];
            float bv = tb ? b[j * K + k] : b[k * N + j];
            want[i * N + j] += av * bv;
          }
      exec.gemm(kernels::row_major_gemm(ta, tb, M, N, K, a.data(), ta ? M : K, b.data(), tb ? K : N,
                                        0.f, c.data(), N));
      expect_close("gemm", c, want, 1e-6);
    }
}

}  // namespace
}  // namespace quorum::trainer::checks

int main(int argc, char **argv) {
  using namespace quorum::trainer;
  checks::target().make = [](size_t workspace_bytes) -> std::unique_ptr<Backend> {
    return std::make_unique<checks::EmulatedBackend>(
        "cuda-emulated", std::make_unique<kernels::HostExec>(),
        workspace_bytes == 0 ? size_t(64) << 20 : workspace_bytes);
  };
  checks::target().error = [](Backend &b) {
    return dynamic_cast<checks::EmulatedBackend &>(b).error();
  };
  ::testing::InitGoogleTest(&argc, argv);
  return RUN_ALL_TESTS();
}
