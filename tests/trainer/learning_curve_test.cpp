// learning_curve_test.cpp: the pilot's extrapolation (learning_curve.hpp) on
// synthetic learning curves whose crossing of the target is known.
#include "trainer/tuner/learning_curve.hpp"

#include <gtest/gtest.h>

#include <cmath>
#include <random>

namespace quorum::trainer::tuner {
namespace {

using Curve = std::vector<std::pair<int64_t, double>>;

// Test accuracy 1 - (a + b s^-c) every `every` steps up to `last`, plus
// Gaussian noise of sd `noise` (seeded).
Curve synthetic(double a, double b, double c, int64_t every, int64_t last, double noise,
                uint64_t seed) {
  std::mt19937_64 rng(seed);
  std::normal_distribution<double> gauss(0, noise);
  Curve out;
  for (int64_t s = every; s <= last; s += every)
    out.emplace_back(s, 1 - (a + b * std::pow(double(s), -c)) + (noise > 0 ? gauss(rng) : 0));
  return out;
}

TEST(LearningCurve, RecoversTheCrossingOfAnExactCurve) {
  // err = 0.1 + 0.8 s^-0.5 reaches 0.15 (85%) at s = (0.8 / 0.05)^2 = 256.
  CurveFit fit;
  ASSERT_EQ(fit_learning_curve(synthetic(0.1, 0.8, 0.5, 20, 200, 0, 1), 0.85, 100, 1, &fit), kOk);
  ASSERT_TRUE(fit.reaches);
  EXPECT_NEAR(fit.crossing, 256, 0.03 * 256);
  EXPECT_NEAR(fit.c, 0.5, 0.05);
  EXPECT_LT(fit.rmse, 1e-3);
  EXPECT_LE(fit.crossing_error, 0.05 * fit.crossing);
  const ExtrapolationRule rule;
  EXPECT_TRUE(may_extrapolate(fit, rule, 200, fit.accuracy_at(200), 0.85));
  // Not when the best accuracy so far is further than the margin from the
  // target, nor when the crossing is too far ahead of the steps run.
  EXPECT_FALSE(may_extrapolate(fit, rule, 200, 0.80, 0.85));
  EXPECT_FALSE(may_extrapolate(fit, rule, 160, fit.accuracy_at(200), 0.85));
}

TEST(LearningCurve, RecoversTheCrossingOfNoisyCurvesWithinAFewPercent) {
  // err = 0.05 + 2 s^-0.7 reaches 0.12 (88%) at s = (2 / 0.07)^(1 / 0.7) = 120.
  const double truth = std::pow(2 / 0.07, 1 / 0.7);
  for (uint64_t seed = 1; seed <= 5; ++seed) {
    CurveFit fit;
    ASSERT_EQ(
        fit_learning_curve(synthetic(0.05, 2, 0.7, 5, 100, 0.002, seed), 0.88, 200, seed, &fit),
        kOk);
    ASSERT_TRUE(fit.reaches) << "seed " << seed;
    EXPECT_NEAR(fit.crossing, truth, 0.05 * truth) << "seed " << seed;
    EXPECT_TRUE(std::isfinite(fit.crossing_error)) << "seed " << seed;
    EXPECT_GT(fit.crossing_error, 0) << "seed " << seed;
  }
}

TEST(LearningCurve, NoisierCurvesAreLessSureAndNotExtrapolated) {
  // The same curve with ten times the noise, seen only to step 60: the
  // crossing's standard error is far above the rule's 5%.
  CurveFit fit;
  ASSERT_EQ(fit_learning_curve(synthetic(0.05, 2, 0.7, 10, 60, 0.02, 3), 0.88, 200, 3, &fit), kOk);
  EXPECT_FALSE(may_extrapolate(fit, ExtrapolationRule{}, 60, 0.86, 0.88));
}

TEST(LearningCurve, ACurveThatSaturatesBelowTheTargetNeverReachesIt) {
  // err = 0.2 + 0.6 s^-0.7 levels off at 80%: a target of 85% is unreachable.
  CurveFit fit;
  ASSERT_EQ(fit_learning_curve(synthetic(0.2, 0.6, 0.7, 20, 400, 0, 1), 0.85, 100, 1, &fit), kOk);
  EXPECT_FALSE(fit.reaches);
  EXPECT_EQ(fit.crossing, 0);
  EXPECT_FALSE(may_extrapolate(fit, ExtrapolationRule{}, 400, 0.84, 0.85));
}

TEST(LearningCurve, BadCurvesAreRefused) {
  CurveFit fit;
  // Too few points, a step below 1, an accuracy outside [0, 1], a bad target.
  EXPECT_NE(fit_learning_curve({{1, 0.5}, {2, 0.6}, {3, 0.7}}, 0.9, 0, 1, &fit), kOk);
  EXPECT_NE(fit_learning_curve({{0, 0.5}, {2, 0.6}, {3, 0.7}, {4, 0.8}}, 0.9, 0, 1, &fit), kOk);
  EXPECT_NE(fit_learning_curve({{1, 0.5}, {2, 0.6}, {3, 1.7}, {4, 0.8}}, 0.9, 0, 1, &fit), kOk);
  EXPECT_NE(fit_learning_curve({{1, 0.5}, {2, 0.6}, {3, 0.7}, {4, 0.8}}, 1.0, 0, 1, &fit), kOk);
  // An accuracy that falls: no saturating power law fits it, so no crossing.
  EXPECT_EQ(fit_learning_curve({{1, 0.8}, {2, 0.7}, {3, 0.6}, {4, 0.5}}, 0.9, 0, 1, &fit), kOk);
  EXPECT_FALSE(fit.reaches);
  EXPECT_EQ(fit.points, 4);
}

TEST(LearningCurve, FirstPassageIsTheFirstGridStepAtTheTarget) {
  CurveFit fit;
  ASSERT_EQ(fit_learning_curve(synthetic(0.1, 0.8, 0.5, 20, 200, 0, 1), 0.85, 0, 1, &fit), kOk);
  // Without noise: the grid 210, 220, ... first reaches 85% at 260 (crossing 256).
  EXPECT_NEAR(first_passage(fit, 0.85, 200, 10, 1000, 0, 10, 1), 260, 1e-9);
  // Never there before max_step: max_step.
  EXPECT_NEAR(first_passage(fit, 0.85, 200, 10, 240, 0, 10, 1), 240, 1e-9);
  // With noise a noisy curve is first seen above the target earlier, on average.
  EXPECT_LT(first_passage(fit, 0.85, 100, 10, 1000, 0.01, 2000, 1), 256);
}

}  // namespace
}  // namespace quorum::trainer::tuner
