// kneedle.cpp: see kneedle.hpp.
#include "trainer/tuner/kneedle.hpp"

#include <algorithm>
#include <cmath>

namespace quorum::trainer::tuner {

Status find_knee(const std::vector<double> &x, const std::vector<double> &y, CurveShape shape,
                 Knee *out, double min_difference) {
  *out = Knee{};
  if (x.size() != y.size() || x.size() < 3)
    return fail(QUORUM_ERR_INVALID_ARG, "tuner",
                "knee: need at least 3 points with as many x as y (got {} x, {} y)", x.size(),
                y.size());
  for (size_t i = 0; i < x.size(); ++i) {
    if (!std::isfinite(x[i]) || !std::isfinite(y[i]))
      return fail(QUORUM_ERR_INVALID_ARG, "tuner", "knee: point {} is not finite", i);
    if (i > 0 && !(x[i] > x[i - 1]))
      return fail(QUORUM_ERR_INVALID_ARG, "tuner", "knee: x must increase strictly (point {})", i);
  }
  const auto [ylo, yhi] = std::minmax_element(y.begin(), y.end());
  const double xspan = x.back() - x.front(), yspan = *yhi - *ylo;
  if (yspan <= 0) return kOk;  // flat: no knee
  const bool flip_x =
      shape == CurveShape::ConcaveDecreasing || shape == CurveShape::ConvexIncreasing;
  const bool flip_y =
      shape == CurveShape::ConvexDecreasing || shape == CurveShape::ConvexIncreasing;
  for (size_t i = 0; i < x.size(); ++i) {
    double xn = (x[i] - x.front()) / xspan, yn = (y[i] - *ylo) / yspan;
    if (flip_x) xn = 1 - xn;
    if (flip_y) yn = 1 - yn;
    // After the flips every shape runs concave from (0,0) to (1,1).
    const double d = yn - xn;
    if (d > out->difference) out->difference = d, out->index = i;
  }
  out->found = out->difference > min_difference;
  return kOk;
}

}  // namespace quorum::trainer::tuner
