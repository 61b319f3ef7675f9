// compute_profiler.hpp: times real training steps of a model on a backend over
// a grid of local batch sizes (the tuner's compute table), and estimates the
// memory each batch needs.
//
// A step is what quorum-train times as training: assemble and load the batch,
// forward, loss, backward, SGD update. Each batch size gets `warmup` untimed
// steps, then up to `timed` steps whose mean is kept: fewer (at least 3) once
// the mean is known to `precision` or the steps took `max_seconds`. On several ranks every rank
// profiles at once (they share the machine as they will in training) and the
// slowest rank's time counts, as a synchronous step waits for it.
#pragma once

#include <functional>
#include <string>
#include <vector>

#include "quorum/quorum.h"
#include "runtime/status.hpp"
#include "trainer/backend.hpp"
#include "trainer/dataset.hpp"
#include "trainer/tuner/step_profile.hpp"

namespace quorum::trainer::tuner {

struct ProfileOptions {
  std::string model = "fm-s";
  std::vector<int> batches;  // local batch sizes
  int warmup = 3, timed = 20;
  // Fewer timed steps (at least 3) once they took this long (0: no limit).
  double max_seconds = 0;
  // ... or once the standard error of their mean is at most this fraction of
  // it (0: off).
  double precision = 0;
  // The larger batches are left unmeasured (the profile extends its last
  // segment to them, and says they are extrapolated) once the last three
  // measured lie on one line in log-log to within this fraction: the third's
  // step time against the line through the two before (0: measure all).
  double tight = 0;
};

// Bytes the model's buffers take at local batch `batch`: parameters,
// gradients and momentum, plus activations and their gradients (the backend's
// own scratch is not counted).
Status estimate_model_bytes(const std::string &model, int batch, double *bytes,
                            size_t *param_count);

// comm may be nullptr (one process). `progress` (if given) is called after
// each batch size with (batch, seconds per step).
Status profile_compute(const ProfileOptions &options, Backend *backend, const Dataset &train,
                       quorum_comm_t comm, const std::function<void(int, double)> &progress,
                       StepProfile *out);

}  // namespace quorum::trainer::tuner
