// quorum_readiness.cpp: the k-of-P quorum allreduce's part of the activation
// tree (activation_tree.hpp, QUORUM_PARTIAL_QUORUM): a round activates once k
// ranks have arrived at it.
// Between solo (k = 1: the first arrival activates) and a synchronous
// allreduce (k = P: the last one does); majority instead draws one rank whose
// arrival activates.
//
// Protocol, for a round k that is not synchronous:
// - Arrival. A rank arrives at round k when it posts for it in time (round k
//   not joined yet here: the post will be fresh in it) or waits for it without
//   a post (it has nothing to give; counting it keeps a round that fewer than
//   k ranks post for from stalling, as synchronous rounds are joined by a wait
//   too). A late post (round k joined already) does not arrive: its round is
//   running.
// - Counting. The counter of round k is rank k mod P (rotating, so the
//   counting is spread). An arriving rank sends it one ready message (or, being
//   the counter, counts itself). Ranks send readies for round k only once
//   round k-1 completed on them, so every rank, the counter included, has
//   joined k-1 by then: the counter only ever counts its next round to join
//   (readies for rounds it already joined are late and ignored).
// - Activation. The counter's k-th count activates the round: the counter
//   joins it and sends the activation on the k-nomial tree rooted at itself,
//   as a solo activator does (after activation_delay_us if set; the round's
//   initiator is the counter). Ranks that post before the activation reaches
//   them are fresh too, so a round has at least k fresh contributions when
//   every arrival was a post. Late contributions are carried or dropped as in
//   the other modes.
// - A ready that reaches the counter while its post copies into the
//   accumulator is counted at once; the activation waits until the copy is in
//   (the round driver's post then calls activate_if_quorum), so a post lands
//   wholly in one round.
// - k = 1 takes the solo path (every in-time post activates its round; a wait
//   without a post does not).
// Wire per round: at most P-1 ready messages of 16 B to the counter (one per
// arriving rank other than the counter; those arriving after the k-th count
// still send theirs, ignored), then P-1 activation messages of 16 B down the
// counter's tree (an extra hop over solo: ready, then activation); data and
// header as in every round. Readies share the activation tag and receives
// (root field with partial::kReadyFlag set, naming the sender), so destroy's
// drain counts them with the activations.
#include "collectives/partial/activation_tree.hpp"
#include "collectives/partial/round_driver.hpp"

namespace quorum::partial {

Status ActivationTree::arrive(uint64_t k) {
  const int counter = quorum_counter(k, ctx_.size);
  if (counter == ctx_.rank) return handle_ready(k, ctx_.rank);
  return send(counter, k, static_cast<uint32_t>(ctx_.rank) | kReadyFlag);
}

Status ActivationTree::handle_ready(uint64_t round, int from) {
  const uint64_t joined = driver_.joined();
  const bool sender_ok = ctx_.quorum_mode() && from >= 0 && from < ctx_.size;
  if (sender_ok && round < joined) return kOk;  // activated already: a late arrival
  if (!sender_ok || round > joined || ctx_.sync_round(round) ||
      quorum_counter(round, ctx_.size) != ctx_.rank) {
    Status s =
        fail(QUORUM_ERR_MISMATCH, "partial",
             "partial #{} rank {}: ready for round {} from rank {} while this rank is at "
             "round {} (its counter is rank {}): ranks disagree on the mode or the rounds",
             ctx_.object_id, ctx_.rank, round, from, joined, quorum_counter(round, ctx_.size));
    driver_.fail_object(s);
    return s;
  }
  if (ready_round_ != round) ready_round_ = round, ready_count_ = 0;
  ++ready_count_;
  if (accumulator_.copying()) return kOk;  // activated once the post's copy is in
  return activate_if_quorum();
}

Status ActivationTree::activate_if_quorum() {
  const uint64_t joined = driver_.joined();
  if (!ctx_.quorum_mode() || ready_round_ != joined || ready_count_ < ctx_.opts.k) return kOk;
  if (due_ns_ != 0 && due_round_ == joined) return kOk;  // delayed
  return activate(joined);
}

}  // namespace quorum::partial
