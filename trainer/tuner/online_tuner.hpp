// online_tuner.hpp: the tuner inside a training run (quorum-train --batch
// auto; Tula's online service), a BatchPolicy (trainer/batch_policy.hpp).
//
// Before the first step, briefly: the seconds per step of every local batch
// of a short geometric grid, all ranks at work at once (compute_profiler.hpp),
// and this runtime's allreduce of the gradient on the launched ranks, fitted
// to alpha-beta (allreduce_probe.hpp). During training: the gradient noise
// scale from the training's own gradients (several ranks: each one's
// |g_local|^2 against the reduced |g|^2 every `noise_every` steps; one
// process: half the batch's gradient first, half a step extra, on fewer
// steps). The first epoch runs at `start_batch`; at each complete epoch's end
// the smoothed noise scale sets S(B) = S_min (1 + B_noise / B) and the
// predictor (predictor.hpp) the time to progress of every grid batch at the
// launched ranks (one K: the Pareto front of time and cost is the fastest
// row, its own knee), with the profile's step times and allreduce set to the
// level the epoch measured at its batch (on a shared machine the load of the
// brief profile and of the training differ). The tuner switches when that
// row is predicted at least `min_gain` faster than the current batch; the
// rate follows the square-root recipe with its warmup (lr_recipe.hpp), rising
// from the rate in use. Rank 0 decides and its decision is broadcast. Training
// stops at the first epoch end whose test accuracy reaches the target. A
// restored state (--resume) is logged as a Resumed decision.
#pragma once

#include <functional>
#include <string>
#include <vector>

#include "quorum/quorum.h"
#include "trainer/batch_policy.hpp"
#include "trainer/dataset.hpp"
#include "trainer/trainer.hpp"
#include "trainer/tuner/alpha_beta.hpp"
#include "trainer/tuner/lr_recipe.hpp"
#include "trainer/tuner/noise_scale.hpp"
#include "trainer/tuner/step_profile.hpp"

namespace quorum::trainer::tuner {

struct OnlineTunerOptions {
  std::string model = "fm-s";
  double target_accuracy = 0.9;  // fraction of the test set
  double lr0 = 0.02;             // the rate at lr_b0 examples (global batch)
  int lr_b0 = 64;
  LrScaling scaling = LrScaling::Sqrt;
  double warmup_epochs = 1.0;                             // the recipe's (lr_recipe.hpp)
  int start_batch = 64, batch_min = 16, batch_max = 512;  // local
  double min_gain = 0.05;
  int noise_every = 4;  // several ranks: the measurement is nearly free
  // One process: each measurement costs half a step, so at most one step in
  // this many, but at least 8 per epoch.
  int noise_every_alone = 16;
  int profile_warmup = 2, profile_steps = 8;
  double profile_seconds = 0.4;  // fewer timed steps per batch once they took this long
};

enum class DecisionKind { Profiled, Start, Keep, Switch, TargetReached, Resumed };
const char *decision_kind_name(DecisionKind k);

// One decision, as every rank took it.
struct TunerDecision {
  DecisionKind kind = DecisionKind::Start;
  int64_t epoch = 0;  // epochs finished (from 1; 0 before training)
  int64_t global_step = 0;
  int batch = 0, previous_batch = 0, ranks = 1;
  double lr = 0, warmup_from_lr = 0;
  int64_t warmup_steps = 0;
  double b_noise = 0;        // smoothed over the run (EMA)
  double b_noise_error = 0;  // standard error of the epoch's mean estimate
  int64_t noise_samples = 0;
  double predicted_gain = 0;  // predicted time to progress: current / chosen - 1
  double test_accuracy = 0;
  double seconds = 0;  // the profile's time (Profiled and Resumed)
  // Every rank's plan names this batch and rate (checked with a collective
  // after each epoch's decision; a difference is an error, not a record).
  bool ranks_agree = true;
  std::string reason;
};

class OnlineTuner : public BatchPolicy {
 public:
  using Log = std::function<void(const TunerDecision &)>;
  OnlineTuner(const OnlineTunerOptions &options, int ranks, Log log);

  // Collective (every rank; comm nullptr on one process): the profile, then
  // the first plan. INVALID_ARG when the data holds no grid batch.
  Status profile(Backend *backend, const Dataset &train, quorum_comm_t comm);
  const std::vector<int> &grid() const { return grid_; }
  const StepProfile &compute() const { return compute_; }
  const AlphaBeta &allreduce() const { return allreduce_; }
  double profile_seconds() const { return profile_seconds_; }
  bool target_reached() const { return reached_; }

  int max_batch() const override { return grid_.empty() ? options_.start_batch : grid_.back(); }
  BatchPlan plan() const override { return plan_; }
  std::string state() const override;
  Status restore(const std::string &state) override;
  bool measures(int64_t global_step) const override;
  void add_noise_sample(double b_small, double sq_small, double b_big, double sq_big) override;
  Status end_epoch(const EpochReport &report, int64_t global_step, GradientReducer *reducer,
                   bool *stop) override;

 private:
  BatchPlan plan_for(int batch, double from_lr, int64_t start_step) const;

  OnlineTunerOptions options_;
  int ranks_;
  Log log_;
  int64_t shard_ = 0;  // training examples per rank (the same on every rank)
  std::vector<int> grid_;
  StepProfile compute_;
  AlphaBeta allreduce_;
  double gradient_bytes_ = 0, profile_seconds_ = 0;
  BatchPlan plan_;
  NoiseScaleTracker epoch_noise_, run_noise_;
  bool reached_ = false;
};

}  // namespace quorum::trainer::tuner
