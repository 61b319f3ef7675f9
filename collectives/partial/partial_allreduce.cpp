// partial_allreduce.cpp: the façade of a partial allreduce (see
// partial_allreduce.hpp for the rules): creation (the options' checks, then
// the parts wired together: context, accumulator, round driver, activation
// tree), and the calls and statistics, each handed to the part that owns it.
#include "collectives/partial/partial_allreduce.hpp"

#include <vector>

#include "collectives/algorithms/algorithms.hpp"
#include "collectives/partial/activation.hpp"
#include "collectives/partial/activation_tree.hpp"
#include "collectives/partial/partial_accumulator.hpp"
#include "collectives/partial/partial_context.hpp"
#include "collectives/partial/partial_round.hpp"
#include "collectives/partial/round_driver.hpp"
#include "collectives/reduce/reduce_kernels.hpp"
#include "runtime/log.hpp"

namespace quorum {

static_assert(ObjectIds::kBits == partial::kObjectBits,
              "live objects' ids must differ in the bits their tags keep");

Status PartialAllreduce::create(Communicator &comm, size_t count, quorum_dtype_t dtype,
                                quorum_op_t op, const PartialOptions &options,
                                std::unique_ptr<PartialAllreduce> *out) {
  if (!out) return fail(QUORUM_ERR_INVALID_ARG, "partial", "partial_create: NULL output");
  if (count == 0) {
    return fail(QUORUM_ERR_INVALID_ARG, "partial", "partial_create: count 0 (nothing to reduce)");
  }
  uint8_t dummy = 0;
  QUORUM_CHECK(validate_reduction("partial_create", &dummy, &dummy, count, dtype, op));
  if (options.mode != QUORUM_PARTIAL_SOLO && options.mode != QUORUM_PARTIAL_MAJORITY &&
      options.mode != QUORUM_PARTIAL_QUORUM) {
    return fail(QUORUM_ERR_INVALID_ARG, "partial", "partial_create: unknown mode {}",
                static_cast<int>(options.mode));
  }
  if (options.mode == QUORUM_PARTIAL_QUORUM &&
      (options.k < 1 || options.k > static_cast<unsigned>(comm.size()))) {
    return fail(QUORUM_ERR_INVALID_ARG, "partial",
                "partial_create: quorum mode with k = {}: a round needs k of the {} ranks, "
                "1 <= k <= {}",
                options.k, comm.size(), comm.size());
  }
  if (options.mode != QUORUM_PARTIAL_QUORUM && options.k != 0) {
    return fail(QUORUM_ERR_INVALID_ARG, "partial",
                "partial_create: k = {} is for the quorum mode only (0 in solo and majority)",
                options.k);
  }
  if (options.max_staleness > partial::kMaxStaleness) {
    return fail(QUORUM_ERR_INVALID_ARG, "partial",
                "partial_create: max_staleness {} is above {} (round ids in tags would wrap)",
                options.max_staleness, partial::kMaxStaleness);
  }
  if (options.activation_delay_us > kMaxActivationDelayUs) {
    return fail(QUORUM_ERR_INVALID_ARG, "partial",
                "partial_create: activation_delay_us {} is above {} (10 s)",
                options.activation_delay_us, kMaxActivationDelayUs);
  }
  if (!(options.carry_weight > 0 && options.carry_weight <= 1)) {
    return fail(QUORUM_ERR_INVALID_ARG, "partial",
                "partial_create: carry_weight {} is outside (0, 1]", options.carry_weight);
  }
  if (options.carry_weight != 1) {
    if (!options.carry) {
      return fail(QUORUM_ERR_INVALID_ARG, "partial",
                  "partial_create: carry_weight {} with carry off (late posts are dropped)",
                  options.carry_weight);
    }
    if ((dtype != QUORUM_FLOAT32 && dtype != QUORUM_FLOAT64) ||
        (op != QUORUM_SUM && op != QUORUM_AVG)) {
      return fail(QUORUM_ERR_INVALID_ARG, "partial",
                  "partial_create: carry_weight {} needs a float32 or float64 sum or avg, not "
                  "{} {}",
                  options.carry_weight, dtype_name(dtype), op_name(op));
    }
  }
  std::unique_ptr<PartialAllreduce> p(new PartialAllreduce());
  p->ctx_ = std::make_unique<partial::PartialContext>(comm);
  partial::PartialContext &ctx = *p->ctx_;
  ctx.engine = &comm.engine();
  ctx.transport = comm.transport();
  ctx.rank = comm.rank();
  ctx.size = comm.size();
  ctx.count = count;
  ctx.dtype = dtype;
  ctx.op = op;
  ctx.bytes = count * dtype_size(dtype);
  ctx.opts = options;
  ctx.bitmap_words = (static_cast<size_t>(ctx.size) + 31) / 32;
  ctx.header_words = partial::kHdrBitmaps + 2 * ctx.bitmap_words;
  p->accumulator_ = std::make_unique<partial::PartialAccumulator>(ctx);
  p->driver_ = std::make_unique<partial::RoundDriver>(ctx, *p->accumulator_);
  p->tree_ = std::make_unique<partial::ActivationTree>(ctx, *p->accumulator_, *p->driver_);
  p->driver_->set_activation_tree(p->tree_.get());
  // Before any collective step: every rank refuses alike when all ids are taken.
  QUORUM_CHECK(p->driver_->acquire_object_id());
  p->driver_->start_at(options.first_round);
  QUORUM_CHECK(comm.make_shm_channel(&ctx.shm));
  int radix = 2;
  bool symmetric = false;
  QUORUM_CHECK(p->agree_on_options(&radix, &symmetric));
  if (symmetric) QUORUM_CHECK(p->accumulator_->reserve_symmetric_buffers());
  QUORUM_CHECK(p->accumulator_->make_accumulator());
  QUORUM_CHECK(p->tree_->start(radix));
  p->driver_->start_polling();
  PartialAllreduce *self = p.get();
  p->finalize_hook_ = comm.add_finalize_hook([self] {
    self->driver_->orphan();
    self->finalize_hook_ = -1;
  });
  comm.want_progress_thread();
  QLOG_DEBUG(
      "partial",
      "created #{}: {} x {} {}, {}, max_staleness {}, {} (weight {}), activation delay {} us",
      ctx.object_id, count, dtype_name(dtype), op_name(op),
      options.mode == QUORUM_PARTIAL_SOLO ? std::string("solo")
      : options.mode == QUORUM_PARTIAL_MAJORITY
          ? std::string("majority")
          : fmt::format("quorum {} of {}", options.k, comm.size()),
      options.max_staleness, options.carry ? "carry" : "drop", options.carry_weight,
      options.activation_delay_us);
  *out = std::move(p);
  return kOk;
}

Status PartialAllreduce::agree_on_options(int *radix, bool *symmetric) {
  const partial::PartialContext &ctx = *ctx_;
  // What each rank's knobs say; collective steps must not depend on them alone.
  struct Wish {
    int64_t radix;
    int64_t symmetric;  // shared memory and the shm allreduce for the rounds
    uint64_t object_id;
  } mine{partial::ActivationTree::wished_radix(ctx), ctx.shm && allreduce_uses_shm() ? 1 : 0,
         ctx.object_id};
  std::vector<Wish> all(static_cast<size_t>(ctx.size));
  QUORUM_CHECK(ctx.comm.allgather(&mine, all.data(), sizeof(Wish)));
  for (int q = 0; q < ctx.size; ++q) {
    if (all[q].object_id != ctx.object_id) {
      return fail(QUORUM_ERR_MISMATCH, "partial",
                  "partial_create: rank {} made object #{}, rank {} #{}: partial objects must be "
                  "created and destroyed in the same order on every rank (was one freed on some "
                  "ranks only?)",
                  ctx.rank, ctx.object_id, q, all[q].object_id);
    }
  }
  *radix = static_cast<int>(all[0].radix);  // one tree: rank 0's
  *symmetric = true;  // symmetric round buffers only if every rank can use them
  for (const Wish &w : all) *symmetric = *symmetric && w.symmetric == 1;
  return kOk;
}

PartialAllreduce::PartialAllreduce() = default;

PartialAllreduce::~PartialAllreduce() {
  if (!ctx_->orphaned) {  // else released when the communicator was finalized
    if (finalize_hook_ >= 0) ctx_->comm.remove_finalize_hook(finalize_hook_);
    // Not destroyed collectively: release locally (rounds aborted, receives cancelled).
    if (!driver_->destroyed()) driver_->release();
  }
}

// ---- calls ----

Status PartialAllreduce::post(const void *contribution) {
  if (!contribution) return fail(QUORUM_ERR_INVALID_ARG, "partial", "partial_post: NULL buffer");
  return driver_->post(contribution);
}

Status PartialAllreduce::post_ref(const void *contribution) {
  if (!contribution) {
    return fail(QUORUM_ERR_INVALID_ARG, "partial", "partial_post_ref: NULL buffer");
  }
  return driver_->post_ref(contribution);
}

Status PartialAllreduce::wait(void *result, PartialRoundInfo *info) {
  if (!result) return fail(QUORUM_ERR_INVALID_ARG, "partial", "partial_wait: NULL result buffer");
  return driver_->wait(result, nullptr, info);
}

Status PartialAllreduce::wait_ref(const void **result, PartialRoundInfo *info) {
  if (!result) return fail(QUORUM_ERR_INVALID_ARG, "partial", "partial_wait_ref: NULL output");
  *result = nullptr;
  return driver_->wait(nullptr, result, info);
}

Status PartialAllreduce::flush(void *result, PartialRoundInfo *info) {
  if (!result) return fail(QUORUM_ERR_INVALID_ARG, "partial", "partial_flush: NULL result buffer");
  return driver_->flush(result, info);
}

Status PartialAllreduce::destroy() {
  return driver_->destroy();
}

// ---- statistics ----

uint64_t PartialAllreduce::next_round() const {
  auto lock = ctx_->lock_engine();
  return driver_->next_round();
}

uint64_t PartialAllreduce::rounds_behind() const {
  auto lock = ctx_->lock_engine();
  return driver_->rounds_behind();
}

uint64_t PartialAllreduce::dropped() const {
  auto lock = ctx_->lock_engine();
  return accumulator_->dropped();
}

uint64_t PartialAllreduce::carried() const {
  auto lock = ctx_->lock_engine();
  return accumulator_->carried();
}

uint64_t PartialAllreduce::deferred_activations() const {
  auto lock = ctx_->lock_engine();
  return tree_->deferred_count();
}

std::vector<uint64_t> PartialAllreduce::fresh_histogram() const {
  auto lock = ctx_->lock_engine();
  return accumulator_->fresh_histogram();
}

const PartialRoundInfo &PartialAllreduce::last_info() const {
  return driver_->last_info();
}

uint64_t PartialAllreduce::object_id() const {
  return ctx_->object_id;
}

size_t PartialAllreduce::buffers_allocated() const {
  auto lock = ctx_->lock_engine();
  return accumulator_->allocated();
}

size_t PartialAllreduce::plain_buffers() const {
  auto lock = ctx_->lock_engine();
  return accumulator_->plain_buffers();
}

uint64_t PartialAllreduce::zero_copy_rounds() const {
  return ctx_->shm ? ctx_->shm->zero_copy_ops() : 0;
}

uint64_t PartialAllreduce::cross_memory_rounds() const {
  return ctx_->shm ? ctx_->shm->cross_memory_ops() : 0;
}

}  // namespace quorum
