// train_errors_test.cpp: train() refuses what it cannot run, with a clear
// message.
#include <gtest/gtest.h>

#include <string>

#include "tests/trainer/train_fixture.hpp"
#include "trainer/trainer.hpp"

namespace quorum::trainer {
namespace {

// Test images of another size than the training images (and the model's)
// would be assembled past the evaluation's buffers.
TEST_F(Training, RefusesTestImagesOfAnotherShape) {
  SyntheticOptions wide;
  wide.height = wide.width = 32;
  DataSplit other;
  make_synthetic(wide, &other);
  data_.test = other.test;
  TrainResult r;
  ASSERT_EQ(try_run(cfg_, &r), QUORUM_ERR_INVALID_ARG);
  EXPECT_NE(std::string(last_error()).find("test split of data set 'synthetic' has 1x32x32"),
            std::string::npos)
      << last_error();
}

}  // namespace
}  // namespace quorum::trainer
