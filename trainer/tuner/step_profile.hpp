// step_profile.hpp: measured seconds per training step against the local batch.
//
// The tuner times steps over a geometric grid of local batch sizes and keeps
// the table: between two grid points it interpolates linearly in log-log
// space (a per-image cost that changes with the batch is followed, not
// forced onto one straight line); outside the grid it extends the nearest
// segment and says so.
#pragma once

#include <vector>

#include "runtime/status.hpp"

namespace quorum::trainer::tuner {

// lo, lo*factor, lo*factor^2, ... up to hi (hi itself always included); sizes
// rounded to integers and deduplicated. INVALID_ARG if lo < 1, hi < lo or
// factor <= 1.
Status geometric_grid(int lo, int hi, double factor, std::vector<int> *out);

class StepProfile {
 public:
  struct Point {
    int batch;
    double seconds;     // per step: forward + loss + backward + update
    double peak_bytes;  // memory the model needs at this batch
  };
  // Points are kept sorted by batch; a batch given twice: INVALID_ARG.
  Status add(int batch, double seconds, double peak_bytes = 0);
  const std::vector<Point> &points() const { return points_; }
  bool empty() const { return points_.empty(); }
  // Every step time multiplied by `factor` (> 0): the same shape at another level.
  void scale(double factor) {
    for (auto &p : points_) p.seconds *= factor;
  }
  // Seconds per step at `batch` (>= 1); *extrapolated (if given) says
  // whether it lies outside the measured range. Needs at least one point.
  double seconds_at(double batch, bool *extrapolated = nullptr) const;

 private:
  std::vector<Point> points_;
};

}  // namespace quorum::trainer::tuner
