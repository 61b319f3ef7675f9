// lr_schedule.hpp: the learning rate of each step.
//
// Linear scaling (Goyal et al. 2017): the rate given for `reference_batch`
// examples is multiplied by global_batch / reference_batch, and reached by a
// linear warmup over `warmup_steps` (from base_lr at step 0).
#pragma once

#include <algorithm>
#include <cstdint>

namespace quorum::trainer {

struct LrSchedule {
  double base_lr = 0.05;  // at reference_batch
  int reference_batch = 64;
  int global_batch = 64;  // local batch x ranks
  int64_t warmup_steps = 0;

  double peak() const { return base_lr * double(global_batch) / double(reference_batch); }
  double at(int64_t step) const {
    const double target = peak();
    if (warmup_steps <= 0 || step >= warmup_steps || target <= base_lr) return target;
    return base_lr + (target - base_lr) * double(step + 1) / double(warmup_steps);
  }
};

}  // namespace quorum::trainer
