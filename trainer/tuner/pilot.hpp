// pilot.hpp: the tuner's short pilot run: quorum-train's own training at one
// batch size, until the test accuracy first reaches the target, measuring the
// gradient noise scale on the way.
//
// The pilot trains exactly as quorum-train would with the same options (same
// initial parameters, data order, learning rate and SGD), and evaluates the
// test set at the points quorum-train's --evals-per-epoch does, so the steps it
// counts to the target are the ones a real run would be seen to take. Noise
// scale (noise_scale.hpp), every `noise_every` steps: on several ranks each
// rank's |g_local|^2 against the reduced |g|^2; on one process the first half
// of the batch is run through backward first (half a step's compute extra).
//
// With `extrapolate`, the pilot need not train all the way: after each
// evaluation below the target it fits the accuracy curve so far
// (learning_curve.hpp) and, once the rule's conditions hold (near the
// target, the crossing known to within 5%, not far ahead), stops and takes
// the fitted curve's first evaluation at or above the target instead.
#pragma once

#include <functional>
#include <string>
#include <vector>

#include "runtime/status.hpp"
#include "trainer/backend.hpp"
#include "trainer/dataset.hpp"
#include "trainer/gradient_reducer.hpp"
#include "trainer/tuner/learning_curve.hpp"
#include "trainer/tuner/noise_scale.hpp"

namespace quorum::trainer::tuner {

struct PilotOptions {
  std::string model = "fm-s";
  int local_batch = 64;
  double lr = 0.02;  // peak rate for the global batch (no warmup, constant)
  double momentum = 0.9, weight_decay = 0.0;
  uint64_t seed = 1;
  double target_accuracy = 0.88;
  int evals_per_epoch = 20;
  double max_epochs = 3;  // give up (an unreachable target) after this many
  int noise_every = 2;
  // Staged evaluations (staged_evaluation.hpp): this fraction of the test set
  // first, then three times it, then the whole, stopping as soon as the part
  // scored is 3 standard errors from the target (1: every evaluation scores
  // the whole set).
  double screen_fraction = 0.1;
  bool extrapolate = true;  // stop short of the target once the fit allows it
  ExtrapolationRule rule;
};

struct PilotResult {
  bool reached = false;       // measured there, or extrapolated
  bool extrapolated = false;  // the pilot stopped short and took the fit's crossing
  int64_t steps = 0;          // run (to the target, if measured there)
  // Steps to the target for the steps model: half an evaluation interval
  // before the first evaluation at or above it (measured, or the fit's).
  double target_steps = 0;
  CurveFit fit;              // the last fit of the curve (points 0 if none was made)
  double train_seconds = 0;  // training time to there (evaluations excluded)
  double step_seconds = 0;   // mean time of the steps without a noise measurement
  double eval_seconds = 0;
  int64_t evaluations = 0, screened_out = 0;  // evaluations; of them decided before the whole set
  double best_accuracy = 0;
  int64_t steps_per_epoch = 0;
  // B_noise near the target (the last quarter of the samples) and its
  // standard error; over the whole pilot; and the EMA at its end.
  double b_noise = 0, b_noise_error = 0, b_noise_whole = 0, b_noise_ema = 0;
  int64_t noise_samples = 0, late_samples = 0;
  // (step, test accuracy) at each evaluation (of the part scored)
  std::vector<std::pair<int64_t, double>> curve;
};

// `progress` (if given) after each evaluation: (step, accuracy, B_noise so far).
Status run_pilot(const PilotOptions &options, Backend *backend, const DataSplit &data,
                 GradientReducer *reducer,
                 const std::function<void(int64_t, double, double)> &progress, PilotResult *out);

}  // namespace quorum::trainer::tuner
