// collective_reducer.hpp: the distributed gradient reducers of the trainer,
// over quorum's public API (as any application would use it):
//   sync      allreduce (average) every step
//   solo      partial allreduce, the first rank ready activates each round
//   majority  partial allreduce, a rank drawn per round from a shared seed activates it
//   quorum:K  partial allreduce, a round starts once K of the P ranks are ready
// Partial modes carry late gradients into a later round, multiplied by
// carry_weight (1: nothing is lost; the command line's default is 0.5, a stale
// gradient being worth less than a fresh one), and scale every round's sum by
// 1/P by default (PartialScale::World), so with weight 1 the applied gradient
// mass over a run equals the synchronous one. Each rank's k-th step applies
// round k's result, the same on every rank, so replicas stay bitwise
// identical (check_replicas verifies).
// Injected imbalance (imbalance.hpp) sleeps after the rank's compute, before
// its contribution (inject_imbalance); with buckets, a rank drawn to be slow at
// a step holds that step's buckets until after the sleep.
// bucket_bytes: synchronous steps allreduce the gradient in buckets that start
// during the backward pass (gradient_buckets.hpp; host gradients only, as a
// device's backward may still run when a range is reported); the injected
// sleep then delays only the buckets not sent yet.
// catch_up: between steps, a rank that the others left behind (rounds they
// already ran, quorum_partial_rounds_behind) applies those steps' results
// without computing gradients for them, so it computes its next gradient on
// the newest parameters; its data for those steps is skipped. Without it, such
// a rank stays behind until a synchronous round, and every gradient it
// computes meanwhile is several steps stale (solo with carry diverged so).
// sync_epochs: the partial modes reduce synchronously (allreduce) for their
// first epochs: stale gradients hurt most while the loss still falls fast (at 4
// ranks, majority with carry diverged in some runs without it; trainer/README.md).
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "quorum/quorum.h"
#include "trainer/backend.hpp"
#include "trainer/distributed/gradient_buckets.hpp"
#include "trainer/distributed/imbalance.hpp"
#include "trainer/gradient_reducer.hpp"

namespace quorum::trainer {

// How a partial round's sum of n gradients (fresh and carried) becomes the
// step's gradient. The learning rate is scaled linearly for P gradients.
//   world  divide by P: each gradient weighs as in a synchronous step, so a
//          round of fewer gradients makes a smaller step
//   sqrt   divide by sqrt(P x n): the rate follows the square-root rule for
//          the round's smaller batch (n x batch); P gradients: as world
//   count  divide by n: the mean, a full-size step from fewer gradients
enum class PartialScale { World, Sqrt, Count };

// The factor for a round of n gradients (n < 1 counts as 1; a weighted carried
// one counts as its weight) on P ranks.
float partial_round_scale(PartialScale scale, int world, double n);

struct ReducerOptions {
  std::string mode = "sync";         // sync | solo | majority | quorum:K
  unsigned max_staleness = 32;       // partial: a synchronous round every max_staleness+1
  bool carry = true;                 // partial: late gradients ride in a later round
  double carry_weight = 1;           // partial: ... multiplied by this, in (0, 1]
  uint64_t seed = 1;                 // majority initiators and imbalance draws
  double sync_epochs = 0;            // partial: plain allreduce for the first epochs
  bool catch_up = true;              // partial: a rank behind skips the steps others already ran
  unsigned activation_delay_us = 0;  // partial: the activating post waits this long for others
  PartialScale scale = PartialScale::World;  // partial: a round's sum to the step's gradient
  size_t bucket_bytes = 0;  // synchronous steps: allreduce in buckets during backward (0: after)
  ImbalanceModel imbalance;
};

class CollectiveReducer : public GradientReducer {
 public:
  // comm stays owned by the caller; backend copies device gradients when needed.
  static Status create(quorum_comm_t comm, const ReducerOptions &options, Backend *backend,
                       std::unique_ptr<CollectiveReducer> *out);
  ~CollectiveReducer() override;

  int rank() const override { return rank_; }
  int size() const override { return size_; }
  Status broadcast_parameters(float *params, size_t count, MemoryKind memory) override;
  double inject_imbalance(int64_t step) override;
  void gradient_ready(float *grads, size_t offset, size_t count, int64_t step) override;
  Status reduce_gradients(float *grads, size_t count, MemoryKind memory, int64_t step,
                          ReduceInfo *info) override;
  int64_t steps_behind() override;
  Status skip_step(float *grads, size_t count, MemoryKind memory, int64_t step,
                   ReduceInfo *info) override;
  Status sum_over_ranks(double *values, size_t n) override;
  const char *name() const override { return options_.mode.c_str(); }
  void set_steps_per_epoch(int64_t steps) override;
  // The backend that owns device gradients (copies for the partial modes).
  void set_backend(Backend *backend) { backend_ = backend; }

  // Collective (partial modes): creates the partial allreduce for count floats
  // now; the first partial step does otherwise. A rank may then skip_step a
  // round it never posted for (tests drive single rounds so).
  Status prepare(size_t count) { return ensure_partial(count); }

  // Collective: drains what partial rounds still carry (flush) and frees them.
  // Returns the L1 norm of the drained gradient sum (0 for sync), for the log.
  Status finish(double *drained_l1);
  // Local (error paths): frees the partial object without the collective destroy.
  void abandon();
  // Collective: gathers every rank's parameter checksum; *agree when all equal.
  Status check_replicas(uint32_t crc32, bool *agree);
  // Collective, before training: every rank must run with the same settings
  // (name, value as text; the same names in the same order everywhere), or
  // the ranks would issue different collectives. INVALID_ARG on every rank
  // names the first setting that differs and which ranks have rank 0's value.
  Status check_same_settings(const std::vector<std::pair<std::string, std::string>> &settings);

  // Allreduces the last bucketed step took (0: none yet), and the steps bucketed.
  int64_t last_step_allreduces() const { return buckets_ ? buckets_->last_step_allreduces() : 0; }
  int64_t bucketed_steps() const { return buckets_ ? buckets_->started_steps() : 0; }
  // Statistics over the run: histogram of fresh contributions per round.
  const std::vector<int64_t> &fresh_histogram() const { return fresh_histogram_; }

 private:
  CollectiveReducer() = default;
  Status ensure_partial(size_t count);
  // Steps reduced with a plain (average) allreduce: sync, and the partial
  // modes' first sync_epochs.
  bool synchronous_step(int64_t step) const {
    return options_.mode == "sync" || step < sync_steps_;
  }
  // Where a partial round reads and leaves the gradient: grads itself, or the
  // host staging of device gradients (sized to count).
  float *round_buffer(float *grads, size_t count, MemoryKind memory);
  // Waits for this rank's next round and leaves its sum / P in grads (through
  // buf, the host staging of device gradients, or grads itself).
  Status receive_round(float *grads, float *buf, size_t count, MemoryKind memory, ReduceInfo *info);

  quorum_comm_t comm_ = nullptr;
  ReducerOptions options_;
  Backend *backend_ = nullptr;
  int rank_ = 0, size_ = 1;
  unsigned quorum_k_ = 0;  // quorum:K's K (0: another mode)
  quorum_partial_t partial_ = nullptr;
  size_t partial_count_ = 0;
  int64_t sync_steps_ = 0;   // steps below this reduce with allreduce (sync_epochs)
  std::vector<float> host_;  // staging of device gradients for partial modes
  std::vector<int64_t> fresh_histogram_;
  std::unique_ptr<GradientBuckets> buckets_;  // bucket_bytes > 0
  // Layer ranges of step held_step_ held back by an injected delay.
  std::vector<std::pair<size_t, size_t>> held_;
  int64_t held_step_ = -1;
};

}  // namespace quorum::trainer
