// train_common_options.hpp: the command-line options that quorum-train and
// quorum-tune share (model, backend, data, and the SGD recipe a tuning is
// about), declared once with their defaults, checks and help.
#pragma once

#include <CLI/CLI.hpp>
#include <cstdint>
#include <string>

namespace quorum::train_options {

struct CommonOptions {
  std::string model = "fm-s", backend = "cpu", data = "fashion-mnist", data_dir;
  bool no_verify = false;
  int64_t train_limit = 0, test_limit = 0;
  int threads = 1;
  uint64_t seed = 1;
  double lr = 0.02, momentum = 0.9, weight_decay = 0.0;
  int lr_reference_batch = 64;
};

// --model --backend --data --data-dir --no-verify-data --train-limit --test-limit.
void add_data_options(CLI::App &app, CommonOptions *o);

// --lr --lr-reference-batch --momentum --weight-decay --seed --threads; the
// tool says what the reference batch and the seed mean to it.
void add_sgd_options(CLI::App &app, CommonOptions *o, const std::string &reference_batch_help,
                     const std::string &seed_help);

}  // namespace quorum::train_options
