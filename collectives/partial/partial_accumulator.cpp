// partial_accumulator.cpp: this rank's input to the rounds of a partial
// allreduce (fresh post, carried late posts with their weight and staleness,
// dropped ones) and the buffers that hold it (see partial_accumulator.hpp).
#include "collectives/partial/partial_accumulator.hpp"

#include <algorithm>
#include <cstring>
#include <utility>

#include "collectives/reduce/reduce_kernels.hpp"
#include "runtime/clock.hpp"

namespace quorum::partial {

PartialAccumulator::~PartialAccumulator() {
  // The symmetric buffers lie in the communicator's regions (shared with
  // quorum_mem_alloc's): unmapped here, the peers' mappings stay theirs.
  if (ctx_.shm && symmetric_begin_) {
    ctx_.shm->regions().release(const_cast<uint8_t *>(symmetric_begin_));
  }
}

// ---- buffers ----

Status PartialAccumulator::reserve_symmetric_buffers() {
  const size_t n = std::min<size_t>(ctx_.opts.max_staleness + 3, kSymmetricBuffers);
  const size_t stride = (ctx_.bytes + 4095) / 4096 * 4096;
  void *base = nullptr;
  QUORUM_CHECK(ctx_.comm.alloc_symmetric(*ctx_.shm, n * stride, &base));
  if (!base) return kOk;  // no segment on some rank: plain buffers everywhere
  for (size_t i = n; i-- > 0;) symmetric_.push_back(static_cast<uint8_t *>(base) + i * stride);
  symmetric_begin_ = static_cast<const uint8_t *>(base);
  symmetric_end_ = symmetric_begin_ + n * stride;
  return kOk;
}

Status PartialAccumulator::make_accumulator() {
  histogram_.assign(static_cast<size_t>(ctx_.size) + 1, 0);
  accumulator_ = new_buffer();
  if (!accumulator_) {
    return fail(QUORUM_ERR_NO_MEMORY, "partial", "accumulator of {} B", ctx_.bytes);
  }
  return kOk;
}

uint8_t *PartialAccumulator::new_buffer() {
  uint8_t *b = nullptr;
  if (!symmetric_.empty()) {
    b = symmetric_.back();
    symmetric_.pop_back();
  } else {
    buffers_.push_back(allocate_aligned(ctx_.bytes));
    b = buffers_.back().get();
    if (!b) {
      buffers_.pop_back();
      return nullptr;
    }
  }
  ++allocated_;
  return b;  // stale bytes: the accumulator is empty until a post copies into it
}

uint8_t *PartialAccumulator::take_free_buffer() {
  if (!free_.empty()) {
    // A symmetric one if any: a round is zero-copy only when every rank's
    // buffer for it is (a plain one here would make the whole round copy).
    auto it = std::find_if(free_.rbegin(), free_.rend(),
                           [this](const uint8_t *b) { return is_symmetric(b); });
    if (it != free_.rend()) std::iter_swap(it, free_.rbegin());
    uint8_t *b = free_.back();
    free_.pop_back();
    return b;
  }
  // One accumulator plus at most max_staleness + 1 round buffers (and a lent one).
  if (allocated_ >= ctx_.opts.max_staleness + 2 + (lent_ ? 1 : 0)) return nullptr;
  return new_buffer();
}

void PartialAccumulator::return_lent() {
  if (lent_) free_.push_back(std::exchange(lent_, nullptr));
}

// ---- posts ----

Status PartialAccumulator::stage_device_post(const void **contribution) {
  // Device memory: stage through a host buffer (accumulators live on the host).
  if (!staging_) staging_ = allocate_aligned(ctx_.bytes);
  if (!staging_) return fail(QUORUM_ERR_NO_MEMORY, "partial", "staging of {} B", ctx_.bytes);
  QUORUM_CHECK(device_copy(staging_.get(), *contribution, ctx_.bytes));
  *contribution = staging_.get();
  return kOk;
}

// Called without the mutex while copying_ keeps joins away.
Status PartialAccumulator::add_post(const void *contribution, bool late) {
  if (late && ctx_.opts.carry_weight != 1) QUORUM_CHECK(weigh_late_post(&contribution));
  return accumulate(contribution);
}

Status PartialAccumulator::weigh_late_post(const void **contribution) {
  if (!staging_) staging_ = allocate_aligned(ctx_.bytes);
  if (!staging_) return fail(QUORUM_ERR_NO_MEMORY, "partial", "staging of {} B", ctx_.bytes);
  // One pass, copy and scale together (in place when it was staged from
  // device memory already).
  if (ctx_.dtype == QUORUM_FLOAT32) {
    const auto *in = static_cast<const float *>(*contribution);
    auto *out = reinterpret_cast<float *>(staging_.get());
    const float w = static_cast<float>(ctx_.opts.carry_weight);
    for (size_t i = 0; i < ctx_.count; ++i) out[i] = in[i] * w;
  } else {
    const auto *in = static_cast<const double *>(*contribution);
    auto *out = reinterpret_cast<double *>(staging_.get());
    for (size_t i = 0; i < ctx_.count; ++i) out[i] = in[i] * ctx_.opts.carry_weight;
  }
  *contribution = staging_.get();
  return kOk;
}

Status PartialAccumulator::accumulate(const void *contribution) {
  if (!accumulator_empty_) {
    return reduce_into(accumulator_, contribution, ctx_.count, ctx_.dtype, ctx_.op);
  }
  std::memcpy(accumulator_, contribution, ctx_.bytes);
  accumulator_empty_ = false;
  return kOk;
}

void PartialAccumulator::note_fresh_post() {
  fresh_pending_ = true;
  pending_post_ns_ = now_ns();
}

void PartialAccumulator::note_late_post(uint64_t posted_for) {
  ++carried_;
  ++carried_pending_;
  carried_pending_rounds_ += posted_for;
}

bool PartialAccumulator::can_lend(const void *contribution) const {
  // Lent only when it is all of this rank's input to its round (nothing
  // carried). Not one outside the symmetric regions when the rounds go
  // zero-copy: the round would copy it in slices anyway, slower than one copy.
  const bool zero_copy_rounds =
      ctx_.shm && symmetric_begin_ && ctx_.bytes >= ctx_.shm->zero_copy_bytes();
  const bool lendable =
      !zero_copy_rounds || ctx_.shm->regions().locate(contribution, ctx_.bytes).region != 0;
  return accumulator_empty_ && lendable;
}

void PartialAccumulator::lend_post(const void *contribution) {
  lent_post_ = static_cast<const uint8_t *>(contribution);
  note_fresh_post();
}

// ---- joining a round ----

bool PartialAccumulator::take_round_input(uint64_t round, RoundInput *in) {
  uint8_t *fresh_buf = take_free_buffer();
  if (!fresh_buf) return false;
  in->buf = accumulator_;
  // A lent post (post_ref) is read from the caller's buffer; the accumulator,
  // empty then, receives the round's result.
  in->send = lent_post_ ? lent_post_ : in->buf;
  lent_post_ = nullptr;
  in->empty = accumulator_empty_ && in->send == in->buf;  // stale bytes: identity wanted
  accumulator_ = fresh_buf;
  accumulator_empty_ = true;
  in->own_fresh = fresh_pending_;
  in->post_ns = fresh_pending_ ? pending_post_ns_ : 0;
  in->own_carried = carried_pending_;
  in->own_staleness = static_cast<uint64_t>(carried_pending_) * round - carried_pending_rounds_;
  carried_pending_ = 0;
  carried_pending_rounds_ = 0;
  fresh_pending_ = false;
  return true;
}

}  // namespace quorum::partial
