// ema_test.cpp: --ema-decay, the moving average of the parameters that the
// evaluations score. It follows its formula step by step, leaves the training
// itself unchanged, is what the evaluations score, resumes bit-identically from
// a checkpoint, and a resume that would lose it is refused. Also the checkpoint
// format's moving average (and version 2 files, which have none).
#include <gtest/gtest.h>
#include <zlib.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <fstream>
#include <limits>
#include <string>
#include <vector>

#include "tests/trainer/train_fixture.hpp"
#include "trainer/checkpoint.hpp"
#include "trainer/evaluation.hpp"
#include "trainer/model.hpp"
#include "trainer/model_spec.hpp"
#include "trainer/trainer.hpp"

namespace quorum::trainer {
namespace {

constexpr double kDecay = 0.9;

class Averaging : public Training {
 protected:
  // The parameters after `steps` steps of cfg_ (no averaging).
  std::vector<float> params_after(int64_t steps) {
    TrainConfig c = cfg_;
    c.max_steps = steps;
    return run(c).params;
  }
  // The checkpoint that a run of `c` leaves.
  TrainingState checkpoint_of(TrainConfig c, const TempDir &d) {
    c.checkpoint_path = d.file("ckpt");
    run(c);
    TrainingState s;
    EXPECT_EQ(load_checkpoint(c.checkpoint_path, &s), kOk) << last_error();
    return s;
  }
  // Test accuracy of `params` on the test split, one rank.
  double accuracy_of(const std::vector<float> &params) {
    std::unique_ptr<Backend> be;
    EXPECT_EQ(make_backend("cpu", BackendOptions{}, &be), kOk);
    ModelSpec spec;
    EXPECT_EQ(find_model(cfg_.model, &spec), kOk);
    std::unique_ptr<Model<float>> m;
    EXPECT_EQ(Model<float>::create(spec, be.get(), cfg_.batch, &m), kOk);
    m->write_params(params);
    LocalGradientReducer reducer;
    Evaluation e;
    EXPECT_EQ(evaluate_test_set(*m, data_.test, &reducer, &e), kOk) << last_error();
    return e.accuracy;
  }
};

// avg_0 = the initial parameters; after step t (from 0), avg = d avg + (1 - d)
// params with d = min(decay, (1 + t) / (10 + t)): the first steps weigh most.
TEST_F(Averaging, FollowsItsFormulaAndLeavesTheTrainingAlone) {
  const int64_t steps = 5;
  std::vector<float> want = params_after(0);  // the initial parameters
  for (int64_t t = 0; t < steps; ++t) {
    const std::vector<float> p = params_after(t + 1);
    const double d = std::min(kDecay, double(1 + t) / double(10 + t));
    for (size_t i = 0; i < want.size(); ++i) want[i] = float(d) * want[i] + float(1 - d) * p[i];
  }
  TempDir dir;
  TrainConfig c = cfg_;
  c.max_steps = steps;
  c.ema_decay = kDecay;
  const TrainingState s = checkpoint_of(c, dir);
  ASSERT_EQ(s.ema.size(), want.size());
  for (size_t i = 0; i < want.size(); ++i)
    ASSERT_NEAR(s.ema[i], want[i], 1e-6f * (1 + std::fabs(want[i]))) << "parameter " << i;
  // The average is not the parameters (5 steps moved them), and averaging
  // changed no bit of the training.
  EXPECT_NE(s.ema, s.params);
  EXPECT_EQ(s.params, params_after(steps));
}

// The evaluations score the average with --ema-decay, the parameters without.
TEST_F(Averaging, TheEvaluationsScoreTheAverage) {
  TempDir dir;
  TrainConfig c = cfg_;
  c.max_steps = 20;  // mid-epoch 2: the evaluation at the stop scores it
  c.ema_decay = kDecay;
  c.checkpoint_path = dir.file("ckpt");
  const TrainResult averaged = run(c);
  TrainingState s;
  ASSERT_EQ(load_checkpoint(c.checkpoint_path, &s), kOk) << last_error();
  EXPECT_EQ(averaged.last.test_accuracy, accuracy_of(s.ema));
  EXPECT_EQ(averaged.params, s.params) << "the result is the parameters, not the average";
  c.ema_decay = 0;
  c.checkpoint_path.clear();
  const TrainResult plain = run(c);
  EXPECT_EQ(plain.last.test_accuracy, accuracy_of(plain.params));
  EXPECT_EQ(plain.params, averaged.params);
}

// Stopped and resumed, an averaging run ends as one never interrupted: the
// same parameters, average and scores.
TEST_F(Averaging, ResumeIsBitIdentical) {
  TempDir whole_dir, part_dir;
  TrainConfig c = cfg_;
  c.ema_decay = kDecay;
  c.checkpoint_path = whole_dir.file("ckpt");
  const TrainResult whole = run(c);
  TrainingState whole_state;
  ASSERT_EQ(load_checkpoint(c.checkpoint_path, &whole_state), kOk);
  TrainConfig first = c;
  first.max_steps = 21;
  first.checkpoint_path = part_dir.file("ckpt");
  run(first);
  TrainConfig second = c;
  second.resume_path = second.checkpoint_path = part_dir.file("ckpt");
  const TrainResult rest = run(second);
  TrainingState rest_state;
  ASSERT_EQ(load_checkpoint(second.checkpoint_path, &rest_state), kOk);
  EXPECT_EQ(rest.params, whole.params);
  ASSERT_EQ(rest_state.ema.size(), whole_state.ema.size());
  EXPECT_EQ(0, std::memcmp(rest_state.ema.data(), whole_state.ema.data(),
                           whole_state.ema.size() * sizeof(float)));
  EXPECT_EQ(rest.last.test_accuracy, whole.last.test_accuracy);
  EXPECT_EQ(rest.last.test_loss, whole.last.test_loss);
}

// A checkpoint without an average cannot continue one; the other way round
// the average is left behind, and the checkpoints written then hold none.
TEST_F(Averaging, ResumeWithoutTheAverageIsRefused) {
  TempDir d;
  TrainConfig first = cfg_;
  first.max_steps = 8;
  first.checkpoint_path = d.file("plain");
  run(first);
  TrainConfig averaging = cfg_;
  averaging.ema_decay = kDecay;
  averaging.resume_path = d.file("plain");
  TrainResult r;
  ASSERT_EQ(try_run(averaging, &r), QUORUM_ERR_MISMATCH);
  const std::string e = last_error();
  EXPECT_NE(e.find("no moving average"), std::string::npos) << e;
  EXPECT_NE(e.find(d.file("plain")), std::string::npos) << e;

  first.ema_decay = kDecay;
  first.checkpoint_path = d.file("averaged");
  run(first);
  TrainConfig plain = cfg_;
  plain.max_steps = 12;
  plain.resume_path = plain.checkpoint_path = d.file("averaged");
  run(plain);
  TrainingState s;
  ASSERT_EQ(load_checkpoint(d.file("averaged"), &s), kOk);
  EXPECT_EQ(s.global_step, 12);
  EXPECT_TRUE(s.ema.empty());
}

TEST_F(Averaging, BadDecaysAreRefused) {
  for (double bad : {-0.1, 1.0, 2.0, std::numeric_limits<double>::quiet_NaN(),
                     std::numeric_limits<double>::infinity()}) {
    TrainConfig c = cfg_;
    c.ema_decay = bad;
    TrainResult r;
    ASSERT_EQ(try_run(c, &r), QUORUM_ERR_INVALID_ARG) << bad;
    EXPECT_NE(std::string(last_error()).find("EMA decay"), std::string::npos) << last_error();
  }
}

TrainingState sample_state(bool with_average) {
  TrainingState s;
  s.model = "fm-s", s.data = "synthetic";
  s.seed = 3, s.batch = 16, s.world = 2, s.train_count = 320, s.steps_per_epoch = 10;
  s.global_step = 12, s.epoch = 1, s.step_in_epoch = 2;
  for (int i = 0; i < 100; ++i) {
    s.params.push_back(float(i));
    s.momentum.push_back(float(-i));
    if (with_average) s.ema.push_back(float(i) + 0.5f);
  }
  return s;
}

std::string file_bytes(const std::string &path) {
  std::ifstream f(path, std::ios::binary);
  return {std::istreambuf_iterator<char>(f), {}};
}

void put_with_crc(const std::string &path, std::string bytes) {
  const uint32_t crc =
      uint32_t(crc32(0L, reinterpret_cast<const Bytef *>(bytes.data()), uInt(bytes.size() - 4)));
  std::memcpy(bytes.data() + bytes.size() - 4, &crc, 4);
  std::ofstream(path, std::ios::binary) << bytes;
}

TEST(CheckpointAverage, RoundTripsAndRejectsABadCount) {
  TempDir d;
  const std::string path = d.file("ckpt");
  TrainingState back;
  ASSERT_EQ(save_checkpoint(path, sample_state(true)), kOk) << last_error();
  ASSERT_EQ(load_checkpoint(path, &back), kOk) << last_error();
  EXPECT_EQ(back.ema, sample_state(true).ema);
  ASSERT_EQ(save_checkpoint(path, sample_state(false)), kOk);
  ASSERT_EQ(load_checkpoint(path, &back), kOk);
  EXPECT_TRUE(back.ema.empty());
  // An average of another size is not written, nor read.
  TrainingState odd = sample_state(true);
  odd.ema.pop_back();
  EXPECT_EQ(save_checkpoint(path, odd), QUORUM_ERR_INTERNAL);
  ASSERT_EQ(save_checkpoint(path, sample_state(true)), kOk);
  std::string bytes = file_bytes(path);
  // Before the CRC: the average's count and floats, then the training time,
  // the epoch start and the (empty) policy state.
  const size_t after = sizeof(double) + sizeof(int64_t) + sizeof(uint32_t);
  const size_t count_at = bytes.size() - 4 - after - 100 * sizeof(float) - sizeof(uint64_t);
  for (uint64_t bad : {uint64_t{99}, uint64_t{101}, ~uint64_t{0}}) {
    std::string b = bytes;
    std::memcpy(b.data() + count_at, &bad, sizeof bad);
    put_with_crc(path, b);
    ASSERT_EQ(load_checkpoint(path, &back), QUORUM_ERR_INVALID_ARG) << bad;
    EXPECT_NE(std::string(last_error()).find("moving average of"), std::string::npos)
        << last_error();
  }
}

// Version 2 (before the average) is read as a checkpoint without one.
TEST(CheckpointAverage, ReadsVersion2) {
  TempDir d;
  const std::string path = d.file("ckpt");
  ASSERT_EQ(save_checkpoint(path, sample_state(false)), kOk);
  std::string bytes = file_bytes(path);
  // Version 2 ends with the momentum: drop the average's count (0), the
  // training time (version 4), the epoch start and the empty policy state
  // (version 5) before the CRC.
  const size_t later = sizeof(uint64_t) + sizeof(double) + sizeof(int64_t) + sizeof(uint32_t);
  bytes.erase(bytes.size() - 4 - later, later);
  bytes[8] = 2;
  put_with_crc(path, bytes);
  TrainingState back;
  ASSERT_EQ(load_checkpoint(path, &back), kOk) << last_error();
  EXPECT_EQ(back.params, sample_state(false).params);
  EXPECT_EQ(back.momentum, sample_state(false).momentum);
  EXPECT_TRUE(back.ema.empty());
  EXPECT_EQ(back.global_step, 12);
}

}  // namespace
}  // namespace quorum::trainer
