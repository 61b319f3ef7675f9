// noise_scale.cpp: see noise_scale.hpp.
#include "trainer/tuner/noise_scale.hpp"

#include <cmath>

namespace quorum::trainer::tuner {

Status two_batch_estimate(double b_small, double sq_small, double b_big, double sq_big,
                          TwoBatchEstimate *out) {
  if (!(b_small > 0) || !(b_big > b_small) || !std::isfinite(b_big) || !(sq_small >= 0) ||
      !(sq_big >= 0) || !std::isfinite(sq_small) || !std::isfinite(sq_big))
    return fail(QUORUM_ERR_INVALID_ARG, "tuner",
                "noise scale: needs 0 < small batch < big batch and finite squared norms "
                "(got batches {} and {}, norms {} and {})",
                b_small, b_big, sq_small, sq_big);
  out->grad_sq = (b_big * sq_big - b_small * sq_small) / (b_big - b_small);
  out->trace_cov = (sq_small - sq_big) / (1 / b_small - 1 / b_big);
  return kOk;
}

void NoiseScaleTracker::add(const TwoBatchEstimate &e) {
  ++n_;
  ema_g_ = decay_ * ema_g_ + (1 - decay_) * e.grad_sq;
  ema_t_ = decay_ * ema_t_ + (1 - decay_) * e.trace_cov;
  weight_ = decay_ * weight_ + (1 - decay_);
  const double dg = e.grad_sq - mean_g_, dt = e.trace_cov - mean_t_;
  mean_g_ += dg / double(n_);
  mean_t_ += dt / double(n_);
  m2_g_ += dg * (e.grad_sq - mean_g_);
  m2_t_ += dt * (e.trace_cov - mean_t_);
  c_gt_ += dg * (e.trace_cov - mean_t_);
}

double NoiseScaleTracker::noise_scale() const {
  if (n_ == 0 || weight_ <= 0) return 0;
  const double g = ema_g_ / weight_, t = ema_t_ / weight_;
  return g > 0 ? t / g : 0;
}

double NoiseScaleTracker::mean_noise_scale() const {
  return n_ > 0 && mean_g_ > 0 ? mean_t_ / mean_g_ : 0;
}

double NoiseScaleTracker::uncertainty() const {
  if (n_ < 2 || !(mean_g_ > 0)) return 0;
  const double n = double(n_);
  // Variances of the two means, and their covariance.
  const double vg = m2_g_ / (n - 1) / n, vt = m2_t_ / (n - 1) / n, cgt = c_gt_ / (n - 1) / n;
  const double r = mean_t_ / mean_g_;
  const double rel =
      vt / (mean_t_ * mean_t_) + vg / (mean_g_ * mean_g_) - 2 * cgt / (mean_t_ * mean_g_);
  return std::abs(r) * std::sqrt(std::max(0.0, rel));
}

}  // namespace quorum::trainer::tuner
