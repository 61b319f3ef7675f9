// activation_tree.cpp: how rounds of a partial allreduce are activated (see
// activation_tree.hpp): the mode's rule for who activates, the activation
// messages sent down a k-nomial tree and received from every peer, the
// delayed activation and the activations deferred while a post copies.
#include "collectives/partial/activation_tree.hpp"

#include <algorithm>

#include "collectives/partial/round_driver.hpp"
#include "collectives/patterns/knomial_tree.hpp"
#include "runtime/clock.hpp"
#include "runtime/knobs.hpp"

namespace quorum::partial {

Knob<int64_t> knob_partial_activation_radix(
    "QUORUM_PARTIAL_ACTIVATION_RADIX", 0,
    "Partial collectives: radix of the k-nomial tree that carries a round's activation (2: "
    "binomial; P or more: the activating rank tells every rank itself); 0: P when every rank "
    "is a process of this host (a hop costs a thread wake-up there), else 2");

int64_t ActivationTree::wished_radix(const PartialContext &ctx) {
  int64_t radix = knob_partial_activation_radix.get();
  if (radix <= 0) radix = ctx.shm ? ctx.size : 2;
  return std::clamp<int64_t>(radix, 2, std::max(2, ctx.size));
}

Status ActivationTree::start(int radix) {
  radix_ = radix;
  sent_to_.assign(ctx_.size, 0);
  recv_from_.assign(ctx_.size, 0);
  tag_ = make_tag(CollKind::PartialControl, activation_seq(ctx_.object_id), kActivationStep);
  auto lock = ctx_.lock_engine();
  recvs_.resize(ctx_.size);
  for (int q = 0; q < ctx_.size; ++q) {
    if (q == ctx_.rank) continue;
    recvs_[q] = std::make_unique<ActivationRecv>();
    QUORUM_CHECK(post_receive(q));
  }
  return kOk;
}

// ---- who activates ----

Status ActivationTree::on_post(uint64_t k) {
  if (ctx_.sync_round(k)) return driver_.join(k, JoinKind{false, true, false});
  if (ctx_.quorum_mode()) return arrive(k);  // the round's counter activates it
  // Solo, quorum with k = 1, and majority's initiator activate.
  if (ctx_.opts.mode != QUORUM_PARTIAL_MAJORITY ||
      majority_initiator(ctx_.opts.seed, k, ctx_.size) == ctx_.rank) {
    return activate(k);
  }
  return kOk;
}

Status ActivationTree::on_wait_without_post(uint64_t k) {
  if (ctx_.opts.mode == QUORUM_PARTIAL_MAJORITY &&
      majority_initiator(ctx_.opts.seed, k, ctx_.size) == ctx_.rank) {
    QUORUM_CHECK(driver_.join(k, JoinKind{true, false, false}));
    return send_activations(k, ctx_.rank);
  }
  // Quorum: a wait without a post arrives (with nothing fresh to give).
  if (ctx_.quorum_mode()) return arrive(k);
  return kOk;
}

Status ActivationTree::activate(uint64_t k) {
  if (ctx_.opts.activation_delay_us > 0) {
    due_round_ = k;
    due_ns_ = now_ns() + ctx_.opts.activation_delay_us * 1000;
    ctx_.engine->wake_at(due_ns_);  // the caller wakes the engine after the post
    return kOk;
  }
  return activate_now(k);
}

Status ActivationTree::activate_now(uint64_t k) {
  QUORUM_CHECK(driver_.join(k, JoinKind{true, false, false}));
  return send_activations(k, ctx_.rank);
}

bool ActivationTree::poll_delayed_activation() {
  if (due_ns_ == 0) return false;
  const uint64_t k = due_round_;
  if (driver_.joined() > k) {  // another rank's activation came first
    due_ns_ = 0;
    return false;
  }
  if (now_ns() < due_ns_) {
    ctx_.engine->wake_at(due_ns_);  // this pass consumed the earlier wake-up
    return false;
  }
  due_ns_ = 0;
  Status s = activate_now(k);
  if (s != kOk && !driver_.failed()) driver_.fail_object(s);
  return true;
}

std::string ActivationTree::describe_wait(uint64_t round) const {
  if (ctx_.opts.mode == QUORUM_PARTIAL_MAJORITY) {
    return fmt::format("round {}: waiting for the activation by its initiator, rank {}", round,
                       majority_initiator(ctx_.opts.seed, round, ctx_.size));
  }
  if (ctx_.quorum_mode()) {
    const int counter = quorum_counter(round, ctx_.size);
    return fmt::format("round {}: waiting for {} of {} ranks to arrive (counted by rank {}{})",
                       round, ctx_.opts.k, ctx_.size, counter,
                       counter == ctx_.rank && ready_round_ == round
                           ? fmt::format(": {} so far", ready_count_)
                           : std::string());
  }
  if (due_ns_ != 0 && due_round_ == round) {
    return fmt::format("round {}: this rank's delayed activation is due", round);
  }
  return fmt::format("round {}: waiting for an activation (no rank posted)", round);
}

// ---- messages ----

Status ActivationTree::send(int peer, uint64_t round, uint32_t root) {
  sends_.emplace_back();
  ActivationSend &s = sends_.back();
  s.msg.round = round;
  s.msg.root = root;
  s.msg.object = static_cast<uint32_t>(ctx_.object_id);
  ++sent_to_[peer];
  Status st = ctx_.transport->send(peer, tag_, &s.msg, sizeof(s.msg), &s.req);
  if (st != kOk) driver_.fail_object(st);
  return st;
}

Status ActivationTree::send_activations(uint64_t round, int root) {
  for (int child : patterns::knomial_tree::children(ctx_.rank, ctx_.size, root, radix_)) {
    QUORUM_CHECK(send(child, round, static_cast<uint32_t>(root)));
  }
  return kOk;
}

Status ActivationTree::post_receive(int peer) {
  ActivationRecv &r = *recvs_[peer];
  r.req.reset();
  r.posted = true;
  Status s = ctx_.transport->recv(peer, tag_, &r.msg, sizeof(r.msg), &r.req);
  if (s != kOk) {
    r.posted = false;
    driver_.fail_object(s);
  }
  return s;
}

Status ActivationTree::handle_activation(uint64_t round, int root) {
  if (root < 0 || root >= ctx_.size) {
    Status s = fail(QUORUM_ERR_MISMATCH, "partial",
                    "partial #{} rank {}: activation of round {} names root {} outside [0, {})",
                    ctx_.object_id, ctx_.rank, round, root, ctx_.size);
    driver_.fail_object(s);
    return s;
  }
  const uint64_t joined = driver_.joined();
  if (accumulator_.copying() && round >= joined) {
    deferred_.push_back({round, root});  // handled once the post's copy is in
    ++deferred_count_;
    return kOk;
  }
  if (round < joined) {
    // Joined already. While the round runs, pass the message on so this tree
    // still reaches every rank; once it completed, every rank has joined it.
    if (!driver_.round_complete(round)) return send_activations(round, root);
    return kOk;
  }
  if (round > joined || ctx_.sync_round(round)) {
    Status s = fail(QUORUM_ERR_MISMATCH, "partial",
                    "partial #{} rank {}: activation of round {} by rank {} while this rank is at "
                    "round {}{}: ranks disagree on the rounds (flush at different rounds, or "
                    "different max_staleness?)",
                    ctx_.object_id, ctx_.rank, round, root, joined,
                    ctx_.sync_round(round) ? " (a synchronous round here)" : "");
    driver_.fail_object(s);
    return s;
  }
  QUORUM_CHECK(driver_.join(round, JoinKind{}));
  return send_activations(round, root);
}

Status ActivationTree::handle_deferred_activations() {
  std::vector<std::pair<uint64_t, int>> deferred;
  deferred.swap(deferred_);
  for (const auto &[round, root] : deferred) QUORUM_CHECK(handle_activation(round, root));
  return kOk;
}

bool ActivationTree::poll_sends() {
  bool any = false;
  for (auto it = sends_.begin(); it != sends_.end();) {
    if (it->req.pending()) {
      ++it;
      continue;
    }
    if (it->req.state.load() == TransportRequest::Failed && driver_.active()) {
      fail(QUORUM_ERR_PEER_FAILED, "partial",
           "partial #{} rank {}: activation send to rank {} failed ({})", ctx_.object_id, ctx_.rank,
           it->req.peer, status_name(it->req.status));
      driver_.fail_object(QUORUM_ERR_PEER_FAILED);
    }
    it = sends_.erase(it);
    any = true;
  }
  return any;
}

bool ActivationTree::poll_receives() {
  bool any = false;
  for (int q = 0; q < ctx_.size; ++q) {
    if (q == ctx_.rank) continue;
    ActivationRecv &r = *recvs_[q];
    while (r.posted && !r.req.pending() && !driver_.failed()) {
      any = true;
      r.posted = false;
      if (r.req.state.load(std::memory_order_acquire) != TransportRequest::Done) {
        Status s = r.req.status == QUORUM_ERR_TIMEOUT ? QUORUM_ERR_PEER_FAILED : r.req.status;
        fail(s, "partial", "partial #{} rank {}: activation receive from rank {} failed ({}): {}",
             ctx_.object_id, ctx_.rank, q, status_name(r.req.status),
             ctx_.transport->peer_failed(q) ? "the rank is gone" : "transport error");
        driver_.fail_object(s);
        break;
      }
      ++recv_from_[q];
      ActivationMsg msg = r.msg;
      bool bad = r.req.bytes != sizeof(msg) || msg.object != static_cast<uint32_t>(ctx_.object_id);
      if (post_receive(q) != kOk) break;
      if (bad) {
        fail(QUORUM_ERR_MISMATCH, "partial",
             "partial #{} rank {}: malformed activation from rank {} ({} B, object {})",
             ctx_.object_id, ctx_.rank, q, r.req.bytes, msg.object);
        driver_.fail_object(QUORUM_ERR_MISMATCH);
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

// ---- release and destroy ----

void ActivationTree::cancel_transfers() {
  for (auto &r : recvs_) {
    if (r && r->posted && r->req.pending()) ctx_.transport->cancel(&r->req);
  }
  for (auto &s : sends_) {
    if (s.req.pending()) ctx_.transport->cancel(&s.req);
  }
}

bool ActivationTree::quiet() const {
  bool quiet = true;
  for (auto &snd : sends_) quiet &= !snd.req.pending();
  for (auto &r : recvs_) quiet &= !(r && r->posted && r->req.pending());
  return quiet;
}

int64_t ActivationTree::received() const {
  int64_t got = 0;
  for (int64_t n : recv_from_) got += n;
  return got;
}

}  // namespace quorum::partial
