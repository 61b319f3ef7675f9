// allreduce_probe.hpp: times this runtime's allreduce on the launched ranks
// over a geometric range of sizes up to the gradient's, and fits the
// alpha-beta model (alpha_beta.hpp) to it.
//
// Per size: a few warm-up calls, then `iterations` calls each after a barrier
// (OSU style); the median over calls, the slowest rank's, is the sample.
#pragma once

#include <vector>

#include "quorum/quorum.h"
#include "runtime/status.hpp"
#include "trainer/tuner/alpha_beta.hpp"

namespace quorum::trainer::tuner {

struct AllreduceProbeOptions {
  size_t max_bytes = 1 << 20;  // the gradient's size
  size_t min_bytes = 4096;
  int warmup = 3, iterations = 15;
};

// comm with at least 2 ranks (INVALID_ARG otherwise; a collective: every rank calls it).
Status probe_allreduce(quorum_comm_t comm, const AllreduceProbeOptions &options,
                       std::vector<AllreduceSample> *samples, AlphaBeta *fit);

}  // namespace quorum::trainer::tuner
