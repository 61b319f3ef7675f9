// trainer.hpp: the training loop (data -> forward -> backward -> reduce -> update).
//
// One Trainer trains one model replica on one rank's shard. Everything that
// differs between ranks or runs (backend, data, gradient reducer, what to
// print) comes in from outside; the loop itself is the same for one process
// and for many.
#pragma once

#include <cstdint>
#include <string>

#include "runtime/status.hpp"
#include "trainer/backend.hpp"
#include "trainer/batch_policy.hpp"
#include "trainer/dataset.hpp"
#include "trainer/gradient_reducer.hpp"

namespace quorum::trainer {

struct TrainConfig {
  std::string model = "fm-s";
  int batch = 64;  // per rank
  int epochs = 5;
  double lr = 0.02;             // at lr_reference_batch examples
  int lr_reference_batch = 64;  // linear scaling: lr x global batch / this
  double warmup_epochs = 0.0;
  std::string lr_decay = "none";  // none | cosine (to 0 at the last planned step)
  double momentum = 0.9;
  double weight_decay = 0.0;
  uint64_t seed = 1;
  int64_t max_steps = -1;        // stop at this global step (-1: run all epochs)
  std::string checkpoint_path;   // "" = none; written at epoch ends and at a stop
  int64_t checkpoint_every = 0;  // also every N steps (0 = off)
  int evals_per_epoch = 1;       // test evaluations per epoch, evenly spaced, the last at its end
  // Moving average of the parameters, which the evaluations score (0: off,
  // they score the parameters themselves): after step t, avg = d avg + (1 - d)
  // params with d = min(ema_decay, (1 + t) / (10 + t)).
  double ema_decay = 0.0;
  std::string resume_path;  // "" = start fresh
  // Stop at the first complete epoch whose test accuracy reaches this
  // fraction (0: train every epoch).
  double stop_accuracy = 0;
  // Chooses each epoch's batch and rate (--batch auto): `batch`, `lr`,
  // `lr_reference_batch`, `warmup_epochs` and `lr_decay` are then unused. Not owned.
  BatchPolicy *batch_policy = nullptr;
};

// Seconds per phase, summed over an epoch's steps.
struct PhaseTimes {
  double data = 0, forward = 0, backward = 0, reduce = 0, update = 0;
  double imbalance = 0;  // injected delay (distributed runs reproducing eager-SGD)
  double total() const { return data + forward + backward + reduce + update + imbalance; }
};

struct StepProgress {
  int64_t epoch = 0, step_in_epoch = 0, steps_per_epoch = 0;
  int64_t global_step = 0, total_steps = 0;  // global_step counts finished steps
  double loss = 0, lr = 0;
  double images_per_s = 0;   // this rank, over the epoch so far
  double epoch_seconds = 0;  // since the epoch's first step (evaluations are not in it)
  double train_seconds = 0;  // of the whole run, resumed parts included (evaluations not in it)
  double eta_s = 0;          // to total_steps at the current speed
};

struct EpochReport {
  int64_t epoch = 0;
  int64_t steps = 0;                          // in this run (a resumed epoch counts only its own)
  int batch = 0;                              // per rank (a batch policy may change it per epoch)
  bool complete = true;                       // false when max_steps stopped it
  double train_loss = 0, train_accuracy = 0;  // over the whole epoch's steps
  double test_loss = 0, test_accuracy = 0;
  double images_per_s = 0, seconds = 0;
  double train_seconds = 0;  // of the whole run at the epoch's end, resumed parts included
  // All of the epoch's test evaluations, which `seconds` leaves out; the
  // evaluations' wait for the other ranks is in `seconds`, not here.
  double eval_seconds = 0;
  // Process CPU time of the training steps, and images per CPU second: the
  // steadier speed figure on a shared machine (one compute thread per rank).
  double cpu_seconds = 0, images_per_cpu_s = 0;
  PhaseTimes times;
  double mean_contributors = 0;  // ranks whose gradient made it into a step, averaged
  int64_t carried = 0;           // partial: this rank's gradients that missed their step
  int64_t skipped = 0;           // partial: steps this rank applied without computing (behind)
  double mean_staleness = 0;     // and how many steps late they were applied, on average
  uint32_t param_crc32 = 0;      // bit-exact checksum of the parameters
  double param_sum = 0;          // sum of the parameters (a readable checksum)
  double lr = 0;
};

// A test evaluation inside an epoch (--evals-per-epoch above 1); the one at
// the epoch's end is in its EpochReport.
struct EvalReport {
  int64_t epoch = 0, step_in_epoch = 0, global_step = 0;
  double epoch_seconds = 0;  // training time since the epoch's first step (evaluations not in it)
  double train_seconds = 0;  // training time of the whole run, resumed parts included
  double test_loss = 0, test_accuracy = 0;
  double eval_seconds = 0;  // scoring (its wait for the other ranks counts as training time)
};

// Where a run begins: at step 0, or where the checkpoint it resumes left off.
struct RunStart {
  size_t param_count = 0;
  int64_t steps_per_epoch = 0;
  int64_t start_step = 0;
  double start_train_seconds = 0;  // training time before this run (a resume: the checkpoint's)
  int batch = 0;                   // per rank, of the first step (a batch policy's may differ)
};

class TrainObserver {
 public:
  virtual ~TrainObserver() = default;
  virtual void on_start(const TrainConfig &, const RunStart &) {}
  virtual void on_step(const StepProgress &) {}
  virtual void on_eval(const EvalReport &) {}
  // An error stops the training with it (a distributed observer's check of
  // the replicas can fail to communicate).
  virtual Status on_epoch(const EpochReport &) { return kOk; }
};

struct TrainResult {
  int64_t start_step = 0;   // where this run began (a resume: the checkpoint's step)
  int64_t global_step = 0;  // where it ended: the same when there was nothing to train
  // Training time of the whole run up to global_step (evaluations left out),
  // resumed parts included: what the checkpoint of this point records.
  double train_seconds = 0;
  EpochReport last;           // the last epoch (or partial epoch) reported
  std::vector<float> params;  // final parameters, host copy
  // SIGINT/SIGTERM (stop_signal.hpp) stopped it at a step boundary, after the
  // checkpoint was written: the signal, else 0.
  int stopped_by_signal = 0;
  bool stopped_by_policy = false;      // the batch policy ended the training (its target reached)
  bool reached_stop_accuracy = false;  // an epoch reached config.stop_accuracy
};

// Trains `config` on `data` (train and test split) with `backend`, reducing
// gradients through `reducer`; `observer` may be nullptr. A stop requested by
// a signal (stop_signal.hpp) ends it at a step boundary with a checkpoint
// written (when configured) and result->stopped_by_signal set: on one rank the
// next one; on several, every rank at the same one, the first after a step
// whose gradient reduction carried some rank's request, and every rank
// reports the same signal (the highest-numbered any rank received).
Status train(const TrainConfig &config, Backend *backend, const DataSplit &data,
             GradientReducer *reducer, TrainObserver *observer, TrainResult *result);

// Bit-exact and readable checksums of a parameter vector.
uint32_t params_crc32(const std::vector<float> &params);
double params_sum(const std::vector<float> &params);

}  // namespace quorum::trainer
