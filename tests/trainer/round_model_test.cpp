// round_model_test.cpp: the tuner's round model (trainer/tuner/round_model.hpp)
// on imbalance models whose answers are known, and the predictor's partial
// rows built on it.
#include <gtest/gtest.h>

#include <cmath>

#include "trainer/tuner/predictor.hpp"
#include "trainer/tuner/round_model.hpp"

namespace qt = quorum::trainer;
namespace tu = quorum::trainer::tuner;

namespace {
qt::ImbalanceModel model(const char *spec) {
  qt::ImbalanceModel m;
  EXPECT_EQ(qt::ImbalanceModel::parse(spec, 7, &m), quorum::kOk) << spec;
  return m;
}
// No scheduled synchronous rounds unless asked.
tu::RoundEstimate run(const char *spec, tu::Reduction r, int ranks,
                      uint64_t max_staleness = 1 << 30, double c = 0.010, double comm = 0.001) {
  tu::RoundEstimate e;
  EXPECT_EQ(tu::simulate_rounds(model(spec), r, ranks, c, comm, 2000, 3, max_staleness, &e),
            quorum::kOk);
  return e;
}
}  // namespace

TEST(RoundModel, WithoutImbalanceEveryReductionIsComputePlusAllreduce) {
  for (auto r : {tu::Reduction::Sync, tu::Reduction::Solo, tu::Reduction::Majority})
    for (int k : {1, 2, 5}) {
      const auto e = run("none", r, k);
      EXPECT_NEAR(e.round_seconds, 0.011, 1e-12) << tu::reduction_name(r) << " K=" << k;
      EXPECT_DOUBLE_EQ(e.fresh, k);
    }
}

TEST(RoundModel, SyncWaitsForTheSlowestRank) {
  // One rank 20 ms late every step: every round waits for it.
  auto e = run("slow:1:20", tu::Reduction::Sync, 4);
  EXPECT_NEAR(e.round_seconds, 0.031, 1e-9);
  EXPECT_DOUBLE_EQ(e.fresh, 4);
  // Exactly one of two ranks late by 20 ms per step: the same wait.
  e = run("paper:20:1", tu::Reduction::Sync, 2);
  EXPECT_NEAR(e.round_seconds, 0.031, 1e-9);
  // Exponential delays of mean M: a round waits E[max of K] = M H_K.
  e = run("exp:10", tu::Reduction::Sync, 4);
  EXPECT_NEAR(e.round_seconds, 0.011 + 0.010 * (1 + 1 / 2. + 1 / 3. + 1 / 4.), 0.001);
}

TEST(RoundModel, PartialRoundsDoNotWaitButTheJobEndsWithItsSlowestRank) {
  // A rank slow on every step still computes every step: solo's rounds go at
  // the fast ranks' pace, but the job takes compute + delay per step, and
  // only the fast ranks are fresh.
  auto e = run("slow:1:20", tu::Reduction::Solo, 2);
  EXPECT_NEAR(e.round_seconds, 0.030, 1e-4);
  EXPECT_NEAR(e.fresh, 1, 1e-3);
  // Random ranks late (the paper's model): every rank is late as often, so
  // partial rounds gain over sync; solo the most, majority between.
  const auto sync = run("paper:20:1-2", tu::Reduction::Sync, 4);
  const auto solo = run("paper:20:1-2", tu::Reduction::Solo, 4);
  const auto majority = run("paper:20:1-2", tu::Reduction::Majority, 4);
  EXPECT_LT(solo.round_seconds, majority.round_seconds);
  EXPECT_LT(majority.round_seconds, sync.round_seconds);
  // Solo can never beat the mean delay per rank (1.5 of 4 ranks late by 20 ms).
  EXPECT_GE(solo.round_seconds, 0.010 + 0.020 * 1.5 / 4 - 1e-9);
  EXPECT_GT(solo.fresh, 1);
  EXPECT_LT(solo.fresh, majority.fresh);
  EXPECT_LT(majority.fresh, 4);
  // --max-staleness 0: every round synchronous, as sync; 1: every other one,
  // between the two.
  const auto all_sync = run("paper:20:1-2", tu::Reduction::Solo, 4, 0);
  EXPECT_DOUBLE_EQ(all_sync.round_seconds, sync.round_seconds);
  EXPECT_DOUBLE_EQ(all_sync.fresh, 4);
  const auto half = run("paper:20:1-2", tu::Reduction::Solo, 4, 1);
  EXPECT_GT(half.round_seconds, solo.round_seconds);
  EXPECT_LT(half.round_seconds, sync.round_seconds);
  EXPECT_GT(half.fresh, solo.fresh);
}

TEST(RoundModel, BadInputIsRefused) {
  tu::RoundEstimate e;
  EXPECT_EQ(tu::simulate_rounds(model("none"), tu::Reduction::Sync, 0, 0.01, 0, 10, 1, 32, &e),
            QUORUM_ERR_INVALID_ARG);
  EXPECT_EQ(tu::simulate_rounds(model("none"), tu::Reduction::Sync, 2, 0.01, 0, 0, 1, 32, &e),
            QUORUM_ERR_INVALID_ARG);
  EXPECT_EQ(tu::simulate_rounds(model("none"), tu::Reduction::Solo, 2, NAN, 0, 10, 1, 32, &e),
            QUORUM_ERR_INVALID_ARG);
  EXPECT_EQ(tu::simulate_rounds(model("none"), tu::Reduction::Solo, 2, 0.01, -1, 10, 1, 32, &e),
            QUORUM_ERR_INVALID_ARG);
}

TEST(RoundModel, PredictorRowsOfPartialReductionTradeStepsForStepTime) {
  tu::PredictorInputs in;
  for (int b : {16, 64, 256}) ASSERT_EQ(in.compute.add(b, 2e-3 + 1e-4 * b), quorum::kOk);
  ASSERT_EQ(tu::fit_alpha_beta({{1e5, 2e-4}, {1e6, 1.1e-3}}, 2, &in.allreduce), quorum::kOk);
  in.gradient_bytes = 1e6;
  in.steps = tu::StepsModel::anchored(2000, 64, 256);
  in.local_batches = {16, 64, 256};
  in.ranks = {1, 4};
  in.launched_ranks = 4;
  in.imbalance = model("paper:20:1-2");
  std::vector<tu::Prediction> sync, solo;
  ASSERT_EQ(tu::predict_all(in, &sync), quorum::kOk);
  in.reduction = tu::Reduction::Solo;
  ASSERT_EQ(tu::predict_all(in, &solo), quorum::kOk);
  ASSERT_EQ(sync.size(), solo.size());
  for (size_t i = 0; i < sync.size(); ++i) {
    const auto &s = sync[i], &p = solo[i];
    if (s.ranks == 1) {
      // One rank reduces nothing and waits for nobody: the same row either
      // way, its compute alone (quorum-train injects no delay on one rank).
      EXPECT_DOUBLE_EQ(p.step_seconds, s.step_seconds);
      EXPECT_NEAR(s.step_seconds, 2e-3 + 1e-4 * s.local_batch, 1e-12);
      EXPECT_DOUBLE_EQ(p.steps, s.steps);
      continue;
    }
    EXPECT_DOUBLE_EQ(s.fresh, 4);
    EXPECT_LT(p.fresh, 4);
    EXPECT_LT(p.step_seconds, s.step_seconds);
    // Fewer fresh examples per step: the steps of a smaller synchronous batch.
    EXPECT_NEAR(p.steps, in.steps.steps(p.global_batch * p.fresh / 4), 1e-9 * p.steps);
    EXPECT_GT(p.steps, s.steps);
    EXPECT_LT(p.efficiency, s.efficiency);
  }
}
