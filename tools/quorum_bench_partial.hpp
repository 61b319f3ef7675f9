// quorum_bench_partial.hpp: `quorum-bench partial`, the benchmark of the
// partial collectives (solo and majority allreduce) against a synchronous
// allreduce under an injected load imbalance (see PARTIAL-COLLECTIVES.md).
#pragma once

#include <cstdint>
#include <string>

#include "quorum/quorum.h"

namespace quorum_bench {

struct PartialOptions {
  double compute_ms = 10;       // C: every rank's compute per step
  double delay_ms = 10;         // D: the injected extra delay
  std::string model = "paper";  // paper | slow-rank | exponential | all (each in turn)
  int steps = 100;
  size_t bytes = size_t{1} << 20;  // float32 gradient size
  unsigned max_staleness = 32;
  unsigned long long seed = 42;
  bool json = false;
  bool copy_result = false;          // quorum_partial_wait instead of quorum_partial_wait_ref
  bool copy_post = false;            // quorum_partial_post instead of quorum_partial_post_ref
  unsigned activation_delay_us = 0;  // quorum_partial_opts_t.activation_delay_us
};

// Runs sync, solo, majority and quorum:K for K = 1..P in turn (under every
// imbalance model for model "all"); rank 0 prints. Returns the process
// exit status: 0 fine, 3 if the results did not add up to what was posted.
int run_partial_bench(quorum_comm_t comm, const PartialOptions &options);

}  // namespace quorum_bench
