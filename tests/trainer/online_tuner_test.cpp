// online_tuner_test.cpp: the decisions of quorum-train --batch auto's tuner
// (trainer/tuner/online_tuner.hpp) from a known step-time table and known
// gradient noise, without training: a switch to the batch the model predicts
// fastest with the square-root rate, a kept batch when the gain is under 5%,
// the stop at the target, and its state carried through a checkpoint's text.
#include <gtest/gtest.h>

#include <cmath>
#include <string>
#include <vector>

#include "trainer/gradient_reducer.hpp"
#include "trainer/trainer.hpp"
#include "trainer/tuner/online_tuner.hpp"

namespace tu = quorum::trainer::tuner;
namespace qt = quorum::trainer;

namespace {

// A tuner state with step times `ms` at local batches 16, 32, 64, 128, at
// batch 32 (lr 0.02 x sqrt(32 / 64)), 10000 examples per rank.
std::string state_with(const std::vector<double> &ms) {
  std::string s = "quorum-online-tuner 1\ngrid 4";
  const int batches[] = {16, 32, 64, 128};
  for (size_t i = 0; i < 4; ++i)
    s += " " + std::to_string(batches[i]) + " " + std::to_string(ms[i] / 1e3);
  s += "\nallreduce 0 0 1 1 861504\nplan 32 0.0141421356 0.0141421356 0 0\n";
  s += "noise 0 0 0 0 0 0 0 0 0\nnoise 0 0 0 0 0 0 0 0 0\nrun 10000 1.5 0\n";
  return s;
}

// Samples of a gradient with |G|^2 = 1 and tr(Sigma) = `trace` (exact norms).
void feed(tu::OnlineTuner *t, double trace, int n = 20) {
  for (int i = 0; i < n; ++i) t->add_noise_sample(16, 1 + trace / 16, 32, 1 + trace / 32);
}

struct Decisions {
  std::vector<tu::TunerDecision> all;
  tu::OnlineTuner::Log log() {
    return [this](const tu::TunerDecision &d) { all.push_back(d); };
  }
};

qt::EpochReport epoch(double accuracy) {
  qt::EpochReport r;
  r.epoch = 0, r.test_accuracy = accuracy, r.complete = true;
  return r;
}

tu::OnlineTunerOptions options() {
  tu::OnlineTunerOptions o;
  o.target_accuracy = 0.9, o.lr0 = 0.02, o.lr_b0 = 64;
  return o;
}

}  // namespace

// A fixed 2 ms per step plus 0.05 ms per example: larger batches are cheaper
// per example; with a noise scale of 1000 they also need few more examples:
// 128 is fastest, far more than 5% ahead of 32.
TEST(OnlineTuner, SwitchesToThePredictedFastestWithSqrtScaling) {
  Decisions log;
  tu::OnlineTuner t(options(), 1, log.log());
  ASSERT_EQ(t.restore(state_with({2.8, 3.6, 5.2, 8.4})), quorum::kOk) << quorum::last_error();
  ASSERT_EQ(log.all.size(), 1u);
  EXPECT_EQ(log.all[0].kind, tu::DecisionKind::Resumed);
  EXPECT_EQ(t.max_batch(), 128);
  feed(&t, 1000);
  qt::LocalGradientReducer local;
  bool stop = true;
  ASSERT_EQ(t.end_epoch(epoch(0.5), 312, &local, &stop), quorum::kOk) << quorum::last_error();
  EXPECT_FALSE(stop);
  ASSERT_EQ(log.all.size(), 2u);
  const tu::TunerDecision &d = log.all[1];
  EXPECT_EQ(d.kind, tu::DecisionKind::Switch);
  EXPECT_EQ(d.previous_batch, 32);
  EXPECT_EQ(d.batch, 128);
  EXPECT_NEAR(d.b_noise, 1000, 1);
  // Time to progress (B + B_noise) / B x tau: 32 at 3.6 ms against 128 at 8.4 ms.
  const double want = (1 + 1000.0 / 32) * 3.6 / ((1 + 1000.0 / 128) * 8.4) - 1;
  EXPECT_NEAR(d.predicted_gain, want, 1e-6);
  EXPECT_EQ(t.plan().batch, 128);
  EXPECT_EQ(t.plan().start_step, 312);
  EXPECT_NEAR(t.plan().lr, 0.02 * std::sqrt(128.0 / 64), 1e-12);
  EXPECT_NEAR(t.plan().lr_at(312), t.plan().lr, 1e-12);  // ratio 2: no warmup in the recipe
}

// With a noise scale of 1000, time to progress (1 + 1000 / B) tau: 16 at
// 2 ms 127, 32 at 3.2 ms 103.2, 64 at 6 ms 99.75, 128 at 12 ms 105.75: 64 is
// fastest but only 3.5% ahead of 32: kept.
TEST(OnlineTuner, KeepsTheBatchUnderFivePercent) {
  Decisions log;
  tu::OnlineTuner t(options(), 1, log.log());
  ASSERT_EQ(t.restore(state_with({2.0, 3.2, 6.0, 12.0})), quorum::kOk);
  feed(&t, 1000);
  qt::LocalGradientReducer local;
  bool stop = true;
  ASSERT_EQ(t.end_epoch(epoch(0.5), 312, &local, &stop), quorum::kOk);
  EXPECT_FALSE(stop);
  EXPECT_EQ(log.all.back().kind, tu::DecisionKind::Keep);
  EXPECT_EQ(t.plan().batch, 32);
  EXPECT_NEAR(log.all.back().predicted_gain, 103.2 / 99.75 - 1, 1e-6);
}

TEST(OnlineTuner, StopsAtTheTarget) {
  Decisions log;
  tu::OnlineTuner t(options(), 1, log.log());
  ASSERT_EQ(t.restore(state_with({2.8, 3.6, 5.2, 8.4})), quorum::kOk);
  feed(&t, 1000);
  qt::LocalGradientReducer local;
  bool stop = false;
  ASSERT_EQ(t.end_epoch(epoch(0.91), 312, &local, &stop), quorum::kOk);
  EXPECT_TRUE(stop);
  EXPECT_TRUE(t.target_reached());
  EXPECT_EQ(log.all.back().kind, tu::DecisionKind::TargetReached);
  EXPECT_EQ(t.plan().batch, 32);
}

// The state goes through a checkpoint's text unchanged (noise samples
// included); malformed text is refused and leaves the tuner as it was.
TEST(OnlineTuner, StateRoundTripsAndMalformedIsRefused) {
  tu::OnlineTuner a(options(), 1, nullptr);
  ASSERT_EQ(a.restore(state_with({2.8, 3.6, 5.2, 8.4})), quorum::kOk);
  feed(&a, 500, 7);
  const std::string text = a.state();
  tu::OnlineTuner b(options(), 1, nullptr);
  ASSERT_EQ(b.restore(text), quorum::kOk) << quorum::last_error();
  EXPECT_EQ(b.state(), text);
  for (const std::string &bad :
       {std::string(""), std::string("quorum-online-tuner 2\n"), text.substr(0, text.size() / 2),
        state_with({2.8, 3.6, -1, 8.4})}) {
    EXPECT_EQ(b.restore(bad), QUORUM_ERR_INVALID_ARG) << bad;
    EXPECT_EQ(b.state(), text);
  }
}
