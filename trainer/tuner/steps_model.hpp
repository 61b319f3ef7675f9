// steps_model.hpp: steps to a target accuracy against the global batch.
//
// McCandlish et al. (2018): S(B) = S_min (1 + B_noise / B), anchored by one
// measured run (a pilot) of S(B0) steps at batch B0. The statistical
// efficiency of B relative to B0, per example (Pollux's model), is
// (B_noise + B0) / (B_noise + B): 1 at B0, falling as B outgrows the noise.
#pragma once

namespace quorum::trainer::tuner {

struct StepsModel {
  double s_min = 0;    // steps at an infinite batch
  double b_noise = 0;  // gradient noise scale, in examples
  double b0 = 1;       // the anchor batch

  static StepsModel anchored(double steps_at_b0, double b0, double b_noise) {
    return StepsModel{steps_at_b0 / (1 + b_noise / b0), b_noise, b0};
  }
  double steps(double batch) const { return s_min * (1 + b_noise / batch); }
  double efficiency(double batch) const { return (b_noise + b0) / (b_noise + batch); }
};

}  // namespace quorum::trainer::tuner
