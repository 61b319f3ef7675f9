// resume_test.cpp: what train() refuses to resume, what a resume with nothing
// left to do reports, that a diverging run keeps its last good checkpoint, and
// that the training time goes on across a resume.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <string>
#include <vector>

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

// A run that diverges between two checkpoints stops at the first of them
// with non-finite parameters, leaving the last finite one in the file.
TEST_F(Training, DivergingRunKeepsTheLastGoodCheckpoint) {
  TempDir d;
  TrainConfig first = cfg_;
  first.max_steps = 4;
  first.checkpoint_path = d.file("ckpt");
  run(first);
  TrainConfig wild = cfg_;
  wild.lr = 1e6;
  wild.resume_path = wild.checkpoint_path = d.file("ckpt");
  wild.checkpoint_every = 1;
  TrainResult r;
  ASSERT_EQ(try_run(wild, &r), QUORUM_ERR_INVALID_ARG);
  EXPECT_NE(std::string(last_error()).find("training diverged"), std::string::npos) << last_error();
  TrainingState s;
  ASSERT_EQ(load_checkpoint(d.file("ckpt"), &s), kOk) << last_error();
  EXPECT_GE(s.global_step, 4);
  EXPECT_LT(s.global_step, 15) << "lr 1e6 should diverge within a few steps";
  for (float p : s.params) ASSERT_TRUE(std::isfinite(p)) << "step " << s.global_step;
  EXPECT_EQ(d.entries(), 1);
}

// Resuming a finished run, or at --max-steps, trains nothing and says so
// through the result (start step = end step), with the checkpoint's parameters.
TEST_F(Training, ResumeWithNothingLeftTrainsNothing) {
  TempDir d;
  TrainConfig first = cfg_;
  first.checkpoint_path = d.file("ckpt");
  const TrainResult whole = run(first);
  TrainConfig again = cfg_;
  again.resume_path = d.file("ckpt");
  TrainResult r = run(again);
  EXPECT_EQ(r.start_step, 48);
  EXPECT_EQ(r.global_step, 48);
  EXPECT_EQ(r.params, whole.params);
  again.epochs = 4;
  again.max_steps = 40;
  r = run(again);
  EXPECT_EQ(r.start_step, r.global_step);
  again.max_steps = -1;
  r = run(again);
  EXPECT_EQ(r.start_step, 48);
  EXPECT_EQ(r.global_step, 64);
}

// Every training time a run reports, in order, and where it started.
struct TimeRecorder : TrainObserver {
  void on_start(const TrainConfig &, const RunStart &s) override { start = s; }
  void on_step(const StepProgress &p) override { seconds.push_back(p.train_seconds); }
  void on_eval(const EvalReport &e) override { seconds.push_back(e.train_seconds); }
  Status on_epoch(const EpochReport &r) override {
    seconds.push_back(r.train_seconds);
    return kOk;
  }
  RunStart start;
  std::vector<double> seconds;
};

// The checkpoint carries the training time: a resumed run starts from the
// time its first part trained (saved at the stop, mid-epoch) and reports
// times above it, rising, up to a total above the first part's.
TEST_F(Training, TrainingTimeContinuesAcrossAResume) {
  TempDir d;
  TrainConfig first = cfg_;
  first.max_steps = 21;  // inside epoch 2
  first.checkpoint_path = d.file("ckpt");
  first.evals_per_epoch = 2;
  TimeRecorder one;
  TrainResult part;
  ASSERT_EQ(try_run(first, &part, &one), kOk) << last_error();
  EXPECT_EQ(one.start.start_step, 0);
  EXPECT_EQ(one.start.start_train_seconds, 0.0);
  ASSERT_FALSE(one.seconds.empty());
  EXPECT_GT(part.train_seconds, 0.0);
  EXPECT_EQ(part.train_seconds, one.seconds.back());
  EXPECT_TRUE(std::is_sorted(one.seconds.begin(), one.seconds.end()));
  TrainingState saved;
  ASSERT_EQ(load_checkpoint(d.file("ckpt"), &saved), kOk) << last_error();
  EXPECT_EQ(saved.train_seconds, part.train_seconds);

  TrainConfig second = cfg_;
  second.resume_path = second.checkpoint_path = d.file("ckpt");
  second.evals_per_epoch = 2;
  TimeRecorder two;
  TrainResult rest;
  ASSERT_EQ(try_run(second, &rest, &two), kOk) << last_error();
  EXPECT_EQ(two.start.start_step, 21);
  EXPECT_EQ(two.start.start_train_seconds, part.train_seconds);
  ASSERT_FALSE(two.seconds.empty());
  EXPECT_GT(two.seconds.front(), part.train_seconds);
  EXPECT_TRUE(std::is_sorted(two.seconds.begin(), two.seconds.end()));
  EXPECT_GT(rest.train_seconds, part.train_seconds);
  EXPECT_EQ(rest.train_seconds, two.seconds.back());
  ASSERT_EQ(load_checkpoint(d.file("ckpt"), &saved), kOk) << last_error();
  EXPECT_EQ(saved.train_seconds, rest.train_seconds);
  // Resuming with nothing left to train keeps the time where it was.
  TimeRecorder three;
  TrainResult none;
  ASSERT_EQ(try_run(second, &none, &three), kOk) << last_error();
  EXPECT_EQ(none.start_step, none.global_step);
  EXPECT_EQ(three.start.start_train_seconds, rest.train_seconds);
  EXPECT_EQ(none.train_seconds, rest.train_seconds);
}

}  // namespace
}  // namespace quorum::trainer
