// tuner_test.cpp: the tuner's models (trainer/tuner/) on synthetic data with
// known answers: Kneedle, the profile table, the alpha-beta fit, the
// two-batch noise-scale estimator (1 and several simulated ranks), the
// predictor and its choice, and their bad-input errors.
#include <gtest/gtest.h>

#include <cmath>
#include <random>

#include "trainer/tuner/alpha_beta.hpp"
#include "trainer/tuner/kneedle.hpp"
#include "trainer/tuner/noise_scale.hpp"
#include "trainer/tuner/predictor.hpp"
#include "trainer/tuner/step_profile.hpp"
#include "trainer/tuner/steps_model.hpp"

namespace tu = quorum::trainer::tuner;

TEST(Kneedle, FindsTheKneeOfAConcaveIncreasingCurve) {
  // Two straight pieces meeting at x = 2: the knee is there.
  std::vector<double> x, y;
  for (int i = 0; i <= 10; ++i) x.push_back(i), y.push_back(i <= 2 ? 4.0 * i : 8 + 0.2 * (i - 2));
  tu::Knee k;
  ASSERT_EQ(tu::find_knee(x, y, tu::CurveShape::ConcaveIncreasing, &k), quorum::kOk);
  EXPECT_TRUE(k.found);
  EXPECT_EQ(k.index, 2u);
}

TEST(Kneedle, FindsTheKneeOfConvexDecreasingAndIncreasingCurves) {
  // y = 1/x on [1, 10] (a time/cost front's shape): Kneedle's knee of the
  // normalised curve is where the slope is -1 in normalised units.
  std::vector<double> x, y, z;
  for (int i = 0; i <= 90; ++i) x.push_back(1 + 0.1 * i), y.push_back(1 / x.back());
  tu::Knee k;
  ASSERT_EQ(tu::find_knee(x, y, tu::CurveShape::ConvexDecreasing, &k), quorum::kOk);
  ASSERT_TRUE(k.found);
  // The normalised slopes match where 1 / (0.9 x^2) = 1 / 9: x = sqrt(10).
  EXPECT_NEAR(x[k.index], std::sqrt(10.0), 0.11);
  // Mirror image: y = e^x is convex increasing with its knee near the right end.
  for (double v : x) z.push_back(std::exp(v));
  ASSERT_EQ(tu::find_knee(x, z, tu::CurveShape::ConvexIncreasing, &k), quorum::kOk);
  ASSERT_TRUE(k.found);
  const double expect = std::log((std::exp(10.0) - std::exp(1.0)) / 9.0);  // slope 1 normalised
  EXPECT_NEAR(x[k.index], expect, 0.11);
}

TEST(Kneedle, AStraightLineHasNoKneeAndBadInputIsRefused) {
  std::vector<double> x{1, 2, 3, 4}, y{2, 4, 6, 8};
  tu::Knee k;
  ASSERT_EQ(tu::find_knee(x, y, tu::CurveShape::ConcaveIncreasing, &k), quorum::kOk);
  EXPECT_FALSE(k.found);
  EXPECT_EQ(tu::find_knee({1, 2}, {1, 2}, tu::CurveShape::ConcaveIncreasing, &k),
            QUORUM_ERR_INVALID_ARG);
  EXPECT_EQ(tu::find_knee({1, 3, 2}, {1, 2, 3}, tu::CurveShape::ConcaveIncreasing, &k),
            QUORUM_ERR_INVALID_ARG);
  EXPECT_EQ(tu::find_knee({1, 2, 3}, {1, NAN, 3}, tu::CurveShape::ConcaveIncreasing, &k),
            QUORUM_ERR_INVALID_ARG);
}

TEST(StepProfile, GridIsGeometricAndInterpolationFollowsTheTable) {
  std::vector<int> grid;
  ASSERT_EQ(tu::geometric_grid(16, 512, 2, &grid), quorum::kOk);
  EXPECT_EQ(grid, (std::vector<int>{16, 32, 64, 128, 256, 512}));
  ASSERT_EQ(tu::geometric_grid(10, 100, 3, &grid), quorum::kOk);
  EXPECT_EQ(grid, (std::vector<int>{10, 30, 90, 100}));
  EXPECT_EQ(tu::geometric_grid(0, 8, 2, &grid), QUORUM_ERR_INVALID_ARG);
  EXPECT_EQ(tu::geometric_grid(8, 4, 2, &grid), QUORUM_ERR_INVALID_ARG);
  EXPECT_EQ(tu::geometric_grid(4, 8, 1, &grid), QUORUM_ERR_INVALID_ARG);

  // t(b) = 1 ms + 0.1 ms x b: affine, not a power law, so log-log
  // interpolation is exact at the points and close between them.
  tu::StepProfile p;
  for (int b : {8, 16, 32, 64, 128}) ASSERT_EQ(p.add(b, 1e-3 + 1e-4 * b), quorum::kOk);
  EXPECT_EQ(p.add(32, 1), QUORUM_ERR_INVALID_ARG);
  EXPECT_EQ(p.add(7, -1), QUORUM_ERR_INVALID_ARG);
  bool extra = true;
  EXPECT_NEAR(p.seconds_at(64, &extra), 7.4e-3, 1e-12);
  EXPECT_FALSE(extra);
  EXPECT_NEAR(p.seconds_at(48, &extra), 1e-3 + 4.8e-3, 0.03 * 5.8e-3);
  EXPECT_FALSE(extra);
  // Beyond the table: the last segment's trend, never cheaper per image.
  const double at256 = p.seconds_at(256, &extra);
  EXPECT_TRUE(extra);
  EXPECT_GE(at256, 2 * p.seconds_at(128) * 0.999);
  EXPECT_NEAR(at256, 1e-3 + 256e-4, 0.1 * 26.6e-3);
}

TEST(AlphaBeta, RecoversKnownParametersAndExtrapolatesInK) {
  // Ring on K0 = 2 ranks: t = 2 alpha + M beta; alpha = 20 us, beta = 0.2 ns/B.
  const double alpha = 20e-6, beta = 0.2e-9;
  std::mt19937 rng(7);
  std::normal_distribution<double> noise(1.0, 0.01);
  std::vector<tu::AllreduceSample> s;
  for (double m = 4096; m <= 4 << 20; m *= 2) {
    const double t = 2 * alpha + m * beta;
    s.push_back({m, t * noise(rng)});
  }
  tu::AlphaBeta ab;
  ASSERT_EQ(tu::fit_alpha_beta(s, 2, &ab), quorum::kOk);
  EXPECT_NEAR(ab.alpha, alpha, 0.1 * alpha);
  EXPECT_NEAR(ab.beta, beta, 0.03 * beta);
  EXPECT_GT(ab.r2, 0.99);
  EXPECT_EQ(ab.seconds(1e6, 1), 0);
  // K = 4: 6 hops, 1.5 M through each rank.
  EXPECT_NEAR(ab.seconds(1e6, 4), 6 * alpha + 1.5e6 * beta, 0.05 * (6 * alpha + 1.5e6 * beta));

  EXPECT_EQ(tu::fit_alpha_beta(s, 1, &ab), QUORUM_ERR_INVALID_ARG);
  EXPECT_EQ(tu::fit_alpha_beta({{4096, 1e-5}}, 2, &ab), QUORUM_ERR_INVALID_ARG);
  EXPECT_EQ(tu::fit_alpha_beta({{4096, 1e-5}, {4096, 2e-5}}, 2, &ab), QUORUM_ERR_INVALID_ARG);
  EXPECT_EQ(tu::fit_alpha_beta({{4096, 1e-5}, {8192, -1}}, 2, &ab), QUORUM_ERR_INVALID_ARG);
}

// Per-example gradients G + L z (z standard normal, L lower-triangular), so
// the covariance LL^T is known, with tr(Sigma) = sum of L's squares.
struct SyntheticGradients {
  int dim;
  std::vector<double> mean, chol;  // chol: dim x dim, row-major, lower
  std::mt19937_64 rng{12345};
  std::normal_distribution<double> z{0, 1};

  explicit SyntheticGradients(int d) : dim(d), mean(size_t(d)), chol(size_t(d) * d, 0) {
    std::mt19937_64 g(99);
    std::uniform_real_distribution<double> u(-1, 1);
    for (int i = 0; i < d; ++i) {
      mean[size_t(i)] = 0.5 * u(g);
      for (int j = 0; j <= i; ++j) chol[size_t(i) * d + j] = (i == j ? 1.5 : 0.3) * u(g);
    }
  }
  double true_noise_scale() const {
    double tr = 0, g2 = 0;
    for (double c : chol) tr += c * c;
    for (double m : mean) g2 += m * m;
    return tr / g2;
  }
  // Adds the mean of b examples' gradients into *sum (accumulates b per-example gradients).
  void add_examples(int b, std::vector<double> *sum) {
    std::vector<double> zz(static_cast<size_t>(dim));
    for (int e = 0; e < b; ++e) {
      for (auto &v : zz) v = z(rng);
      for (int i = 0; i < dim; ++i) {
        double g = mean[size_t(i)];
        for (int j = 0; j <= i; ++j) g += chol[size_t(i) * dim + j] * zz[size_t(j)];
        (*sum)[size_t(i)] += g;
      }
    }
  }
};

double squared_norm(const std::vector<double> &v, double scale) {
  double s = 0;
  for (double x : v) s += x * scale * x * scale;
  return s;
}

// K simulated ranks of b examples each: small = one rank's mean, big = all
// ranks' mean (on K = 1, the batch split in halves: small = a half).
double estimate_noise_scale(SyntheticGradients *g, int ranks, int b, int steps,
                            tu::NoiseScaleTracker *tracker) {
  for (int s = 0; s < steps; ++s) {
    std::vector<double> total(size_t(g->dim), 0.0);
    double small_sq = 0;
    double b_small = b;
    if (ranks == 1) {
      std::vector<double> half(size_t(g->dim), 0.0);
      g->add_examples(b / 2, &half);
      small_sq = squared_norm(half, 2.0 / b);
      for (size_t i = 0; i < total.size(); ++i) total[i] = half[i];
      g->add_examples(b - b / 2, &total);
      b_small = b / 2;
    } else {
      for (int r = 0; r < ranks; ++r) {
        std::vector<double> local(size_t(g->dim), 0.0);
        g->add_examples(b, &local);
        small_sq += squared_norm(local, 1.0 / b) / ranks;  // each rank's, averaged
        for (size_t i = 0; i < total.size(); ++i) total[i] += local[i];
      }
    }
    const double big = double(b) * ranks;
    tu::TwoBatchEstimate e;
    EXPECT_EQ(tu::two_batch_estimate(b_small, small_sq, big, squared_norm(total, 1.0 / big), &e),
              quorum::kOk);
    tracker->add(e);
  }
  return tracker->mean_noise_scale();
}

TEST(NoiseScale, TwoBatchEstimatorRecoversKnownNoiseScaleOnOneRank) {
  SyntheticGradients g(24);
  const double truth = g.true_noise_scale();
  tu::NoiseScaleTracker t(0.99);
  const double est = estimate_noise_scale(&g, 1, 32, 3000, &t);
  EXPECT_NEAR(est, truth, 0.05 * truth) << "uncertainty " << t.uncertainty();
  EXPECT_GT(t.uncertainty(), 0);
  EXPECT_LT(t.uncertainty(), 0.05 * truth);
  EXPECT_NEAR(t.noise_scale(), truth, 0.25 * truth);  // the EMA: recent samples only
}

TEST(NoiseScale, TwoBatchEstimatorRecoversKnownNoiseScaleOnSeveralRanks) {
  SyntheticGradients g(24);
  const double truth = g.true_noise_scale();
  for (int ranks : {2, 4}) {
    tu::NoiseScaleTracker t(0.99);
    const double est = estimate_noise_scale(&g, ranks, 16, 3000 / ranks, &t);
    EXPECT_NEAR(est, truth, 0.05 * truth) << ranks << " ranks, uncertainty " << t.uncertainty();
    // The reported uncertainty covers the actual error (3 sigma).
    EXPECT_LT(std::abs(est - truth), 3 * t.uncertainty() + 1e-9) << ranks << " ranks";
  }
}

TEST(NoiseScale, BadInputIsRefused) {
  tu::TwoBatchEstimate e;
  EXPECT_EQ(tu::two_batch_estimate(8, 1, 8, 1, &e), QUORUM_ERR_INVALID_ARG);
  EXPECT_EQ(tu::two_batch_estimate(0, 1, 8, 1, &e), QUORUM_ERR_INVALID_ARG);
  EXPECT_EQ(tu::two_batch_estimate(4, NAN, 8, 1, &e), QUORUM_ERR_INVALID_ARG);
  EXPECT_EQ(tu::two_batch_estimate(4, 1, 8, -1, &e), QUORUM_ERR_INVALID_ARG);
  tu::NoiseScaleTracker t;
  EXPECT_EQ(t.noise_scale(), 0);
  EXPECT_EQ(t.uncertainty(), 0);
}

TEST(StepsModel, AnchorsAndEfficiency) {
  const auto m = tu::StepsModel::anchored(3000, 64, 192);  // S(64) = S_min x 4
  EXPECT_DOUBLE_EQ(m.s_min, 750);
  EXPECT_DOUBLE_EQ(m.steps(64), 3000);
  EXPECT_DOUBLE_EQ(m.steps(192), 1500);
  EXPECT_DOUBLE_EQ(m.efficiency(64), 1);
  EXPECT_DOUBLE_EQ(m.efficiency(448), 0.4);
}

// Compute: 2 ms + 0.1 ms per example; allreduce alpha 50 us beta 1 ns/B of 1 MB.
tu::PredictorInputs synthetic_inputs() {
  tu::PredictorInputs in;
  for (int b : {16, 32, 64, 128, 256, 512})
    EXPECT_EQ(in.compute.add(b, 2e-3 + 1e-4 * b), quorum::kOk);
  EXPECT_EQ(tu::fit_alpha_beta({{1e5, 2 * 50e-6 + 1e5 * 1e-9}, {1e6, 2 * 50e-6 + 1e6 * 1e-9}}, 2,
                               &in.allreduce),
            quorum::kOk);
  in.gradient_bytes = 1e6;
  in.steps = tu::StepsModel::anchored(2000, 64, 256);
  in.local_batches = {16, 32, 64, 128, 256, 512};
  in.ranks = {1, 2, 4};
  in.launched_ranks = 2;
  in.price = 1;
  return in;
}

TEST(Predictor, PredictsEveryConfigurationAndMarksExtrapolation) {
  auto in = synthetic_inputs();
  std::vector<tu::Prediction> rows;
  ASSERT_EQ(tu::predict_all(in, &rows), quorum::kOk);
  ASSERT_EQ(rows.size(), 18u);
  for (const auto &r : rows) {
    const double tau = 2e-3 + 1e-4 * r.local_batch + in.allreduce.seconds(1e6, r.ranks);
    EXPECT_NEAR(r.step_seconds, tau, 1e-9 + 1e-6 * tau);
    EXPECT_NEAR(r.seconds, in.steps.steps(r.global_batch) * tau, 1e-6 * r.seconds);
    EXPECT_NEAR(r.cost, r.seconds * r.ranks, 1e-9 * r.cost);
    EXPECT_EQ(r.extrapolated, r.ranks > 2);
    EXPECT_NEAR(r.lr, in.lr0 * std::sqrt(r.global_batch / 64.0), 1e-12);
  }
  // The memory bound drops the larger local batches; none left is an error.
  in.max_local_batch = 100;
  ASSERT_EQ(tu::predict_all(in, &rows), quorum::kOk);
  EXPECT_EQ(rows.size(), 9u);
  in.max_local_batch = 8;
  EXPECT_EQ(tu::predict_all(in, &rows), QUORUM_ERR_INVALID_ARG);
  // K > 1 needs a measured allreduce.
  in = synthetic_inputs();
  in.allreduce = tu::AlphaBeta{};
  EXPECT_EQ(tu::predict_all(in, &rows), QUORUM_ERR_INVALID_ARG);
}

TEST(Predictor, ChoosesTheKneeOrWhatTheDeadlineAndBudgetAllow) {
  auto in = synthetic_inputs();
  std::vector<tu::Prediction> rows;
  ASSERT_EQ(tu::predict_all(in, &rows), quorum::kOk);
  tu::Choice c;
  ASSERT_EQ(tu::choose(&rows, 0, 0, &c), quorum::kOk);
  EXPECT_TRUE(rows[c.index].pareto);
  // Nothing on the front dominates another; everything off it is dominated.
  double fastest = 1e30, cheapest = 1e30;
  for (const auto &r : rows)
    fastest = std::min(fastest, r.seconds), cheapest = std::min(cheapest, r.cost);
  for (const auto &r : rows) {
    bool dominated = false;
    for (const auto &o : rows)
      dominated |= (o.seconds <= r.seconds && o.cost < r.cost) ||
                   (o.seconds < r.seconds && o.cost <= r.cost);
    EXPECT_EQ(r.pareto, !dominated) << r.global_batch << " x" << r.ranks;
  }
  // A deadline: the cheapest that meets it.
  const double deadline = 1.5 * fastest;
  ASSERT_EQ(tu::choose(&rows, deadline, 0, &c), quorum::kOk);
  EXPECT_LE(rows[c.index].seconds, deadline);
  for (const auto &r : rows)
    if (r.seconds <= deadline) {
      EXPECT_GE(r.cost, rows[c.index].cost);
    }
  // A budget: the fastest within it.
  ASSERT_EQ(tu::choose(&rows, 0, 1.2 * cheapest, &c), quorum::kOk);
  for (const auto &r : rows)
    if (r.cost <= 1.2 * cheapest) {
      EXPECT_GE(r.seconds, rows[c.index].seconds);
    }
  // Nobody meets them: an error that names the fastest and the cheapest.
  EXPECT_EQ(tu::choose(&rows, 0.5 * fastest, 0, &c), QUORUM_ERR_INVALID_ARG);
  EXPECT_NE(std::string(quorum::last_error()).find("fastest"), std::string::npos);
  EXPECT_EQ(tu::choose(&rows, 0, 0.5 * cheapest, &c), QUORUM_ERR_INVALID_ARG);
}
