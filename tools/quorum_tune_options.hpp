// quorum_tune_options.hpp: quorum-tune's command line: its options (the
// model, data and SGD ones are quorum-train's, train_common_options.hpp) and
// their registration with CLI11.
#pragma once

#include <CLI/CLI.hpp>
#include <string>
#include <vector>

#include "tools/train_common_options.hpp"
#include "trainer/tuner/predictor.hpp"

#ifndef QUORUM_TUNE_PLOT_SCRIPT
#define QUORUM_TUNE_PLOT_SCRIPT "perf/plot_tune.py"
#endif

namespace quorum::tune_options {

namespace tu = quorum::trainer::tuner;

struct Options : quorum::train_options::CommonOptions {
  std::string scaling = "sqrt";
  std::string reduce = "sync", imbalance = "none";
  tu::Reduction reduction = tu::Reduction::Sync;  // of `reduce`
  unsigned max_staleness = 32;
  double target = 0;  // percent
  int batch_min = 16, batch_max = 1024;
  double grid_factor = 2;
  std::vector<int> ranks;
  bool extrapolate = false;
  int pilot_batch = 64;
  double pilot_max_epochs = 3, pilot_screen = 0.1;
  bool pilot_extrapolate = true;  // --pilot-extrapolate on|off
  int evals_per_epoch = 20, noise_every = 2;
  int profile_steps = 20, profile_warmup = 1;
  double profile_seconds = 1, profile_precision = 0.01, profile_tight = 0.01;
  double price = 0, deadline = 0, budget = 0, memory_mb = 0;
  std::string json_path, plot_path, plot_script = QUORUM_TUNE_PLOT_SCRIPT;
  bool calibrate = true;
};

// Adds every option of quorum-tune to `app`, writing into `o`.
void add_options(CLI::App &app, Options *o);

}  // namespace quorum::tune_options
