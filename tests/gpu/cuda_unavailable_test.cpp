// cuda_unavailable_test.cpp: without a device (or without CUDA in the build),
// asking for the cuda backend is a clear error, not a crash. Exits 77 (SKIP)
// where a device is present: cuda_vs_ref_test covers that case.
#include <gtest/gtest.h>

#include <cstdio>
#include <string>

#include "trainer/cuda/cuda_backend.hpp"

namespace quorum::trainer {
namespace {

TEST(CudaUnavailable, MakeBackendSaysThereIsNoDevice) {
  std::unique_ptr<Backend> be;
  EXPECT_EQ(make_backend("cuda", BackendOptions{}, &be), QUORUM_ERR_UNSUPPORTED);
  EXPECT_EQ(be, nullptr);
  const std::string msg = last_error();
  EXPECT_NE(msg.find("no CUDA device: "), std::string::npos) << msg;
#if defined(QUORUM_HAVE_CUDA)
  EXPECT_NE(msg.find("cudaGetDeviceCount: "), std::string::npos) << msg;
#else
  EXPECT_NE(msg.find("no CUDA support"), std::string::npos) << msg;
#endif
  std::unique_ptr<Backend> direct;
  EXPECT_EQ(make_cuda_backend(BackendOptions{}, &direct), QUORUM_ERR_UNSUPPORTED);
  EXPECT_EQ(direct, nullptr);
}

TEST(CudaUnavailable, OtherBackendsStillWork) {
  std::unique_ptr<Backend> be;
  ASSERT_EQ(make_backend("cpu", BackendOptions{}, &be), kOk);
  EXPECT_EQ(cuda_backend_error(*be), kOk);
  std::string why;
  EXPECT_EQ(cuda_device_count(&why), 0);
  EXPECT_FALSE(why.empty());
}

}  // namespace
}  // namespace quorum::trainer

int main(int argc, char **argv) {
  std::string why;
  if (quorum::trainer::cuda_device_count(&why) > 0) {
    std::printf("SKIP: a CUDA device is present (tested by gpu_cuda_vs_ref)\n");
    return 77;
  }
  ::testing::InitGoogleTest(&argc, argv);
  return RUN_ALL_TESTS();
}
