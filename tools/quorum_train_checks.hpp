// quorum_train_checks.hpp: quorum-train's refusals of runs that would not do
// what their command line or environment asks, beyond CLI11's own checks.
#pragma once

#include <CLI/CLI.hpp>
#include <string>

namespace quorum::train_checks {

// A floating-point flag's value is a finite number. CLI11's range checks let
// NaN through (every comparison with it is false) and take "inf".
CLI::Validator finite();

// --max-steps: -1 (all epochs) or a positive number of steps.
CLI::Validator steps_or_all();

// --batch: a batch size (1..65536) or auto.
CLI::Validator batch_size();

// --batch auto given (`automatic`) without --target-accuracy or with an
// option it cannot honour (a partial reduction, injected imbalance, buckets,
// a rate schedule of its own), or --target-accuracy without it: an error
// naming the first, or "".
std::string batch_auto_misuse(const CLI::App &app, bool automatic, const std::string &mode);

// --reduce: sync, solo, majority or quorum:K (K a positive integer; K <= P
// is checked once the ranks are known).
CLI::Validator reduce_mode();

// The options of `app` that only the partial reductions use, given to a run
// that reduces with `mode` ("sync", or "local" for one process without
// --reduce): an error naming the first, or "".
std::string partial_only_misuse(const CLI::App &app, const std::string &mode);

// The launcher's environment says this job has several tasks (an srun step,
// PMI or Open MPI) but the communicator has `world` = 1 rank: every task would
// train alone as rank 0. An error naming the variable, or "".
std::string lone_rank_of_many(int world);

}  // namespace quorum::train_checks
