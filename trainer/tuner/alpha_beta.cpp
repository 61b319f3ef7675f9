// alpha_beta.cpp: see alpha_beta.hpp.
#include "trainer/tuner/alpha_beta.hpp"

#include <cmath>

namespace quorum::trainer::tuner {

double AlphaBeta::seconds(double bytes, int ranks) const {
  if (ranks <= 1) return 0;
  const double hops = 2.0 * (ranks - 1);
  return hops * alpha + hops / ranks * bytes * beta;
}

Status fit_alpha_beta(const std::vector<AllreduceSample> &samples, int ranks, AlphaBeta *out) {
  *out = AlphaBeta{};
  if (ranks < 2)
    return fail(QUORUM_ERR_INVALID_ARG, "tuner",
                "allreduce fit: measured on {} rank(s); it needs at least 2", ranks);
  double sx = 0, sy = 0, sxx = 0, sxy = 0;
  const double n = double(samples.size());
  for (const auto &s : samples) {
    if (!(s.bytes > 0) || !(s.seconds > 0) || !std::isfinite(s.bytes) || !std::isfinite(s.seconds))
      return fail(QUORUM_ERR_INVALID_ARG, "tuner",
                  "allreduce fit: sample of {} bytes in {} s is not valid", s.bytes, s.seconds);
    sx += s.bytes, sy += s.seconds, sxx += s.bytes * s.bytes, sxy += s.bytes * s.seconds;
  }
  const double det = n * sxx - sx * sx;
  if (samples.size() < 2 || !(det > 1e-12 * sxx * n))
    return fail(QUORUM_ERR_INVALID_ARG, "tuner",
                "allreduce fit: needs samples of at least two different sizes ({} given)",
                samples.size());
  double a = (sy * sxx - sx * sxy) / det, b = (n * sxy - sx * sy) / det;
  if (a < 0) a = 0, b = sxy / sxx;  // through the origin
  if (b < 0) b = 0, a = sy / n;     // a constant
  double ss_res = 0, ss_tot = 0;
  for (const auto &s : samples) {
    const double e = s.seconds - (a + b * s.bytes), d = s.seconds - sy / n;
    ss_res += e * e, ss_tot += d * d;
  }
  const double hops = 2.0 * (ranks - 1);
  out->alpha = a / hops;
  out->beta = b * ranks / hops;
  out->measured_ranks = ranks;
  out->r2 = ss_tot > 0 ? 1 - ss_res / ss_tot : 1;
  return kOk;
}

}  // namespace quorum::trainer::tuner
