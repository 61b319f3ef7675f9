// partial_rounds.cpp: how a partial allreduce's rounds begin and advance:
// activation messages (sent on a k-nomial tree, received from every peer,
// deferred while a post copies), joining a round (its input, header and data
// schedule), driving the joined rounds and the delayed activations; all run
// by the object's poller under the engine mutex (see partial_allreduce.hpp).
#include <algorithm>
#include <utility>

#include "collectives/algorithms/algorithms.hpp"
#include "collectives/partial/activation.hpp"
#include "collectives/partial/partial_allreduce.hpp"
#include "collectives/partial/partial_round.hpp"
#include "collectives/patterns/knomial_tree.hpp"
#include "runtime/clock.hpp"
#include "runtime/knobs.hpp"

namespace quorum {

using namespace partial;

Knob<int64_t> knob_partial_activation_radix(
    "QUORUM_PARTIAL_ACTIVATION_RADIX", 0,
    "Partial collectives: radix of the k-nomial tree that carries a round's activation (2: "
    "binomial; P or more: the activating rank tells every rank itself); 0: P when every rank "
    "is a process of this host (a hop costs a thread wake-up there), else 2");

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
      if (msg.root & kReadyFlag) {  // quorum mode: a rank arrived (quorum_readiness.cpp)
        if (handle_ready(msg.round, static_cast<int>(msg.root & ~kReadyFlag)) != kOk) break;
      } else if (handle_activation(msg.round, static_cast<int>(msg.root)) != kOk) {
        break;
      }
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
    bd.set_layout(&comm_.layout());
    s = select_algorithm(data, size_, &algo, shm_usable(shm_.get(), data), &comm_.layout());
    // An empty accumulator: the shm allreduce puts the identity in its slots
    // itself (or skips this rank when zero-copy); the others need it written.
    if (s == kOk && empty) {
      if (algo->medium == AlgorithmMedium::SharedMemory) {
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

}  // namespace quorum
