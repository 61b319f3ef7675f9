// kernel_backend_checks.hpp: checks of the cuda backend (kernels::KernelBackend)
// beyond the checks every backend passes (tests/trainer/backend_checks.hpp):
// a workspace that splits convolutions into chunks, a failed allocation, and
// the sticky error of a bad label. Shared by the device test and the CPU
// emulation; target().make(bytes) builds a backend with that workspace.
#pragma once

#include "tests/trainer/backend_checks.hpp"

namespace quorum::trainer::checks {

// A small workspace splits the batch into chunks (one image, then a few with a
// shorter last chunk): the results must not change.
TEST_F(BackendVsRef, Conv2dInChunks) {
  for (size_t budget : {size_t(1), size_t(200000)}) {
    SCOPED_TRACE(::testing::Message() << "workspace budget " << budget);
    std::unique_ptr<Backend> small = target().make(budget);
    ASSERT_NE(small, nullptr);
    for (const Conv2dShape &s : kConvShapes) check_conv(small.get(), s);
    EXPECT_EQ(target().error(*small), kOk) << last_error();
  }
}

// An allocation the device cannot hold returns nullptr and leaves the backend usable.
TEST_F(BackendVsRef, FailedAllocationReturnsNull) {
  EXPECT_EQ(be_->alloc(size_t(1) << 52), nullptr);
  EXPECT_EQ(target().error(*be_), kOk);
  DeviceBuffers d(be_.get());
  float *p = d.put(Vec{1.f, 2.f});
  be_->scale(2, 2.0, p);
  EXPECT_EQ(d.get(p, 2), (Vec{2.f, 4.f}));
}

// A label outside [0, classes) is a clear, sticky error, not a wrong loss.
TEST(KernelErrors, BadLabelIsAStickyError) {
  std::unique_ptr<Backend> be = target().make(0);
  ASSERT_NE(be, nullptr);
  DeviceBuffers d(be.get());
  float *z = d.put(random_vec(30, 19));
  int32_t *labels = d.put_labels({1, 10, 2});
  double loss = 0;
  int64_t correct = -1;
  be->softmax_xent(3, 10, z, labels, nullptr, &loss, &correct);
  EXPECT_TRUE(std::isnan(loss));
  EXPECT_EQ(correct, 0);
  EXPECT_EQ(target().error(*be), QUORUM_ERR_INVALID_ARG);
  const std::string msg = last_error();
  EXPECT_NE(msg.find("softmax_xent"), std::string::npos) << msg;
  EXPECT_NE(msg.find("1 of 3 labels outside [0, 10)"), std::string::npos) << msg;
  // Sticky: later calls do nothing, allocations fail, reductions read NaN.
  EXPECT_EQ(be->alloc(64), nullptr);
  EXPECT_TRUE(std::isnan(be->sum_squares(30, z)));
}

TEST(WholeModel, FmSTrainingStepsAgreeInChunks) {
  expect_same_training("fm-s", 6, 2, 1);
}
}  // namespace quorum::trainer::checks
