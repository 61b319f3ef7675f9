// device_buffers_test.cpp: collectives on CUDA device buffers (staged through
// host memory when the transport cannot move device memory), checked against
// host results. Exits 77 (skipped) without a CUDA device.
#include <gtest/gtest.h>

#include <vector>

#include "runtime/memory.hpp"
#include "tests/support/thread_ranks.hpp"

#ifdef QUORUM_HAVE_CUDA
#include <cuda_runtime_api.h>

namespace quorum {
namespace {

TEST(DeviceBuffers, AllreduceInAndOutOfPlace) {
  for (int p : {1, 2, 3}) {
    test::run_ranks(p, [p](Communicator &c) {
      for (size_t n : {size_t(1), size_t(1000), size_t(1 << 20)}) {
        std::vector<float> host(n);
        for (size_t i = 0; i < n; ++i) host[i] = static_cast<float>((c.rank() + i) % 17);
        float *dev_in = nullptr, *dev_out = nullptr;
        ASSERT_EQ(cudaMalloc(reinterpret_cast<void **>(&dev_in), n * 4), cudaSuccess);
        ASSERT_EQ(cudaMalloc(reinterpret_cast<void **>(&dev_out), n * 4), cudaSuccess);
        ASSERT_EQ(buffer_kind(dev_in), BufferKind::Device);
        cudaMemcpy(dev_in, host.data(), n * 4, cudaMemcpyHostToDevice);
        ASSERT_EQ(c.allreduce(dev_in, dev_out, n, QUORUM_FLOAT32, QUORUM_SUM), QUORUM_OK)
            << last_error();
        ASSERT_EQ(c.allreduce(QUORUM_IN_PLACE, dev_in, n, QUORUM_FLOAT32, QUORUM_SUM), QUORUM_OK);
        std::vector<float> out(n), inplace(n);
        cudaMemcpy(out.data(), dev_out, n * 4, cudaMemcpyDeviceToHost);
        cudaMemcpy(inplace.data(), dev_in, n * 4, cudaMemcpyDeviceToHost);
        for (size_t i = 0; i < n; ++i) {
          float want = 0;
          for (int r = 0; r < p; ++r) want += static_cast<float>((r + i) % 17);
          ASSERT_EQ(out[i], want) << "rank " << c.rank() << " element " << i;
          ASSERT_EQ(inplace[i], want) << "rank " << c.rank() << " element " << i;
        }
        cudaFree(dev_in);
        cudaFree(dev_out);
      }
    });
  }
}

}  // namespace
}  // namespace quorum
#endif

int main(int argc, char **argv) {
  if (!quorum::cuda_available()) {
    printf("no CUDA device: skipped\n");
    return 77;
  }
  ::testing::InitGoogleTest(&argc, argv);
  return RUN_ALL_TESTS();
}
