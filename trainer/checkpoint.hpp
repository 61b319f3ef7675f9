// checkpoint.hpp: the training state on disk, written atomically.
//
// A checkpoint holds everything the next step depends on: parameters, momentum,
// the position in the data (epoch, step within it, global step) and the
// running epoch sums, so that a resumed run is bit-identical to one that was
// never interrupted (the data order is a function of seed and epoch). It also
// records the data the steps come from (set name, training examples, steps per
// epoch), so that a resume on other data is refused, and the training time so
// far, so that a resumed run's times continue. Written to
// "<path>.tmp.<pid>" (created exclusively, not through a link; removed on any
// failure), flushed, fsynced and renamed over <path>, which must be a regular
// file if it exists: a device node, FIFO or folder is refused, never replaced.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "runtime/status.hpp"

namespace quorum::trainer {

struct TrainingState {
  std::string model;            // model name
  uint64_t seed = 0;            // data order and initialisation
  int32_t batch = 0;            // local batch (the data order depends on it)
  int32_t world = 1;            // ranks (the shards depend on it)
  std::string data;             // data set name
  uint64_t train_count = 0;     // training examples (the data order depends on it)
  int64_t steps_per_epoch = 0;  // of this rank's shard
  int64_t global_step = 0;
  int64_t epoch = 0;          // the epoch in progress
  int64_t step_in_epoch = 0;  // steps of `epoch` already done
  double epoch_loss_sum = 0.0;
  int64_t epoch_correct = 0, epoch_images = 0;
  std::vector<float> params, momentum;  // in the model's ParamLayout
  std::vector<float> ema;               // the parameters' moving average, or empty (--ema-decay)
  // Training time up to global_step, evaluations left out, summed over every
  // resumed part (0 in a checkpoint older than format version 4).
  double train_seconds = 0.0;
  // The global step at which `epoch` began: epoch x steps_per_epoch unless a
  // batch policy changed the batch between epochs (format version 5).
  int64_t epoch_start_step = 0;
  // A batch policy's state (quorum-train --batch auto), opaque here; empty
  // without one (and in a checkpoint older than format version 5). At most 1 MiB.
  std::string policy_state;
};

Status save_checkpoint(const std::string &path, const TrainingState &state);
// Also checks that the position is one a run can reach: 0 <= step_in_epoch <
// steps_per_epoch and global_step = epoch x steps_per_epoch + step_in_epoch.
// Only a regular file is read (a FIFO or device is refused at once), at most
// 16 GiB.
Status load_checkpoint(const std::string &path, TrainingState *state);
// The checks and decoding of load_checkpoint on bytes already read; `path`
// names them in errors.
Status parse_checkpoint(const std::vector<uint8_t> &bytes, const std::string &path,
                        TrainingState *state);
// Whether save_checkpoint can write `path` (a regular file or nothing yet):
// creates and removes its temporary
// file, so that a missing or read-only folder fails before training.
Status check_checkpoint_path(const std::string &path);

}  // namespace quorum::trainer
