// noise_scale.hpp: the gradient noise scale B_noise = tr(Sigma) / |G|^2
// (McCandlish et al., "An Empirical Model of Large-Batch Training", 2018).
//
// Two-batch estimator: gradients averaged over b_small and b_big examples
// have E|g_b|^2 = |G|^2 + tr(Sigma) / b, so from one pair of squared norms
//   |G|^2    ~ (b_big |g_big|^2 - b_small |g_small|^2) / (b_big - b_small)
//   tr(Sigma) ~ (|g_small|^2 - |g_big|^2) / (1/b_small - 1/b_big)
// are unbiased. In data-parallel training the small batch is one rank's and
// the big one the allreduced (each rank's |g_local|^2 rides along); on one
// process the batch is split. The single-pair estimates are very noisy, so
// numerator and denominator are averaged separately (an EMA, and a running
// mean whose standard errors give B_noise's uncertainty) before the ratio.
#pragma once

#include <cstdint>

#include "runtime/status.hpp"

namespace quorum::trainer::tuner {

struct TwoBatchEstimate {
  double grad_sq = 0;    // |G|^2
  double trace_cov = 0;  // tr(Sigma), per example
};

// INVALID_ARG unless 0 < b_small < b_big and the norms are finite and >= 0.
Status two_batch_estimate(double b_small, double sq_small, double b_big, double sq_big,
                          TwoBatchEstimate *out);

class NoiseScaleTracker {
 public:
  // ema_decay in [0, 1): weight of the old average at each update.
  explicit NoiseScaleTracker(double ema_decay = 0.95) : decay_(ema_decay) {}
  void add(const TwoBatchEstimate &e);
  int64_t samples() const { return n_; }
  // Ratio of the smoothed averages (0 before the first sample; the EMA is
  // bias-corrected like Adam's).
  double noise_scale() const;
  // Ratio of the plain means over every sample, and its standard error from
  // the two means' (first-order error propagation; 0 with < 2 samples).
  double mean_noise_scale() const;
  double uncertainty() const;

  // Everything it has accumulated, to carry in a checkpoint.
  struct State {
    int64_t n = 0;
    double ema_g = 0, ema_t = 0, weight = 0, mean_g = 0, mean_t = 0, m2_g = 0, m2_t = 0, c_gt = 0;
  };
  State state() const {
    return {n_, ema_g_, ema_t_, weight_, mean_g_, mean_t_, m2_g_, m2_t_, c_gt_};
  }
  void restore(const State &s) {
    n_ = s.n, ema_g_ = s.ema_g, ema_t_ = s.ema_t, weight_ = s.weight;
    mean_g_ = s.mean_g, mean_t_ = s.mean_t, m2_g_ = s.m2_g, m2_t_ = s.m2_t, c_gt_ = s.c_gt;
  }

 private:
  double decay_;
  int64_t n_ = 0;
  double ema_g_ = 0, ema_t_ = 0, weight_ = 0;
  // Welford sums of both estimates and their co-moment.
  double mean_g_ = 0, mean_t_ = 0, m2_g_ = 0, m2_t_ = 0, c_gt_ = 0;
};

}  // namespace quorum::trainer::tuner
