// kneedle.hpp: the knee of a curve (Satopaa et al., "Finding a Kneedle in a
// Haystack", 2011), used on the tuner's time/cost Pareto front.
//
// The points are normalised to [0, 1], flipped so that the curve is concave
// and increasing, and the knee is the point farthest above the diagonal
// (largest y - x). A straight line (or a curve bending the other way) has no
// knee.
#pragma once

#include <cstddef>
#include <vector>

#include "runtime/status.hpp"

namespace quorum::trainer::tuner {

enum class CurveShape { ConcaveIncreasing, ConcaveDecreasing, ConvexIncreasing, ConvexDecreasing };

struct Knee {
  bool found = false;
  size_t index = 0;         // into the given points (sorted by x)
  double difference = 0.0;  // its height above the diagonal, in [0, 1]
};

// x strictly increasing, x.size() == y.size() >= 3, all finite: else INVALID_ARG.
// A knee needs a difference above `min_difference` (the curve's bend).
Status find_knee(const std::vector<double> &x, const std::vector<double> &y, CurveShape shape,
                 Knee *out, double min_difference = 0.02);

}  // namespace quorum::trainer::tuner
