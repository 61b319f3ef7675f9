// cuda_vs_ref_test.cpp: the cuda backend on a real device against `ref`: every
// kernel and layer forward and backward, the loss, SGD, reductions and whole
// training steps (backend_checks.hpp), plus device-only properties: memory
// kind, device selection errors, bitwise run-to-run determinism, and the clear
// exit on a CUDA fault. Exits 77 (meson SKIP) where no device is present.
#include <cstdio>
#include <cstdlib>

#include "runtime/knobs.hpp"
#include "tests/gpu/kernel_backend_checks.hpp"
#include "trainer/cuda/cuda_backend.hpp"

namespace quorum::trainer::checks {
namespace {

TEST(CudaBackend, IsRegisteredAndUsesDeviceMemory) {
  std::unique_ptr<Backend> be;
  ASSERT_EQ(make_backend("cuda", BackendOptions{}, &be), kOk) << last_error();
  EXPECT_EQ(be->name(), "cuda");
  EXPECT_EQ(be->memory_kind(), MemoryKind::Cuda);
  EXPECT_EQ(cuda_backend_error(*be), kOk);
}

TEST(CudaBackend, MissingDeviceOrdinalIsAClearError) {
  std::string why;
  const int count = cuda_device_count(&why);
  std::unique_ptr<Backend> be;
  BackendOptions options;
  options.device = count;  // one past the last
  EXPECT_EQ(make_backend("cuda", options, &be), QUORUM_ERR_INVALID_ARG);
  EXPECT_EQ(be, nullptr);
  EXPECT_NE(std::string(last_error()).find("device " + std::to_string(count) + " requested"),
            std::string::npos)
      << last_error();
  options.device = -1;
  EXPECT_EQ(make_backend("cuda", options, &be), QUORUM_ERR_INVALID_ARG);
}

// One fm-s step from the same state twice: the gradients must be bitwise equal
// (one stream, fixed-order reductions, no atomics), which bit-identical resume needs.
TEST(CudaBackend, TrainingStepIsBitwiseDeterministic) {
  ModelSpec spec;
  ASSERT_EQ(find_model("fm-s", &spec), kOk);
  std::unique_ptr<Backend> be = target().make(0);
  ASSERT_NE(be, nullptr);
  std::unique_ptr<Model<float>> m;
  const int batch = 64;
  ASSERT_EQ(Model<float>::create(spec, be.get(), batch, &m), kOk);
  Vec images = random_vec(size_t(batch) * m->image_size(), 5);
  std::vector<int32_t> labels(batch);
  for (int i = 0; i < batch; ++i) labels[i] = i % spec.classes;
  Vec first, again;
  double loss1 = 0, loss2 = 0;
  int64_t c1 = 0, c2 = 0;
  for (int run = 0; run < 2; ++run) {
    m->init_params(11);
    m->load_batch(batch, images.data(), labels.data());
    m->forward(batch);
    m->loss(batch, run == 0 ? &loss1 : &loss2, run == 0 ? &c1 : &c2);
    m->backward(batch);
    m->read_grads(run == 0 ? &first : &again);
  }
  EXPECT_EQ(loss1, loss2);
  EXPECT_EQ(c1, c2);
  ASSERT_EQ(first.size(), again.size());
  EXPECT_EQ(std::memcmp(first.data(), again.data(), first.size() * sizeof(float)), 0);
}

// A kernel fault (here: a bogus device pointer) ends the process with a message
// naming the backend call and the CUDA error, instead of a crash or silent NaNs.
// Runs in a re-executed child: the fault poisons the CUDA context of its process.
TEST(CudaBackendDeathTest, DeviceFaultExitsWithAClearMessage) {
  GTEST_FLAG_SET(death_test_style, "threadsafe");
  EXPECT_EXIT(
      {
        setenv("QUORUM_CUDA_ON_ERROR", "exit", 1);
        find_knob("QUORUM_CUDA_ON_ERROR")->reload();
        std::unique_ptr<Backend> be;
        if (make_backend("cuda", BackendOptions{}, &be) != kOk) std::exit(3);
        auto *bogus = reinterpret_cast<float *>(uintptr_t(1) << 40);
        be->relu_forward(1 << 20, bogus, bogus);
        be->synchronize();
        std::exit(4);  // not reached when the fault is reported
      },
      ::testing::ExitedWithCode(1), "cuda backend \\(device 0\\).*cudaStreamSynchronize.*exiting");
}

}  // namespace
}  // namespace quorum::trainer::checks

int main(int argc, char **argv) {
  using namespace quorum::trainer;
  std::string why;
  if (cuda_device_count(&why) <= 0) {
    std::printf("SKIP: no CUDA device: %s\n", why.c_str());
    return 77;
  }
  // The checks look at sticky errors themselves (the death test switches back to exit).
  setenv("QUORUM_CUDA_ON_ERROR", "continue", 1);
  checks::target().make = [](size_t workspace_bytes) -> std::unique_ptr<Backend> {
    std::unique_ptr<Backend> be;
    if (make_cuda_backend(BackendOptions{}, &be, workspace_bytes) != quorum::kOk)
      ADD_FAILURE() << quorum::last_error();
    return be;
  };
  checks::target().error = [](Backend &b) { return cuda_backend_error(b); };
  ::testing::InitGoogleTest(&argc, argv);
  return RUN_ALL_TESTS();
}
