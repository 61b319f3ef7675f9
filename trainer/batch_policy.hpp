// batch_policy.hpp: a policy that chooses each epoch's local batch and
// learning rate while the trainer runs (quorum-train --batch auto; the tuner's
// OnlineTuner implements it). The trainer keeps the loop: it asks the policy
// for the plan at every epoch start, hands it the gradient's squared norms on
// the steps it asks to measure, and lets it decide at every complete epoch's
// end. The batch only changes between epochs, so an epoch's data order and
// position stay those of one batch; its state rides in the checkpoint.
#pragma once

#include <cstdint>
#include <string>

#include "runtime/status.hpp"
#include "trainer/gradient_reducer.hpp"

namespace quorum::trainer {

struct EpochReport;

// The batch and rate from global step `start_step` on: the rate rises
// linearly from `warmup_from_lr` to `lr` over `warmup_steps` steps, then stays.
struct BatchPlan {
  int batch = 64;  // per rank
  double lr = 0.02, warmup_from_lr = 0.02;
  int64_t warmup_steps = 0, start_step = 0;

  double lr_at(int64_t global_step) const {
    const int64_t since = global_step - start_step;
    if (warmup_steps <= 0 || since >= warmup_steps) return lr;
    return warmup_from_lr + (lr - warmup_from_lr) * double(since + 1) / double(warmup_steps);
  }
};

class BatchPolicy {
 public:
  virtual ~BatchPolicy() = default;
  // The largest batch a plan can name (the model's buffers are sized for it).
  virtual int max_batch() const = 0;
  // The plan of the epoch in progress or about to start: the same on every rank.
  virtual BatchPlan plan() const = 0;
  // The state a checkpoint carries, and its restoration on --resume.
  virtual std::string state() const = 0;
  virtual Status restore(const std::string &state) = 0;
  // Whether the step at `global_step` measures the gradient's noise.
  virtual bool measures(int64_t global_step) const = 0;
  // One measurement: the mean over ranks of |g|^2 of a gradient of b_small
  // examples, and |g|^2 of the gradient of b_big (the reduced one).
  virtual void add_noise_sample(double b_small, double sq_small, double b_big, double sq_big) = 0;
  // Collective, at a complete epoch's end (after its evaluation): decides the
  // next epoch's plan, the same on every rank. *stop: training is done (the
  // target is reached).
  virtual Status end_epoch(const EpochReport &report, int64_t global_step, GradientReducer *reducer,
                           bool *stop) = 0;
};

}  // namespace quorum::trainer
