// alpha_beta.hpp: the allreduce cost model t(M, K) the tuner predicts with.
//
// Measured allreduce times of several message sizes on the launched ranks
// are fitted by least squares to t = a + b M. A ring allreduce on K ranks
// takes 2(K-1) latency hops and moves 2(K-1)/K of the message through each
// rank, so the fit is turned into per-hop constants, alpha = a / (2(K0-1))
// and beta = b K0 / (2(K0-1)), which give t for any K (K = 1: no
// communication). K above the ranks it was measured on is an extrapolation.
#pragma once

#include <vector>

#include "runtime/status.hpp"

namespace quorum::trainer::tuner {

struct AllreduceSample {
  double bytes;
  double seconds;
};

struct AlphaBeta {
  double alpha = 0;        // seconds per latency hop
  double beta = 0;         // seconds per byte through one rank
  int measured_ranks = 1;  // K0 of the samples (1: nothing measured)
  double r2 = 1;           // of the fit
  double seconds(double bytes, int ranks) const;
};

// Fits samples taken on `ranks` >= 2 ranks; needs two distinct sizes and
// positive, finite times (INVALID_ARG otherwise). A negative intercept or
// slope (noise) is clamped to 0 and the other refitted.
Status fit_alpha_beta(const std::vector<AllreduceSample> &samples, int ranks, AlphaBeta *out);

}  // namespace quorum::trainer::tuner
