// lr_recipe.hpp: the learning rate (and warmup) for a global batch.
//
// Linear: lr0 B / B0 with a warmup (Goyal et al. 2017), quorum-train's
// --lr-reference-batch rule; it breaks down at large batches on small data
// (the steps are too big early). Sqrt: lr0 sqrt(B / B0) (Krizhevsky 2014;
// Hoffer et al. 2017, which keeps the update's noise scale), with a warmup of
// warmup_epochs x log2(B / B0) / 3 when the batch grows more than 8x. The
// tuner uses Sqrt and says so.
#pragma once

#include <algorithm>
#include <cmath>

namespace quorum::trainer::tuner {

enum class LrScaling { Linear, Sqrt };

inline const char *lr_scaling_name(LrScaling s) {
  return s == LrScaling::Linear ? "linear" : "sqrt";
}

struct LrChoice {
  double lr = 0;             // peak rate for the whole global batch
  double warmup_epochs = 0;  // linear warmup to it
};

inline LrChoice lr_for_batch(LrScaling s, double lr0, double b0, double batch,
                             double warmup_epochs_linear = 1.0) {
  const double ratio = batch / b0;
  if (s == LrScaling::Linear) return {lr0 * ratio, ratio > 1 ? warmup_epochs_linear : 0.0};
  return {lr0 * std::sqrt(ratio), ratio > 8 ? warmup_epochs_linear * std::log2(ratio) / 3 : 0.0};
}

}  // namespace quorum::trainer::tuner
