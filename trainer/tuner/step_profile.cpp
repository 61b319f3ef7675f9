// step_profile.cpp: see step_profile.hpp.
#include "trainer/tuner/step_profile.hpp"

#include <algorithm>
#include <cmath>

namespace quorum::trainer::tuner {

Status geometric_grid(int lo, int hi, double factor, std::vector<int> *out) {
  out->clear();
  if (lo < 1 || hi < lo || !(factor > 1) || !std::isfinite(factor))
    return fail(QUORUM_ERR_INVALID_ARG, "tuner",
                "batch grid: need 1 <= low <= high and a factor above 1 (got {}..{} x{})", lo, hi,
                factor);
  for (double b = lo; b < hi; b *= factor) {
    const int r = int(std::lround(b));
    if (out->empty() || r > out->back()) out->push_back(r);
  }
  if (out->empty() || out->back() != hi) out->push_back(hi);
  return kOk;
}

Status StepProfile::add(int batch, double seconds, double peak_bytes) {
  if (batch < 1 || !(seconds > 0) || !std::isfinite(seconds))
    return fail(QUORUM_ERR_INVALID_ARG, "tuner", "profile: batch {} took {} s: not a valid point",
                batch, seconds);
  auto at = std::lower_bound(points_.begin(), points_.end(), batch,
                             [](const Point &p, int b) { return p.batch < b; });
  if (at != points_.end() && at->batch == batch)
    return fail(QUORUM_ERR_INVALID_ARG, "tuner", "profile: batch {} measured twice", batch);
  points_.insert(at, Point{batch, seconds, peak_bytes});
  return kOk;
}

double StepProfile::seconds_at(double batch, bool *extrapolated) const {
  if (extrapolated) *extrapolated = false;
  if (points_.empty()) return 0;
  if (points_.size() == 1) {
    // One point: the cost per image is all we know.
    if (extrapolated) *extrapolated = batch != points_[0].batch;
    return points_[0].seconds * batch / points_[0].batch;
  }
  size_t hi = 1;
  while (hi + 1 < points_.size() && points_[hi].batch < batch) ++hi;
  const Point &a = points_[hi - 1], &b = points_[hi];
  if (extrapolated) *extrapolated = batch < points_.front().batch || batch > points_.back().batch;
  const double t = (std::log(batch) - std::log(a.batch)) / (std::log(b.batch) - std::log(a.batch));
  double log_s = std::log(a.seconds) + t * (std::log(b.seconds) - std::log(a.seconds));
  // Beyond the grid a step never costs less per image than at its edge.
  if (batch > points_.back().batch)
    log_s = std::max(log_s, std::log(points_.back().seconds * batch / points_.back().batch));
  return std::exp(log_s);
}

}  // namespace quorum::trainer::tuner
