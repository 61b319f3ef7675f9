// learning_curve.hpp: where a pilot's test-accuracy curve will reach the
// target, from the evaluations it has so far (the pilot stops short of the
// target and extrapolates once this is known well enough).
//
// The test error is fitted as a saturating power law of the step,
//   err(s) = a + b * s^-c   (a >= 0, b > 0, c > 0),
// by least squares: a grid over c, the best (a, b) of each c in closed form.
// The target (error e_t = 1 - target) is crossed at s* = (b / (e_t - a))^(1/c)
// (never when a >= e_t). Its standard error comes from a residual bootstrap
// (residuals inflated by sqrt(n / (n - 3))). What a run is seen to take is
// its first evaluation at or above the target, which on a noisy curve comes
// earlier than the smooth crossing: `first_passage` is the mean step of that
// first evaluation on an evaluation grid, the fit's residual spread as noise.
#pragma once

#include <cstdint>
#include <utility>
#include <vector>

#include "runtime/status.hpp"

namespace quorum::trainer::tuner {

struct CurveFit {
  double a = 0, b = 0, c = 0;  // err(s) = a + b s^-c
  double rmse = 0;             // of the accuracy residuals
  int points = 0;
  bool reaches = false;       // a < 1 - target
  double crossing = 0;        // s* (0 unless reaches)
  double crossing_error = 0;  // its bootstrap standard error (infinite if unsure)
  double accuracy_at(double step) const;
};

// (step, test accuracy) pairs, steps >= 1, at least 4 distinct; target in
// (0, 1). INVALID_ARG otherwise, or when no c gives b > 0 (a curve that does
// not rise). `bootstrap` replicates (0: no standard error), seeded by `seed`.
Status fit_learning_curve(const std::vector<std::pair<int64_t, double>> &curve, double target,
                          int bootstrap, uint64_t seed, CurveFit *out);

// Mean step of the first evaluation at or above `target` among the steps
// after + interval, after + 2 interval, ... (at most `max_step`), the fitted
// curve plus Gaussian noise of sd `noise` at each (`draws` paths; a path that
// never gets there counts as max_step).
double first_passage(const CurveFit &fit, double target, double after, double interval,
                     double max_step, double noise, int draws, uint64_t seed);

// When a pilot that has not reached the target may stop and take the fit's
// crossing instead.
struct ExtrapolationRule {
  double margin = 0.03;              // the best accuracy so far within this of the target
  double max_relative_error = 0.05;  // crossing_error / crossing at most this
  double max_ahead = 1.5;            // crossing at most this many times the steps run
  int min_points = 5;                // evaluations fitted
};
bool may_extrapolate(const CurveFit &fit, const ExtrapolationRule &rule, int64_t steps_run,
                     double best_accuracy, double target);

}  // namespace quorum::trainer::tuner
