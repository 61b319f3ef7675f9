// train_errors_test.cpp: train() refuses what it cannot run, and stops on an
// observer's error, each with a clear message.
#include <gtest/gtest.h>

#include <cmath>
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

// NaN fails every comparison: a range check alone lets it through.
TEST_F(Training, RefusesNonFiniteHyperParameters) {
  const double nan = std::nan(""), inf = INFINITY;
  for (double TrainConfig::*field : {&TrainConfig::lr, &TrainConfig::momentum,
                                     &TrainConfig::weight_decay, &TrainConfig::warmup_epochs}) {
    for (double bad : {nan, inf}) {
      TrainConfig c = cfg_;
      c.*field = bad;
      TrainResult r;
      EXPECT_EQ(try_run(c, &r), QUORUM_ERR_INVALID_ARG) << bad;
      EXPECT_NE(std::string(last_error()).find("bad hyper-parameters"), std::string::npos);
      EXPECT_EQ(r.global_step, 0);
    }
  }
}

// A distributed observer's replica check that cannot communicate fails the
// run with its error, at once (not as replicas that differ).
TEST_F(Training, StopsOnAnObserversError) {
  struct Failing : TrainObserver {
    Status on_epoch(const EpochReport &) override {
      ++epochs;
      return fail(QUORUM_ERR_PEER_FAILED, "test", "gathering replica checksums: rank 1 is gone");
    }
    int epochs = 0;
  } observer;
  TrainResult r;
  ASSERT_EQ(try_run(cfg_, &r, &observer), QUORUM_ERR_PEER_FAILED);
  EXPECT_NE(std::string(last_error()).find("rank 1 is gone"), std::string::npos) << last_error();
  EXPECT_EQ(observer.epochs, 1);
  EXPECT_EQ(r.global_step, 16);
}

}  // namespace
}  // namespace quorum::trainer
