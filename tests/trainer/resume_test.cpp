// resume_test.cpp: what train() refuses to resume.
#include <gtest/gtest.h>

#include <string>

#include "tests/trainer/train_fixture.hpp"
#include "trainer/checkpoint.hpp"
#include "trainer/trainer.hpp"

namespace quorum::trainer {
namespace {

// A checkpoint of 512 examples (16 steps per epoch) cannot resume on 256 (8):
// its step 8 of epoch 1 would end that epoch without a step (past it, as in
// the CLI test, the epoch would never end).
TEST_F(Training, ResumeRefusesOtherData) {
  TempDir d;
  TrainConfig first = cfg_;
  first.max_steps = 24;
  first.checkpoint_path = d.file("ckpt");
  run(first);
  data_.train.truncate(256);
  TrainConfig other = cfg_;
  other.resume_path = d.file("ckpt");
  TrainResult r;
  ASSERT_EQ(try_run(other, &r), QUORUM_ERR_MISMATCH);
  const std::string e = last_error();
  EXPECT_NE(e.find("512 training examples (16 steps per epoch)"), std::string::npos) << e;
  EXPECT_NE(e.find("with 256 (8 steps per epoch)"), std::string::npos) << e;
  EXPECT_NE(e.find("--train-limit"), std::string::npos) << e;
  // The same count of another data set is other data too.
  SetUp();
  data_.train.name = "other";
  ASSERT_EQ(try_run(other, &r), QUORUM_ERR_MISMATCH);
  EXPECT_NE(std::string(last_error()).find("'other'"), std::string::npos) << last_error();
}

}  // namespace
}  // namespace quorum::trainer
