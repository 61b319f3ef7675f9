// partial_device_test.cpp: partial allreduce with CUDA device buffers (staged
// through host memory): posts from and results into device memory must give
// the same rounds as host buffers. Exits 77 (skip) without a CUDA device.
#include <cuda_runtime_api.h>
#include <gtest/gtest.h>

#include <cstdio>
#include <vector>

#include "runtime/memory.hpp"
#include "tests/partial/partial_cases.hpp"
#include "tests/support/thread_ranks.hpp"

namespace quorum {
namespace {

using test::run_ranks;
namespace cases = test::partial_cases;

TEST(PartialDevice, DeviceBuffersConserveTheSum) {
  for (int p : {2, 3}) {
    run_ranks(p, [](Communicator &c) {
      const size_t n = 1000;
      PartialOptions o;
      o.max_staleness = 2;
      std::unique_ptr<PartialAllreduce> pa;
      ASSERT_EQ(PartialAllreduce::create(c, n, QUORUM_INT64, QUORUM_SUM, o, &pa), QUORUM_OK);
      int64_t *din = nullptr, *dout = nullptr;
      ASSERT_EQ(cudaMalloc(reinterpret_cast<void **>(&din), n * 8), cudaSuccess);
      ASSERT_EQ(cudaMalloc(reinterpret_cast<void **>(&dout), n * 8), cudaSuccess);
      ASSERT_EQ(buffer_kind(din), BufferKind::Device);
      std::vector<int64_t> in(n), out(n), posted(n, 0), got(n, 0);
      for (uint64_t k = 0; k < 7; ++k) {
        cases::fill_contribution(in, c.rank(), k);
        for (size_t i = 0; i < n; ++i) posted[i] += in[i];
        ASSERT_EQ(cudaMemcpy(din, in.data(), n * 8, cudaMemcpyHostToDevice), cudaSuccess);
        ASSERT_EQ(pa->post(din), QUORUM_OK) << last_error();
        ASSERT_EQ(pa->wait(dout), QUORUM_OK) << last_error();
        ASSERT_EQ(cudaMemcpy(out.data(), dout, n * 8, cudaMemcpyDeviceToHost), cudaSuccess);
        for (size_t i = 0; i < n; ++i) got[i] += out[i];
      }
      ASSERT_EQ(pa->flush(dout), QUORUM_OK) << last_error();
      ASSERT_EQ(cudaMemcpy(out.data(), dout, n * 8, cudaMemcpyDeviceToHost), cudaSuccess);
      for (size_t i = 0; i < n; ++i) got[i] += out[i];
      std::vector<int64_t> total(n);
      ASSERT_EQ(c.allreduce(posted.data(), total.data(), n, QUORUM_INT64, QUORUM_SUM), QUORUM_OK);
      EXPECT_EQ(got, total);
      EXPECT_EQ(pa->destroy(), QUORUM_OK) << last_error();
      cudaFree(din);
      cudaFree(dout);
    });
  }
}

}  // namespace
}  // namespace quorum

int main(int argc, char **argv) {
  if (!quorum::cuda_available()) {
    std::printf("no CUDA device: skipped\n");
    return 77;
  }
  ::testing::InitGoogleTest(&argc, argv);
  return RUN_ALL_TESTS();
}
