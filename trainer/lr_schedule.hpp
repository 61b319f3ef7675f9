// lr_schedule.hpp: the learning rate of each step.
//
// Linear scaling (Goyal et al. 2017): the rate given for `reference_batch`
// examples is multiplied by global_batch / reference_batch, and reached by a
// linear warmup over `warmup_steps` (from base_lr at step 0). With `cosine`,
// the rate then follows half a cosine from the peak down to 0 at `total_steps`
// (Loshchilov & Hutter 2017), which also settles the final accuracy of short
// runs: at a constant rate the test accuracy still swings a point or two from
// one epoch to the next.
#pragma once

#include <algorithm>
#include <cmath>
#include <cstdint>

namespace quorum::trainer {

struct LrSchedule {
  double base_lr = 0.05;  // at reference_batch
  int reference_batch = 64;
  int global_batch = 64;  // local batch x ranks
  int64_t warmup_steps = 0;
  bool cosine = false;      // decay after the warmup
  int64_t total_steps = 0;  // the planned run (epochs x steps per epoch), for the decay

  double peak() const { return base_lr * double(global_batch) / double(reference_batch); }
  double at(int64_t step) const {
    const double target = peak();
    if (step < warmup_steps && target > base_lr)
      return base_lr + (target - base_lr) * double(step + 1) / double(warmup_steps);
    if (!cosine || total_steps <= warmup_steps) return target;
    const double done =
        std::clamp(double(step - warmup_steps) / double(total_steps - warmup_steps), 0.0, 1.0);
    return target * 0.5 * (1.0 + std::cos(M_PI * done));
  }
};

}  // namespace quorum::trainer
