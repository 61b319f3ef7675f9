// activation_tree.hpp: who activates each round of a partial allreduce, and
// the activation messages that tell the other ranks. Solo: the first rank
// whose post for the round happens. Majority: the round's drawn initiator
// (majority_initiator in activation.hpp). Quorum (k of P): the round's
// counter rank once k ranks arrived (ready messages, quorum_readiness.cpp).
// The activator joins the round and sends {round, root} down a k-nomial tree
// rooted at itself; every rank forwards along every tree it hears of while
// the round runs here (see partial_allreduce.hpp, "Activation").
//
// It owns the activation receives (one posted per peer, reposted after each
// message), the sends in flight and their counts per peer (destroy drains
// them), the delayed activation (activation_delay_us), the activations
// deferred while a post copies into the accumulator, and the quorum count.
// Joining itself is the round driver's (round_driver.hpp). All methods run
// with the engine mutex held; not installed.
#pragma once

#include <cstdint>
#include <list>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "collectives/partial/partial_accumulator.hpp"
#include "collectives/partial/partial_context.hpp"

namespace quorum::partial {

class RoundDriver;

class ActivationTree {
 public:
  ActivationTree(PartialContext &ctx, const PartialAccumulator &accumulator, RoundDriver &driver)
      : ctx_(ctx), accumulator_(accumulator), driver_(driver) {}
  ActivationTree(const ActivationTree &) = delete;
  ActivationTree &operator=(const ActivationTree &) = delete;

  // The radix this rank's knob asks for (QUORUM_PARTIAL_ACTIVATION_RADIX);
  // the ranks agree on rank 0's at creation.
  static int64_t wished_radix(const PartialContext &ctx);
  // Creation: the tree's radix (the same on every rank) and one receive per peer.
  Status start(int radix);

  // This rank's post for round k (the next round to join) is in: joins and
  // activates the round where the mode says so (a synchronous round is
  // joined on arrival; solo: any post; majority: the initiator's; quorum:
  // arrives at the round's counter).
  Status on_post(uint64_t k);
  // A wait for round k (the next to join) without a post, not a synchronous
  // round: majority's initiator activates (nobody else can); quorum arrives.
  Status on_wait_without_post(uint64_t k);
  // After a post's copy: the activations that arrived meanwhile (or, when
  // the copy failed, forgets them), and (quorum) a count completed meanwhile.
  Status handle_deferred_activations();
  void drop_deferred_activations() { deferred_.clear(); }
  // The counter of the next round to join activates it once k ranks arrived
  // (not while a post copies).
  Status activate_if_quorum();

  // The poller: finished sends, then the messages received, then a delayed
  // activation that is due.
  bool poll_sends();
  bool poll_receives();
  bool poll_delayed_activation();

  // Release: cancels receives and sends; quiet() once none is pending.
  void cancel_transfers();
  bool quiet() const;
  void clear_sends() { sends_.clear(); }
  // Destroy's drain: messages sent to each peer, received from all.
  const std::vector<int64_t> &sent_to() const { return sent_to_; }
  int64_t received() const;
  bool sends_done() const { return sends_.empty(); }
  uint64_t deferred_count() const { return deferred_count_; }
  // Why round `round` (not joined yet, not synchronous) has not begun here.
  std::string describe_wait(uint64_t round) const;

 private:
  // Activation messages (and quorum mode's ready messages: root has
  // kReadyFlag set and names the sender).
  struct ActivationMsg {
    uint64_t round;
    uint32_t root;
    uint32_t object;
  };
  struct ActivationRecv {
    ActivationMsg msg{};
    TransportRequest req;
    bool posted = false;
  };
  struct ActivationSend {
    ActivationMsg msg{};
    TransportRequest req;
  };

  // Activates round k from this rank now, or after activation_delay_us.
  Status activate(uint64_t k);
  // Joins round k as its activator and sends the activation down the tree.
  Status activate_now(uint64_t k);
  Status send(int peer, uint64_t round, uint32_t root);
  Status send_activations(uint64_t round, int root);
  Status handle_activation(uint64_t round, int root);
  Status post_receive(int peer);
  // Quorum mode (quorum_readiness.cpp): this rank arrived at round k (a
  // fresh post, or a wait without one): tell the round's counter rank.
  Status arrive(uint64_t k);
  Status handle_ready(uint64_t round, int from);

  PartialContext &ctx_;
  const PartialAccumulator &accumulator_;
  RoundDriver &driver_;
  std::vector<std::unique_ptr<ActivationRecv>> recvs_;  // per peer
  std::list<ActivationSend> sends_;
  std::vector<int64_t> sent_to_;    // activation messages sent to each peer
  std::vector<int64_t> recv_from_;  // received from each peer
  uint64_t tag_ = 0;
  int radix_ = 2;  // k-nomial activation tree, the same on every rank
  // A delayed activation (activation_delay_us): round and when it goes out (0: none).
  uint64_t due_round_ = 0;
  uint64_t due_ns_ = 0;
  // Activations that would join a round while a post copies: (round, root).
  std::vector<std::pair<uint64_t, int>> deferred_;
  uint64_t deferred_count_ = 0;
  // Quorum mode, on the counter rank of a round: arrivals counted for it.
  uint64_t ready_round_ = ~uint64_t{0};
  unsigned ready_count_ = 0;
};

}  // namespace quorum::partial
