// learning_curve.cpp: see learning_curve.hpp.
#include "trainer/tuner/learning_curve.hpp"

#include <algorithm>
#include <cmath>
#include <limits>
#include <random>

namespace quorum::trainer::tuner {

namespace {

struct Fit {
  double a = 0, b = 0, c = 0, sse = std::numeric_limits<double>::infinity();
};

// Least squares of err = a + b s^-c over a log grid of c, (a, b) closed form.
Fit fit_power_law(const std::vector<double> &s, const std::vector<double> &err) {
  Fit best;
  const size_t n = s.size();
  constexpr int kGrid = 160;
  constexpr double kCMin = 0.02, kCMax = 4;
  std::vector<double> x(n);
  for (int g = 0; g < kGrid; ++g) {
    const double c = kCMin * std::pow(kCMax / kCMin, double(g) / (kGrid - 1));
    double sx = 0, sy = 0, sxx = 0, sxy = 0;
    for (size_t i = 0; i < n; ++i) {
      x[i] = std::pow(s[i], -c);
      sx += x[i], sy += err[i], sxx += x[i] * x[i], sxy += x[i] * err[i];
    }
    const double det = double(n) * sxx - sx * sx;
    double a = 0, b = 0;
    if (det > 0) {
      b = (double(n) * sxy - sx * sy) / det;
      a = (sy - b * sx) / double(n);
    }
    if (!(det > 0) || a < 0) a = 0, b = sxx > 0 ? sxy / sxx : 0;  // through the origin
    if (!(b > 0)) continue;
    double sse = 0;
    for (size_t i = 0; i < n; ++i) {
      const double r = err[i] - (a + b * x[i]);
      sse += r * r;
    }
    if (sse < best.sse) best = Fit{a, b, c, sse};
  }
  return best;
}

double crossing_of(const Fit &f, double target_error) {
  if (!(f.b > 0) || f.a >= target_error) return std::numeric_limits<double>::infinity();
  return std::pow(f.b / (target_error - f.a), 1 / f.c);
}

}  // namespace

double CurveFit::accuracy_at(double step) const {
  return 1 - (a + b * std::pow(std::max(step, 1.0), -c));
}

Status fit_learning_curve(const std::vector<std::pair<int64_t, double>> &curve, double target,
                          int bootstrap, uint64_t seed, CurveFit *out) {
  *out = CurveFit{};
  std::vector<double> s, err;
  for (const auto &[step, acc] : curve) {
    if (step < 1 || !std::isfinite(acc) || acc < 0 || acc > 1)
      return fail(QUORUM_ERR_INVALID_ARG, "tuner", "learning curve: bad point ({}, {})", step, acc);
    s.push_back(double(step)), err.push_back(1 - acc);
  }
  std::vector<double> distinct = s;
  std::sort(distinct.begin(), distinct.end());
  distinct.erase(std::unique(distinct.begin(), distinct.end()), distinct.end());
  if (distinct.size() < 4 || !(target > 0 && target < 1))
    return fail(QUORUM_ERR_INVALID_ARG, "tuner",
                "learning curve: {} distinct steps (need 4) or target {} outside (0, 1)",
                distinct.size(), target);
  const Fit f = fit_power_law(s, err);
  const size_t n = s.size();
  out->points = int(n);
  // An error that does not fall (yet): no crossing to extrapolate to, which
  // is an answer, not an error (the pilot trains on).
  if (!std::isfinite(f.sse)) return kOk;
  out->a = f.a, out->b = f.b, out->c = f.c, out->points = int(n);
  out->rmse = std::sqrt(f.sse / double(n));
  const double target_error = 1 - target;
  const double crossing = crossing_of(f, target_error);
  out->reaches = std::isfinite(crossing);
  out->crossing = out->reaches ? crossing : 0;
  out->crossing_error = std::numeric_limits<double>::infinity();
  if (!out->reaches || bootstrap < 1) return kOk;
  // Residual bootstrap; the spread as half the 16-84% range (the crossing's
  // distribution is skewed), unsure when over a tenth of the replicates
  // never reach the target.
  std::vector<double> fitted(n), residual(n);
  const double inflate = n > 3 ? std::sqrt(double(n) / double(n - 3)) : 1;
  for (size_t i = 0; i < n; ++i) {
    fitted[i] = f.a + f.b * std::pow(s[i], -f.c);
    residual[i] = inflate * (err[i] - fitted[i]);
  }
  std::mt19937_64 rng(seed);
  std::uniform_int_distribution<size_t> pick(0, n - 1);
  std::vector<double> crossings, resampled(n);
  int unreached = 0;
  for (int r = 0; r < bootstrap; ++r) {
    for (size_t i = 0; i < n; ++i) resampled[i] = fitted[i] + residual[pick(rng)];
    const double x = crossing_of(fit_power_law(s, resampled), target_error);
    if (std::isfinite(x))
      crossings.push_back(x);
    else
      ++unreached;
  }
  if (unreached * 10 > bootstrap || crossings.size() < 2) return kOk;
  std::sort(crossings.begin(), crossings.end());
  auto quantile = [&](double q) {
    return crossings[size_t(std::lround(q * double(crossings.size() - 1)))];
  };
  out->crossing_error = (quantile(0.84) - quantile(0.16)) / 2;
  return kOk;
}

double first_passage(const CurveFit &fit, double target, double after, double interval,
                     double max_step, double noise, int draws, uint64_t seed) {
  if (!(interval > 0) || draws < 1) return max_step;
  std::mt19937_64 rng(seed);
  std::normal_distribution<double> gauss(0, std::max(noise, 0.0));
  double sum = 0;
  for (int d = 0; d < draws; ++d) {
    double passed = max_step;
    for (double step = after + interval; step <= max_step; step += interval)
      if (fit.accuracy_at(step) + (noise > 0 ? gauss(rng) : 0) >= target) {
        passed = step;
        break;
      }
    sum += passed;
  }
  return sum / draws;
}

bool may_extrapolate(const CurveFit &fit, const ExtrapolationRule &rule, int64_t steps_run,
                     double best_accuracy, double target) {
  return fit.reaches && fit.points >= rule.min_points && best_accuracy >= target - rule.margin &&
         fit.crossing > double(steps_run) && fit.crossing <= rule.max_ahead * double(steps_run) &&
         fit.crossing_error <= rule.max_relative_error * fit.crossing;
}

}  // namespace quorum::trainer::tuner
