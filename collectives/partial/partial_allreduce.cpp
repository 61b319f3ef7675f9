// partial_allreduce.cpp: solo/majority allreduce (see partial_allreduce.hpp for
// the rules): creation and release, the buffers, and the calls (post, wait,
// flush, destroy, statistics). A round is an activation step in front of an
// ordinary allreduce schedule (data) plus a small int64 sum allreduce
// (header), both driven by this object's poller under the engine mutex
// (partial_rounds.cpp).
#include "collectives/partial/partial_allreduce.hpp"

#include <algorithm>
#include <cstring>
#include <functional>
#include <utility>

#include "collectives/algorithms/algorithms.hpp"
#include "collectives/partial/activation.hpp"
#include "collectives/partial/partial_round.hpp"
#include "collectives/reduce/reduce_kernels.hpp"
#include "runtime/clock.hpp"
#include "runtime/knobs.hpp"
#include "runtime/log.hpp"

namespace quorum {

using partial::majority_initiator;
using partial::round_seq;

static_assert(ObjectIds::kBits == partial::kObjectBits,
              "live objects' ids must differ in the bits their tags keep");

namespace {

// A task that runs a condition under the engine mutex (waits on partial state).
class ConditionTask : public Task {
 public:
  ConditionTask(std::function<TaskResult(Status *)> fn, std::function<std::string()> desc)
      : fn_(std::move(fn)), desc_(std::move(desc)) {}
  TaskResult progress(Status *status) override { return fn_(status); }
  std::string describe() const override { return desc_(); }

 private:
  std::function<TaskResult(Status *)> fn_;
  std::function<std::string()> desc_;
};

// Runs the engine until fn says Done or Failed (fn checks its own deadline).
Status run_until(ProgressEngine &engine, const std::string &what,
                 std::function<TaskResult(Status *)> fn, std::function<std::string()> desc) {
  auto sched = std::make_unique<Schedule>(what);
  sched->add(std::make_unique<ConditionTask>(std::move(fn), std::move(desc)));
  auto req = std::make_shared<Request>(std::move(sched), Deadline::never(), what);
  engine.submit(req);
  return engine.wait(req);
}

}  // namespace

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
  std::unique_ptr<PartialAllreduce> p(new PartialAllreduce(comm));
  p->engine_ = &comm.engine();
  p->transport_ = comm.transport();
  p->rank_ = comm.rank();
  p->size_ = comm.size();
  p->count_ = count;
  p->dtype_ = dtype;
  p->op_ = op;
  p->bytes_ = count * dtype_size(dtype);
  p->opts_ = options;
  // Before any collective step: every rank refuses alike when all ids are taken.
  QUORUM_CHECK(comm.object_ids().acquire(&p->object_id_));
  p->holds_object_id_ = true;
  p->joined_ = p->waited_ = options.first_round;
  p->bitmap_words_ = (static_cast<size_t>(p->size_) + 31) / 32;
  p->header_words_ = partial::kHdrBitmaps + 2 * p->bitmap_words_;
  p->histogram_.assign(p->size_ + 1, 0);
  p->sent_to_.assign(p->size_, 0);
  p->recv_from_.assign(p->size_, 0);
  p->activation_tag_ = make_tag(CollKind::PartialControl, partial::activation_seq(p->object_id_),
                                partial::kActivationStep);
  QUORUM_CHECK(comm.make_shm_channel(&p->shm_));
  bool symmetric = false;
  QUORUM_CHECK(p->agree_on_options(&symmetric));
  if (symmetric) QUORUM_CHECK(p->reserve_symmetric_buffers());
  p->accumulator_ = p->new_buffer();
  if (!p->accumulator_) {
    return fail(QUORUM_ERR_NO_MEMORY, "partial", "accumulator of {} B", p->bytes_);
  }
  {
    std::lock_guard<std::mutex> lock(p->engine_->mutex());
    p->recvs_.resize(p->size_);
    for (int q = 0; q < p->size_; ++q) {
      if (q == p->rank_) continue;
      p->recvs_[q] = std::make_unique<ActivationRecv>();
      QUORUM_CHECK(p->post_activation_recv(q));
    }
  }
  PartialAllreduce *self = p.get();
  p->poller_id_ = p->engine_->add_poller([self] { return self->poll(); });
  p->finalize_hook_ = comm.add_finalize_hook([self] { self->orphan(); });
  comm.want_progress_thread();
  QLOG_DEBUG(
      "partial",
      "created #{}: {} x {} {}, {}, max_staleness {}, {} (weight {}), activation delay {} us",
      p->object_id_, count, dtype_name(dtype), op_name(op),
      options.mode == QUORUM_PARTIAL_SOLO ? std::string("solo")
      : options.mode == QUORUM_PARTIAL_MAJORITY
          ? std::string("majority")
          : fmt::format("quorum {} of {}", options.k, comm.size()),
      options.max_staleness, options.carry ? "carry" : "drop", options.carry_weight,
      options.activation_delay_us);
  *out = std::move(p);
  return kOk;
}

PartialAllreduce::PartialAllreduce(Communicator &comm) : comm_(comm) {}

PartialAllreduce::~PartialAllreduce() {
  if (!orphaned_) {  // else released when the communicator was finalized
    if (finalize_hook_ >= 0) comm_.remove_finalize_hook(finalize_hook_);
    // Not destroyed collectively: release locally (rounds aborted, receives cancelled).
    if (!destroyed_) release();
  }
  // The symmetric buffers lie in the communicator's regions (shared with
  // quorum_mem_alloc's): unmapped here, the peers' mappings stay theirs.
  if (shm_ && symmetric_begin_) shm_->regions().release(const_cast<uint8_t *>(symmetric_begin_));
}

void PartialAllreduce::orphan() {
  if (!destroyed_) {
    // A failed object is expected here (an application's error path).
    log(error_ != kOk ? LogLevel::Info : LogLevel::Warn, "partial",
        "partial #{} rank {}: the communicator is finalized before the partial collective was "
        "destroyed; released locally (destroy it before quorum_finalize)",
        object_id_, rank_);
    release();
  }
  orphaned_ = true;
  finalize_hook_ = -1;
}

std::unique_lock<std::mutex> PartialAllreduce::lock_engine() const {
  if (orphaned_) return {};
  return std::unique_lock<std::mutex>(engine_->mutex());
}

Status PartialAllreduce::begin_call_locked(const char *call) {
  if (destroyed_) return released_error(call);
  if (error_ != kOk) {
    restore_last_error(error_detail_);
    return error_;
  }
  return_lent();
  return kOk;
}

Status PartialAllreduce::begin_post_locked(const char *call) {
  QUORUM_CHECK(begin_call_locked(call));
  if (posted_) {
    return fail(QUORUM_ERR_INVALID_ARG, "partial",
                "{}: rank {} posted twice for round {} without a wait in between", call, rank_,
                waited_);
  }
  return kOk;
}

Status PartialAllreduce::released_error(const char *call) const {
  if (orphaned_) {
    return fail(QUORUM_ERR_INVALID_ARG, "partial",
                "{}: partial #{}'s communicator was finalized (the object was released then)", call,
                object_id_);
  }
  return fail(QUORUM_ERR_INVALID_ARG, "partial", "{} after destroy", call);
}

Status PartialAllreduce::release() {
  {
    auto lock = lock_engine();
    destroyed_ = true;
    abort_rounds_locked(QUORUM_ERR_INVALID_ARG);
    for (auto &r : recvs_) {
      if (r && r->posted && r->req.pending()) transport_->cancel(&r->req);
    }
    for (auto &s : sends_) {
      if (s.req.pending()) transport_->cancel(&s.req);
    }
  }
  // Wait until no task or transport request touches our buffers any more
  // (cancellations may complete in a later progress pass).
  Deadline deadline = Deadline::after_ms(knob_timeout_ms.get());
  Status s = run_until(
      *engine_, fmt::format("partial #{} release", object_id_),
      [this, deadline](Status *st) {
        bool quiet = true;
        for (auto &snd : sends_) quiet &= !snd.req.pending();
        for (auto &r : recvs_) quiet &= !(r && r->posted && r->req.pending());
        for (auto &r : rounds_) quiet &= r->complete || r->sched->quiescent();
        if (quiet) return TaskResult::Done;
        if (deadline.expired()) {
          *st = fail(QUORUM_ERR_TIMEOUT, "partial", "partial #{}: transfers did not stop",
                     object_id_);
          return TaskResult::Failed;
        }
        return TaskResult::Pending;
      },
      [] { return std::string("releasing"); });
  if (poller_id_ >= 0) engine_->remove_poller(poller_id_);
  poller_id_ = -1;
  auto lock = lock_engine();
  rounds_.clear();
  sends_.clear();
  // Its tags are free for a later object (after destroy, no message of this
  // one is left anywhere).
  if (holds_object_id_) comm_.object_ids().release(object_id_);
  holds_object_id_ = false;
  return s;
}

// ---- buffers ----

void PartialAllreduce::clear_to_identity(uint8_t *buf) const {
  fill_identity(buf, count_, dtype_, op_);
}

uint8_t *PartialAllreduce::take_free_buffer() {
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
  if (allocated_ >= opts_.max_staleness + 2 + (lent_ ? 1 : 0)) return nullptr;
  return new_buffer();
}

Status PartialAllreduce::reserve_symmetric_buffers() {
  const size_t n = std::min<size_t>(opts_.max_staleness + 3, kSymmetricBuffers);
  const size_t stride = (bytes_ + 4095) / 4096 * 4096;
  void *base = nullptr;
  QUORUM_CHECK(comm_.alloc_symmetric(*shm_, n * stride, &base));
  if (!base) return kOk;  // no segment on some rank: plain buffers everywhere
  for (size_t i = n; i-- > 0;) symmetric_.push_back(static_cast<uint8_t *>(base) + i * stride);
  symmetric_begin_ = static_cast<const uint8_t *>(base);
  symmetric_end_ = symmetric_begin_ + n * stride;
  return kOk;
}

uint8_t *PartialAllreduce::new_buffer() {
  uint8_t *b = nullptr;
  if (!symmetric_.empty()) {
    b = symmetric_.back();
    symmetric_.pop_back();
  } else {
    buffers_.push_back(allocate_aligned(bytes_));
    b = buffers_.back().get();
    if (!b) {
      buffers_.pop_back();
      return nullptr;
    }
  }
  ++allocated_;
  return b;  // stale bytes: the accumulator is empty until a post copies into it
}

// Called by post() without the mutex while copying_ keeps joins away.
Status PartialAllreduce::weigh_late_post(const void **contribution) {
  if (!staging_) staging_ = allocate_aligned(bytes_);
  if (!staging_) return fail(QUORUM_ERR_NO_MEMORY, "partial", "staging of {} B", bytes_);
  // One pass, copy and scale together (in place when it was staged from
  // device memory already).
  if (dtype_ == QUORUM_FLOAT32) {
    const auto *in = static_cast<const float *>(*contribution);
    auto *out = reinterpret_cast<float *>(staging_.get());
    const float w = static_cast<float>(opts_.carry_weight);
    for (size_t i = 0; i < count_; ++i) out[i] = in[i] * w;
  } else {
    const auto *in = static_cast<const double *>(*contribution);
    auto *out = reinterpret_cast<double *>(staging_.get());
    for (size_t i = 0; i < count_; ++i) out[i] = in[i] * opts_.carry_weight;
  }
  *contribution = staging_.get();
  return kOk;
}

Status PartialAllreduce::accumulate(const void *contribution) {
  if (!accumulator_empty_) return reduce_into(accumulator_, contribution, count_, dtype_, op_);
  std::memcpy(accumulator_, contribution, bytes_);
  accumulator_empty_ = false;
  return kOk;
}

size_t PartialAllreduce::buffers_allocated() const {
  auto lock = lock_engine();
  return allocated_;
}

size_t PartialAllreduce::plain_buffers() const {
  auto lock = lock_engine();
  return buffers_.size();
}

// ---- state queries (mutex held) ----

bool PartialAllreduce::sync_round(uint64_t round) const {
  return partial::scheduled_sync_round(round, opts_.max_staleness);
}

PartialAllreduce::Round *PartialAllreduce::find_round(uint64_t round) {
  for (auto &r : rounds_) {
    if (r->id == round) return r.get();
  }
  return nullptr;
}

bool PartialAllreduce::round_complete(uint64_t round) const {
  if (round >= joined_) return false;
  for (const auto &r : rounds_) {
    if (r->id == round) return r->complete;
  }
  return true;  // consumed already
}

void PartialAllreduce::fail_object(Status s) {
  if (error_ != kOk) return;
  error_ = s;
  error_detail_ = last_error();
  comm_.note_failure(s);
  abort_rounds_locked(s);
}

void PartialAllreduce::abort_rounds_locked(Status s) {
  for (auto &r : rounds_) {
    if (!r->complete && !r->sched->done()) r->sched->abort(s);
  }
}

bool PartialAllreduce::in_flight_locked(std::string *why) const {
  if (posted_) {
    *why = fmt::format("a post for round {} was not waited for", waited_);
    return true;
  }
  if (joined_ > waited_) {
    *why = fmt::format("rounds [{}, {}) were joined but not waited for", waited_, joined_);
    return true;
  }
  return false;
}

// ---- API ----

Status PartialAllreduce::post(const void *contribution) {
  if (!contribution) return fail(QUORUM_ERR_INVALID_ARG, "partial", "partial_post: NULL buffer");
  if (buffer_kind(contribution) == BufferKind::Device) {
    // Device memory: stage through a host buffer (accumulators live on the host).
    if (!staging_) staging_ = allocate_aligned(bytes_);
    if (!staging_) return fail(QUORUM_ERR_NO_MEMORY, "partial", "staging of {} B", bytes_);
    QUORUM_CHECK(device_copy(staging_.get(), contribution, bytes_));
    contribution = staging_.get();
  }
  uint64_t k = 0;
  bool late = false;
  {
    auto lock = lock_engine();
    QUORUM_CHECK(begin_post_locked("partial_post"));
    posted_ = true;
    k = waited_;
    late = k != joined_;  // round k was joined without it
    if (late && !opts_.carry) {
      ++dropped_;
    } else {
      copying_ = true;
    }
  }
  if (late && !opts_.carry) {
    engine_->progress_once();
    return kOk;
  }
  // The copy into the accumulator (or the sum with what it carries) runs
  // without the engine mutex, so this rank's progress thread keeps driving the
  // rounds' data phases meanwhile (the other ranks wait for its slices); an
  // activation that arrives now is deferred until the copy is in: the post
  // still lands wholly in one round. So joined_ stays put meanwhile: a late
  // post stays late (a weighted carry scales it first).
  Status s = late && opts_.carry_weight != 1 ? weigh_late_post(&contribution) : kOk;
  if (s == kOk) s = accumulate(contribution);
  {
    auto lock = lock_engine();
    copying_ = false;
    if (s != kOk) {
      fail_object(s);  // deferred activations could not join: peers must not wait
    } else if (error_ != kOk) {
      restore_last_error(error_detail_);
      s = error_;
    }
    if (s != kOk) {
      deferred_.clear();
      return s;
    }
    // joined_ did not move during the copy (joins were deferred; only this
    // thread joins otherwise).
    if (k == joined_) {
      fresh_pending_ = true;
      pending_post_ns_ = now_ns();
    } else {
      // Late: round k was joined without this post; it rides in a later round.
      ++carried_;
      ++carried_pending_;
      carried_pending_rounds_ += k;
    }
    s = handle_deferred_activations();
    if (s == kOk && k == joined_) s = join_after_post(k);
    // Quorum mode: readies counted during the copy may complete the count.
    if (s == kOk) s = activate_if_quorum();
  }
  engine_->progress_once();
  engine_->wake();
  return s;
}

Status PartialAllreduce::join_after_post(uint64_t k) {
  if (sync_round(k)) return join(k, false, true, false);
  if (quorum_mode()) return arrive(k);  // the round's counter activates it
  // Solo, quorum with k = 1, and majority's initiator activate.
  if (opts_.mode != QUORUM_PARTIAL_MAJORITY || majority_initiator(opts_.seed, k, size_) == rank_) {
    return activate(k);
  }
  return kOk;
}

Status PartialAllreduce::activate(uint64_t k) {
  if (opts_.activation_delay_us > 0) {
    activation_due_round_ = k;
    activation_due_ns_ = now_ns() + opts_.activation_delay_us * 1000;
    engine_->wake_at(activation_due_ns_);  // the caller wakes the engine after the post
    return kOk;
  }
  QUORUM_CHECK(join(k, true, false, false));
  return send_activations(k, rank_);
}

Status PartialAllreduce::post_ref(const void *contribution) {
  if (!contribution) {
    return fail(QUORUM_ERR_INVALID_ARG, "partial", "partial_post_ref: NULL buffer");
  }
  if (buffer_kind(contribution) == BufferKind::Device) return post(contribution);
  Status s = kOk;
  {
    auto lock = lock_engine();
    QUORUM_CHECK(begin_post_locked("partial_post_ref"));
    // Lent only when it is all of this rank's input to its round; a late
    // post or one that adds to carried contributions is copied (post()). So
    // is one outside the symmetric regions when the rounds go zero-copy: the
    // round would copy it in slices anyway, slower than one copy here.
    const bool zero_copy_rounds = shm_ && symmetric_begin_ && bytes_ >= shm_->zero_copy_bytes();
    const bool lendable =
        !zero_copy_rounds || shm_->regions().locate(contribution, bytes_).region != 0;
    if (waited_ == joined_ && accumulator_empty_ && lendable) {
      posted_ = true;
      lent_post_ = static_cast<const uint8_t *>(contribution);
      fresh_pending_ = true;
      pending_post_ns_ = now_ns();
      s = join_after_post(waited_);
    } else {
      lock.unlock();
      return post(contribution);
    }
  }
  engine_->progress_once();
  engine_->wake();
  return s;
}

Status PartialAllreduce::wait_for_round(uint64_t round, const char *what) {
  const int64_t timeout = knob_timeout_ms.get();
  Deadline deadline = Deadline::after_ms(timeout);
  auto describe = [this, round] {
    if (round >= joined_) {
      if (sync_round(round)) return fmt::format("round {}: synchronous, not joined yet", round);
      if (opts_.mode == QUORUM_PARTIAL_MAJORITY) {
        return fmt::format("round {}: waiting for the activation by its initiator, rank {}", round,
                           majority_initiator(opts_.seed, round, size_));
      }
      if (quorum_mode()) {
        const int counter = partial::quorum_counter(round, size_);
        return fmt::format("round {}: waiting for {} of {} ranks to arrive (counted by rank {}{})",
                           round, opts_.k, size_, counter,
                           counter == rank_ && ready_round_ == round
                               ? fmt::format(": {} so far", ready_count_)
                               : std::string());
      }
      if (activation_due_ns_ != 0 && activation_due_round_ == round) {
        return fmt::format("round {}: this rank's delayed activation is due", round);
      }
      return fmt::format("round {}: waiting for an activation (no rank posted)", round);
    }
    Round *r = find_round(round);
    if (!r) return fmt::format("round {}: consumed", round);
    std::string peers;
    for (int q : r->sched->waiting_peers()) peers += (peers.empty() ? "" : ",") + std::to_string(q);
    return fmt::format("round {}: data phase waits for rank(s) [{}]: {}", round, peers,
                       r->sched->stall_report());
  };
  Status s = run_until(
      *engine_, fmt::format("partial #{} {} round {}", object_id_, what, round),
      [this, round, deadline, timeout, describe](Status *st) {
        if (error_ != kOk) {
          restore_last_error(error_detail_);
          *st = error_;
          return TaskResult::Failed;
        }
        if (round_complete(round)) return TaskResult::Done;
        if (deadline.expired()) {
          *st = fail(QUORUM_ERR_TIMEOUT, "partial",
                     "partial allreduce #{} on rank {} timed out after {} ms; {}", object_id_,
                     rank_, timeout, describe());
          fail_object(QUORUM_ERR_TIMEOUT);
          return TaskResult::Failed;
        }
        return TaskResult::Pending;
      },
      describe);
  if (s != kOk) {
    auto lock = lock_engine();
    // A failure the engine reported (a dead peer ends every request in
    // flight) fails the object too, so that later calls keep that error.
    fail_object(s);
    restore_last_error(error_detail_);
    return error_;
  }
  return kOk;
}

void PartialAllreduce::return_lent() {
  if (lent_) free_.push_back(std::exchange(lent_, nullptr));
}

Status PartialAllreduce::consume(void *result, const void **ref, PartialRoundInfo *info) {
  std::unique_ptr<Round> r;
  {
    auto lock = lock_engine();
    if (rounds_.empty() || rounds_.front()->id != waited_ || !rounds_.front()->complete) {
      return fail(QUORUM_ERR_INTERNAL, "partial", "partial #{} rank {}: round {} not ready",
                  object_id_, rank_, waited_);
    }
    r = std::move(rounds_.front());
    rounds_.pop_front();
    ++waited_;
    posted_ = false;
    ++histogram_[r->info.fresh];
    last_info_ = r->info;
  }
  Status s = kOk;
  if (ref) {
    *ref = r->buf;
  } else if (buffer_kind(result) == BufferKind::Device) {
    s = device_copy(result, r->buf, bytes_);
  } else {
    std::memcpy(result, r->buf, bytes_);
  }
  {
    auto lock = lock_engine();
    if (ref) {
      lent_ = r->buf;
    } else {
      free_.push_back(r->buf);
    }
  }
  if (info) *info = r->info;
  return s;
}

Status PartialAllreduce::wait(void *result, PartialRoundInfo *info) {
  if (!result) return fail(QUORUM_ERR_INVALID_ARG, "partial", "partial_wait: NULL result buffer");
  return wait_common(result, nullptr, info);
}

Status PartialAllreduce::wait_ref(const void **result, PartialRoundInfo *info) {
  if (!result) return fail(QUORUM_ERR_INVALID_ARG, "partial", "partial_wait_ref: NULL output");
  *result = nullptr;
  return wait_common(nullptr, result, info);
}

Status PartialAllreduce::wait_common(void *result, const void **ref, PartialRoundInfo *info) {
  uint64_t k;
  {
    auto lock = lock_engine();
    QUORUM_CHECK(begin_call_locked("partial_wait"));
    k = waited_;
    // Arriving at a synchronous round without a post: join with what we carry.
    // Majority: the initiator waiting without a post activates its round (only
    // it can; otherwise the round could never run).
    if (k == joined_ && sync_round(k)) {
      QUORUM_CHECK(join(k, false, true, false));
    } else if (k == joined_ && !posted_ && opts_.mode == QUORUM_PARTIAL_MAJORITY &&
               majority_initiator(opts_.seed, k, size_) == rank_) {
      QUORUM_CHECK(join(k, true, false, false));
      QUORUM_CHECK(send_activations(k, rank_));
    } else if (k == joined_ && !posted_ && quorum_mode()) {
      // Quorum: a wait without a post arrives (with nothing fresh to give).
      QUORUM_CHECK(arrive(k));
    }
  }
  QUORUM_CHECK(wait_for_round(k, "wait"));
  return consume(result, ref, info);
}

Status PartialAllreduce::flush(void *result, PartialRoundInfo *info) {
  if (!result) return fail(QUORUM_ERR_INVALID_ARG, "partial", "partial_flush: NULL result buffer");
  uint64_t k;
  {
    auto lock = lock_engine();
    QUORUM_CHECK(begin_call_locked("partial_flush"));
    if (posted_) {
      return fail(QUORUM_ERR_INVALID_ARG, "partial",
                  "partial_flush: rank {} has a post for round {} that was not waited for", rank_,
                  waited_);
    }
    k = waited_;
    if (joined_ > k) {
      return fail(QUORUM_ERR_MISMATCH, "partial",
                  "partial_flush on rank {}: round {} was already activated by another rank's "
                  "post; every rank must call flush at the same round",
                  rank_, k);
    }
    QUORUM_CHECK(join(k, false, true, true));
  }
  QUORUM_CHECK(wait_for_round(k, "flush"));
  return consume(result, nullptr, info);
}

Status PartialAllreduce::destroy() {
  std::string why;
  bool in_flight = false, failed = false;
  std::vector<int64_t> counts(size_ + 1, 0);
  {
    auto lock = lock_engine();
    if (orphaned_) return released_error("partial_destroy");
    if (destroyed_) return fail(QUORUM_ERR_INVALID_ARG, "partial", "partial_destroy called twice");
    in_flight = in_flight_locked(&why);
    failed = error_ != kOk;
    for (int q = 0; q < size_; ++q) counts[q] = sent_to_[q];
    counts[size_] = in_flight ? 1 : 0;
  }
  Status result = kOk;
  bool drain = false;
  int64_t expected = 0;
  if (!failed && size_ > 1) {
    // Collective: how many activations were sent to each rank, and whether any
    // rank still has rounds in flight (then nobody drains, all abort).
    std::vector<int64_t> total(size_ + 1, 0);
    result = comm_.allreduce(counts.data(), total.data(), counts.size(), QUORUM_INT64, QUORUM_SUM);
    if (result == kOk) {
      drain = total[size_] == 0;
      expected = total[rank_];
    }
  }
  if (drain) {
    Deadline deadline = Deadline::after_ms(knob_timeout_ms.get());
    result = run_until(
        *engine_, fmt::format("partial #{} destroy", object_id_),
        [this, expected, deadline](Status *st) {
          int64_t got = 0;
          for (int64_t n : recv_from_) got += n;
          if (got >= expected && sends_.empty()) return TaskResult::Done;
          if (error_ != kOk) {
            *st = error_;
            return TaskResult::Failed;
          }
          if (deadline.expired()) {
            *st = fail(QUORUM_ERR_TIMEOUT, "partial",
                       "partial #{} rank {}: destroy drained {} of {} activation messages",
                       object_id_, rank_, got, expected);
            return TaskResult::Failed;
          }
          return TaskResult::Pending;
        },
        [] { return std::string("draining activations"); });
  }
  QLOG_INFO("partial",
            "partial #{} rank {}: destroyed after {} rounds ({} through zero-copy, {} through "
            "cross-memory attach), {} buffers of {} B ({} symmetric unused)",
            object_id_, rank_, waited_, zero_copy_rounds(), cross_memory_rounds(), allocated_,
            bytes_, symmetric_.size());
  Status q = release();
  if (failed) {
    restore_last_error(error_detail_);
    return error_;
  }
  if (in_flight) {
    return fail(QUORUM_ERR_INVALID_ARG, "partial",
                "partial_destroy on rank {} with rounds in flight: {}; they were aborted (wait or "
                "flush first)",
                rank_, why);
  }
  if (result != kOk) return result;
  return q;
}

uint64_t PartialAllreduce::next_round() const {
  auto lock = lock_engine();
  return waited_;
}

uint64_t PartialAllreduce::rounds_behind() const {
  auto lock = lock_engine();
  return joined_ > waited_ && !posted_ ? joined_ - waited_ : 0;
}

uint64_t PartialAllreduce::dropped() const {
  auto lock = lock_engine();
  return dropped_;
}

uint64_t PartialAllreduce::carried() const {
  auto lock = lock_engine();
  return carried_;
}

uint64_t PartialAllreduce::deferred_activations() const {
  auto lock = lock_engine();
  return deferred_count_;
}

std::vector<uint64_t> PartialAllreduce::fresh_histogram() const {
  auto lock = lock_engine();
  return histogram_;
}

}  // namespace quorum
