// gradient_reducer.hpp: where the trainer hands its gradient to the network.
//
// The trainer calls broadcast_parameters() once before the first step (rank 0's
// initial or resumed parameters must end up on every rank), and
// reduce_gradients() once per step after the backward pass, with the whole flat
// gradient buffer (model.hpp: one contiguous buffer in the backend's memory)
// followed by the model's control slots (Model::kGradControlSlots: the stop
// request, trainer.cpp), which are reduced like the gradient.
// On return the buffer must hold the gradient to apply: the average over the
// ranks that contributed (sync: all; solo/majority: those that joined).
// LocalGradientReducer is the single-process no-op; the distributed reducers
// (sync, solo, majority over collectives/) implement the same class.
#pragma once

#include <cstddef>
#include <cstdint>

#include "runtime/status.hpp"
#include "trainer/backend.hpp"

namespace quorum::trainer {

// What one reduction did (for the per-epoch report and the logs).
struct ReduceInfo {
  int contributors = 1;       // ranks whose gradient is in the result
  double wait_seconds = 0.0;  // time blocked in the reduction
  int carried = 0;            // partial: this rank's late gradients that rode in this step
  uint64_t staleness = 0;     // their summed lateness, in steps
};

class GradientReducer {
 public:
  virtual ~GradientReducer() = default;
  virtual int rank() const = 0;
  virtual int size() const = 0;
  // Called after computing the gradient of `step`, before reduce_gradients()
  // (not for skipped steps): the injected load imbalance (--imbalance) sleeps
  // here, as eager-SGD's does after the compute. A rank drawn to be slow is
  // late with all of its gradient: a reducer that sends buckets during the
  // backward pass holds that step's. Returns the seconds slept; the default:
  // none.
  virtual double inject_imbalance(int64_t /*step*/) { return 0.0; }
  // params: `count` floats in memory of kind `memory` (host or device).
  virtual Status broadcast_parameters(float *params, size_t count, MemoryKind memory) = 0;
  // Called during the backward pass of `step`, last layer first, as each layer's
  // part of the gradient [offset, offset + count) becomes final (Model::backward);
  // the ranges are contiguous and cover the buffer (the first one, at its end,
  // includes the control slots). A reducer may start
  // communicating a bucket here; reduce_gradients() still follows and must
  // leave the whole buffer reduced. The default ignores it.
  virtual void gradient_ready(float * /*grads*/, size_t /*offset*/, size_t /*count*/,
                              int64_t /*step*/) {}
  // grads: `count` floats (the flat gradient of step `step` and the control
  // slots), reduced in place.
  virtual Status reduce_gradients(float *grads, size_t count, MemoryKind memory, int64_t step,
                                  ReduceInfo *info) = 0;
  // How many of the next steps the other ranks already reduced without this
  // rank (partial reducers; checked between steps). The trainer then skips
  // computing them: for each, skip_step() leaves the step's reduced gradient
  // in grads, without a contribution. The default: never behind.
  virtual int64_t steps_behind() { return 0; }
  virtual Status skip_step(float * /*grads*/, size_t /*count*/, MemoryKind /*memory*/,
                           int64_t /*step*/, ReduceInfo * /*info*/) {
    return fail(QUORUM_ERR_INTERNAL, "reducer", "skip_step on a reducer that is never behind");
  }
  // Adds `n` doubles over the ranks, in place: every rank gets the sums (a
  // blocking collective, for the split test-set evaluation).
  virtual Status sum_over_ranks(double *values, size_t n) = 0;
  // A short name for logs ("local", "sync", "solo", "majority").
  virtual const char *name() const = 0;
  // Called once before the first step with the run's steps per epoch (for
  // options given in epochs). The default ignores it.
  virtual void set_steps_per_epoch(int64_t /*steps*/) {}
};

// One process, nothing to reduce.
class LocalGradientReducer : public GradientReducer {
 public:
  int rank() const override { return 0; }
  int size() const override { return 1; }
  Status broadcast_parameters(float *, size_t, MemoryKind) override { return kOk; }
  Status reduce_gradients(float *, size_t, MemoryKind, int64_t, ReduceInfo *info) override {
    if (info != nullptr) *info = ReduceInfo{};
    return kOk;
  }
  Status sum_over_ranks(double *, size_t) override { return kOk; }
  const char *name() const override { return "local"; }
};

}  // namespace quorum::trainer
