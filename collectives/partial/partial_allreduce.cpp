// partial_allreduce.cpp: solo/majority allreduce (see partial_allreduce.hpp for
// the rules). A round is an activation step in front of an ordinary allreduce
// schedule (data) plus a small int64 sum allreduce (header), both driven by this
// object's poller under the engine mutex.
#include "collectives/partial/partial_allreduce.hpp"

#include <algorithm>
#include <cstring>
#include <functional>
#include <limits>
#include <utility>

#include "collectives/algorithms/algorithms.hpp"
#include "collectives/partial/activation.hpp"
#include "collectives/patterns/knomial_tree.hpp"
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

// Header layout (int64, reduced with SUM): round id (low 32 bits), count of
// ranks that joined as synchronous, count that joined as flush, the late posts
// carried into the round and their summed lateness (over all ranks), then the
// fresh bitmap and the activator bitmap (32 ranks per word, so sums never
// overflow).
constexpr size_t kHdrRound = 0, kHdrSync = 1, kHdrFlush = 2, kHdrCarried = 3, kHdrStaleness = 4,
                 kHdrBitmaps = 5;

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

Knob<int64_t> knob_partial_activation_radix(
    "QUORUM_PARTIAL_ACTIVATION_RADIX", 0,
    "Partial collectives: radix of the k-nomial tree that carries a round's activation (2: "
    "binomial; P or more: the activating rank tells every rank itself); 0: P when every rank "
    "is a process of this host (a hop costs a thread wake-up there), else 2");

struct PartialAllreduce::Round {
  uint64_t id = 0;
  uint8_t *buf = nullptr;
  std::vector<int64_t> header;
  std::unique_ptr<Schedule> sched;
  std::vector<ScratchPool::Lease> leases;
  bool synchronous = false;
  bool flush = false;
  bool own_fresh = false;
  bool complete = false;
  PartialRoundInfo info;
};

Status PartialAllreduce::create(Communicator &comm, size_t count, quorum_dtype_t dtype,
                                quorum_op_t op, const PartialOptions &options,
                                std::unique_ptr<PartialAllreduce> *out) {
  if (!out) return fail(QUORUM_ERR_INVALID_ARG, "partial", "partial_create: NULL output");
  if (count == 0) {
    return fail(QUORUM_ERR_INVALID_ARG, "partial", "partial_create: count 0 (nothing to reduce)");
  }
  uint8_t dummy = 0;
  QUORUM_CHECK(validate_reduction("partial_create", &dummy, &dummy, count, dtype, op));
  if (options.mode != QUORUM_PARTIAL_SOLO && options.mode != QUORUM_PARTIAL_MAJORITY) {
    return fail(QUORUM_ERR_INVALID_ARG, "partial", "partial_create: unknown mode {}",
                static_cast<int>(options.mode));
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
  p->header_words_ = kHdrBitmaps + 2 * p->bitmap_words_;
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
  QLOG_DEBUG("partial", "created #{}: {} x {} {}, {}, max_staleness {}, {}, activation delay {} us",
             p->object_id_, count, dtype_name(dtype), op_name(op),
             options.mode == QUORUM_PARTIAL_SOLO ? "solo" : "majority", options.max_staleness,
             options.carry ? "carry" : "drop", options.activation_delay_us);
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

// ---- activation ----

Status PartialAllreduce::post_activation_recv(int peer) {
  ActivationRecv &r = *recvs_[peer];
  r.req.reset();
  r.posted = true;
  Status s = transport_->recv(peer, activation_tag_, &r.msg, sizeof(r.msg), &r.req);
  if (s != kOk) {
    r.posted = false;
    fail_object(s);
  }
  return s;
}

Status PartialAllreduce::agree_on_options(bool *symmetric) {
  // What each rank's knobs say; collective steps must not depend on them alone.
  struct Wish {
    int64_t radix;
    int64_t symmetric;  // shared memory and the shm allreduce for the rounds
    uint64_t object_id;
  } mine{knob_partial_activation_radix.get(), shm_ && allreduce_uses_shm() ? 1 : 0, object_id_};
  if (mine.radix <= 0) mine.radix = shm_ ? size_ : 2;
  mine.radix = std::clamp<int64_t>(mine.radix, 2, std::max(2, size_));
  std::vector<Wish> all(static_cast<size_t>(size_));
  QUORUM_CHECK(comm_.allgather(&mine, all.data(), sizeof(Wish)));
  for (int q = 0; q < size_; ++q) {
    if (all[q].object_id != object_id_) {
      return fail(QUORUM_ERR_MISMATCH, "partial",
                  "partial_create: rank {} made object #{}, rank {} #{}: partial objects must be "
                  "created and destroyed in the same order on every rank (was one freed on some "
                  "ranks only?)",
                  rank_, object_id_, q, all[q].object_id);
    }
  }
  activation_radix_ = static_cast<int>(all[0].radix);  // one tree: rank 0's
  *symmetric = true;  // symmetric round buffers only if every rank can use them
  for (const Wish &w : all) *symmetric = *symmetric && w.symmetric == 1;
  return kOk;
}

Status PartialAllreduce::send_activations(uint64_t round, int root) {
  for (int child : patterns::knomial_tree::children(rank_, size_, root, activation_radix_)) {
    sends_.emplace_back();
    ActivationSend &s = sends_.back();
    s.msg.round = round;
    s.msg.root = static_cast<uint32_t>(root);
    s.msg.object = static_cast<uint32_t>(object_id_);
    ++sent_to_[child];
    Status st = transport_->send(child, activation_tag_, &s.msg, sizeof(s.msg), &s.req);
    if (st != kOk) {
      fail_object(st);
      return st;
    }
  }
  return kOk;
}

Status PartialAllreduce::handle_activation(uint64_t round, int root) {
  if (root < 0 || root >= size_) {
    Status s = fail(QUORUM_ERR_MISMATCH, "partial",
                    "partial #{} rank {}: activation of round {} names root {} outside [0, {})",
                    object_id_, rank_, round, root, size_);
    fail_object(s);
    return s;
  }
  if (copying_ && round >= joined_) {
    deferred_.push_back({round, root});  // post() handles it once its copy is in
    ++deferred_count_;
    return kOk;
  }
  if (round < joined_) {
    // Joined already. While the round runs, pass the message on so this tree
    // still reaches every rank; once it completed, every rank has joined it.
    if (!round_complete(round)) return send_activations(round, root);
    return kOk;
  }
  if (round > joined_ || sync_round(round)) {
    Status s = fail(QUORUM_ERR_MISMATCH, "partial",
                    "partial #{} rank {}: activation of round {} by rank {} while this rank is at "
                    "round {}{}: ranks disagree on the rounds (flush at different rounds, or "
                    "different max_staleness?)",
                    object_id_, rank_, round, root, joined_,
                    sync_round(round) ? " (a synchronous round here)" : "");
    fail_object(s);
    return s;
  }
  QUORUM_CHECK(join(round, false, false, false));
  return send_activations(round, root);
}

Status PartialAllreduce::handle_deferred_activations() {
  std::vector<std::pair<uint64_t, int>> deferred;
  deferred.swap(deferred_);
  for (const auto &[round, root] : deferred) QUORUM_CHECK(handle_activation(round, root));
  return kOk;
}

bool PartialAllreduce::poll_activations() {
  bool any = false;
  for (int q = 0; q < size_; ++q) {
    if (q == rank_) continue;
    ActivationRecv &r = *recvs_[q];
    while (r.posted && !r.req.pending() && error_ == kOk) {
      any = true;
      r.posted = false;
      if (r.req.state.load(std::memory_order_acquire) != TransportRequest::Done) {
        Status s = r.req.status == QUORUM_ERR_TIMEOUT ? QUORUM_ERR_PEER_FAILED : r.req.status;
        fail(s, "partial", "partial #{} rank {}: activation receive from rank {} failed ({}): {}",
             object_id_, rank_, q, status_name(r.req.status),
             transport_->peer_failed(q) ? "the rank is gone" : "transport error");
        fail_object(s);
        break;
      }
      ++recv_from_[q];
      ActivationMsg msg = r.msg;
      bool bad = r.req.bytes != sizeof(msg) || msg.object != static_cast<uint32_t>(object_id_);
      if (post_activation_recv(q) != kOk) break;
      if (bad) {
        fail(QUORUM_ERR_MISMATCH, "partial",
             "partial #{} rank {}: malformed activation from rank {} ({} B, object {})", object_id_,
             rank_, q, r.req.bytes, msg.object);
        fail_object(QUORUM_ERR_MISMATCH);
        break;
      }
      if (handle_activation(msg.round, static_cast<int>(msg.root)) != kOk) break;
    }
  }
  return any;
}

// ---- rounds ----

Status PartialAllreduce::join(uint64_t round, bool self_activated, bool synchronous, bool flush) {
  uint8_t *fresh_buf = take_free_buffer();
  if (!fresh_buf) {
    Status s = fail(QUORUM_ERR_NO_MEMORY, "partial",
                    "partial #{} rank {}: no buffer to join round {} ({} allocated, {} B each)",
                    object_id_, rank_, round, allocated_, bytes_);
    fail_object(s);
    return s;
  }
  auto r = std::make_unique<Round>();
  r->id = round;
  r->buf = accumulator_;
  // A lent post (post_ref) is read from the caller's buffer; the accumulator,
  // empty then, receives the round's result.
  const uint8_t *send = lent_post_ ? lent_post_ : r->buf;
  lent_post_ = nullptr;
  const bool empty = accumulator_empty_ && send == r->buf;  // stale bytes: identity wanted
  accumulator_ = fresh_buf;
  accumulator_empty_ = true;
  r->synchronous = synchronous;
  r->flush = flush;
  r->own_fresh = fresh_pending_;
  r->info.round = round;
  r->info.own_fresh = fresh_pending_;
  r->info.post_ns = fresh_pending_ ? pending_post_ns_ : 0;
  r->info.join_ns = now_ns();
  r->info.own_carried = carried_pending_;
  r->info.own_staleness = static_cast<uint64_t>(carried_pending_) * round - carried_pending_rounds_;
  carried_pending_ = 0;
  carried_pending_rounds_ = 0;
  fresh_pending_ = false;

  r->header.assign(header_words_, 0);
  r->header[kHdrRound] = static_cast<int64_t>(round & 0xffffffffu);
  r->header[kHdrSync] = synchronous ? 1 : 0;
  r->header[kHdrFlush] = flush ? 1 : 0;
  r->header[kHdrCarried] = r->info.own_carried;
  r->header[kHdrStaleness] = static_cast<int64_t>(r->info.own_staleness);
  const size_t word = static_cast<size_t>(rank_) / 32;
  const int64_t bit = int64_t{1} << (rank_ % 32);
  if (r->own_fresh) r->header[kHdrBitmaps + word] |= bit;
  if (self_activated) r->header[kHdrBitmaps + bitmap_words_ + word] |= bit;

  r->sched = std::make_unique<Schedule>(fmt::format("partial #{} round {}", object_id_, round));
  CollArgs data{CollKind::Allreduce, send, r->buf, count_, dtype_, op_, 0};
  const AlgorithmInfo *algo = nullptr;
  Status s = kOk;
  TaskId last = -1;
  Builder bd(*r->sched, transport_, rank_, size_, CollKind::PartialData,
             round_seq(object_id_, round), comm_.scratch());
  if (size_ == 1) {
    if (empty) clear_to_identity(r->buf);
    s = build_allreduce_recursive_doubling(bd, data, &last);
  } else {
    // The same rule as a plain allreduce, so that rounds where every rank is
    // fresh give the plain allreduce's bits.
    if (shm_) bd.set_shm(shm_.get());
    s = select_algorithm(data, size_, &algo, shm_ != nullptr);
    // An empty accumulator: the shm allreduce puts the identity in its slots
    // itself (or skips this rank when zero-copy); the others need it written.
    if (s == kOk && empty) {
      if (std::strcmp(algo->name, "shm") == 0) {
        data.send_identity = true;
      } else {
        clear_to_identity(r->buf);
      }
    }
    if (s == kOk) s = algo->build(bd, data, &last);
  }
  CollArgs hdr{CollKind::Allreduce,
               r->header.data(),
               r->header.data(),
               header_words_,
               QUORUM_INT64,
               QUORUM_SUM,
               0};
  Builder bh(*r->sched, transport_, rank_, size_, CollKind::PartialControl,
             round_seq(object_id_, round), comm_.scratch());
  if (s == kOk) s = build_allreduce_recursive_doubling(bh, hdr, &last);
  if (s != kOk) {
    fail_object(s);
    return s;
  }
  r->leases = bd.take_leases();
  for (auto &l : bh.take_leases()) r->leases.push_back(std::move(l));
  joined_ = round + 1;
  r->sched->progress();
  rounds_.push_back(std::move(r));
  return kOk;
}

bool PartialAllreduce::progress_rounds() {
  bool any = false;
  for (auto &rp : rounds_) {
    Round &r = *rp;
    if (r.complete) continue;
    any |= r.sched->progress();
    if (!r.sched->done()) continue;
    if (r.sched->status() != kOk) {
      fail_object(r.sched->status());
      return true;
    }
    // Check the header before trusting the round.
    const auto &h = r.header;
    const int64_t p = size_;
    if (h[kHdrRound] != p * static_cast<int64_t>(r.id & 0xffffffffu) ||
        (h[kHdrSync] != 0 && h[kHdrSync] != p) || (h[kHdrFlush] != 0 && h[kHdrFlush] != p)) {
      fail(QUORUM_ERR_MISMATCH, "partial",
           "partial #{} rank {}: round {} header disagrees across ranks (round sum {}, {} of {} "
           "ranks synchronous, {} flushing): the ranks called post/wait/flush in different "
           "orders",
           object_id_, rank_, r.id, h[kHdrRound], h[kHdrSync], p, h[kHdrFlush]);
      fail_object(QUORUM_ERR_MISMATCH);
      return true;
    }
    r.complete = true;
    r.leases.clear();
    any = true;
    PartialRoundInfo &info = r.info;
    info.synchronous = h[kHdrSync] == p;
    info.flush = h[kHdrFlush] == p;
    info.carried = h[kHdrCarried];
    info.staleness = static_cast<uint64_t>(h[kHdrStaleness]);
    info.complete_ns = now_ns();
    info.fresh = 0;
    info.initiator = -1;
    info.fresh_ranks.clear();
    for (int q = 0; q < size_; ++q) {
      const size_t w = static_cast<size_t>(q) / 32;
      const int64_t bit = int64_t{1} << (q % 32);
      if (h[kHdrBitmaps + w] & bit) {
        ++info.fresh;
        info.fresh_ranks.push_back(q);
      }
      if (!info.synchronous && info.initiator < 0 && (h[kHdrBitmaps + bitmap_words_ + w] & bit)) {
        info.initiator = q;
      }
    }
  }
  return any;
}

bool PartialAllreduce::poll() {
  bool any = false;
  for (auto it = sends_.begin(); it != sends_.end();) {
    if (it->req.pending()) {
      ++it;
      continue;
    }
    if (it->req.state.load() == TransportRequest::Failed && !destroyed_ && error_ == kOk) {
      fail(QUORUM_ERR_PEER_FAILED, "partial",
           "partial #{} rank {}: activation send to rank {} failed ({})", object_id_, rank_,
           it->req.peer, status_name(it->req.status));
      fail_object(QUORUM_ERR_PEER_FAILED);
    }
    it = sends_.erase(it);
    any = true;
  }
  // A failed or destroyed object only lets its aborted transfers finish.
  if (error_ != kOk || destroyed_) return any;
  any |= poll_activations();
  if (activation_due_ns_ != 0) any |= activate_when_due();
  any |= progress_rounds();
  return any;
}

bool PartialAllreduce::activate_when_due() {
  const uint64_t k = activation_due_round_;
  if (joined_ > k) {  // another rank's activation came first
    activation_due_ns_ = 0;
    return false;
  }
  if (now_ns() < activation_due_ns_) {
    engine_->wake_at(activation_due_ns_);  // this pass consumed the earlier wake-up
    return false;
  }
  activation_due_ns_ = 0;
  Status s = join(k, true, false, false);
  if (s == kOk) s = send_activations(k, rank_);
  if (s != kOk && error_ == kOk) fail_object(s);
  return true;
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
  bool dropped = false;
  {
    auto lock = lock_engine();
    QUORUM_CHECK(begin_post_locked("partial_post"));
    posted_ = true;
    k = waited_;
    dropped = k != joined_ && !opts_.carry;  // late: round k was joined without it
    if (dropped) {
      ++dropped_;
    } else {
      copying_ = true;
    }
  }
  if (dropped) {
    engine_->progress_once();
    return kOk;
  }
  // The copy into the accumulator (or the sum with what it carries) runs
  // without the engine mutex, so this rank's progress thread keeps driving the
  // rounds' data phases meanwhile (the other ranks wait for its slices); an
  // activation that arrives now is deferred until the copy is in: the post
  // still lands wholly in one round.
  Status s = accumulate(contribution);
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
  }
  engine_->progress_once();
  engine_->wake();
  return s;
}

Status PartialAllreduce::join_after_post(uint64_t k) {
  if (sync_round(k)) return join(k, false, true, false);
  if (opts_.mode == QUORUM_PARTIAL_SOLO || majority_initiator(opts_.seed, k, size_) == rank_) {
    if (opts_.activation_delay_us > 0) {
      activation_due_round_ = k;
      activation_due_ns_ = now_ns() + opts_.activation_delay_us * 1000;
      engine_->wake_at(activation_due_ns_);  // the caller wakes the engine after the post
      return kOk;
    }
    QUORUM_CHECK(join(k, true, false, false));
    return send_activations(k, rank_);
  }
  return kOk;
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
    if (!error_detail_.empty()) restore_last_error(error_detail_);
    return error_ != kOk ? error_ : s;
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
