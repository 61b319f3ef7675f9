// partial_allreduce.hpp: solo, majority and k-of-P quorum allreduce (partial
// collectives after eager-SGD), a persistent object over (count, dtype, op) on
// a communicator.
//
// The class is a façade over its parts (collectives/partial/, not installed):
// the activation tree (activation_tree.hpp, quorum_readiness.cpp: who
// activates a round and the messages that say so), the accumulator
// (partial_accumulator.hpp: this rank's fresh, carried or dropped posts and
// the buffers), and the round driver (round_driver.hpp: the sequence of
// rounds, the calls, the poller, timeouts and failures; one round's schedule
// and header in partial_round.hpp), sharing partial_context.hpp.
//
// Each rank repeats post(contribution) -> wait(result, info). Rounds are
// numbered with 64-bit ids; a rank's k-th wait returns round k's result, so all
// ranks apply the same results in the same order.
//
// Rules:
// - A post belongs to the round this rank waits for next. Two posts without a
//   wait in between are an error (INVALID_ARG). A wait without a post is fine:
//   the rank consumes the round that others activated (its accumulator, maybe
//   empty, is its input). In majority mode a wait without a post by the round's
//   initiator activates the round (nobody else can).
// - Activation. Solo: the first rank whose post for round k happens activates
//   it. Majority: only initiator(seed, k) = splitmix64(seed ^ splitmix64(k)) % P
//   does. Quorum (k of P): the round's counter rank, k mod P, once k ranks
//   have arrived at it (ready messages; quorum_readiness.cpp). The activator broadcasts {round,
//   root} on a k-nomial tree rooted at itself (binomial in activation.hpp;
//   QUORUM_PARTIAL_ACTIVATION_RADIX, by default flat, radix P, when every rank is on this host,
//   where each hop costs a progress-thread wake-up; the ranks use rank 0's value); every rank
//   forwards along every tree it hears of while the round is not complete
//   locally, so each tree reaches every rank even when several ranks activate
//   the same round at once. A rank joins round k once, on the first activation
//   it sees; later ones are discarded by round id (a completed round implies
//   every rank joined it, so nothing is lost). Activation receives stay posted
//   from every peer (one per peer, one tag per object, reposted after each
//   message).
// - Wire cost per round: activations: (number of activators) x (P-1) messages
//   of 16 B (none in synchronous rounds); data: the ordinary allreduce picked
//   by size (recursive doubling / ring, see algorithms/); header: recursive
//   doubling over 5 + 2*ceil(P/32) int64 (log2 P steps).
// - Snapshot. Joining takes the accumulator as the round's input and puts an
//   empty buffer in its place (stale bytes: the first post copies into it; a
//   join with nothing posted contributes the op's identity), under the engine
//   mutex. A post copies into the accumulator without that mutex (the
//   progress thread keeps driving earlier rounds meanwhile); an activation
//   that arrives during the copy is handled once the copy is in: a post lands
//   wholly in one round.
// - post_ref lends the contribution instead: when it lands in its round with
//   nothing carried, that round's data phase reads it from the caller's
//   buffer (out of place into the empty accumulator), which saves the copy
//   (at P = 8 on 2 cores with 16 MiB, the largest cost left per step);
//   otherwise it is copied like a post.
// - Activation delay (opt-in, activation_delay_us): a post that would
//   activate its round (solo: any post; majority: the initiator's) sends the
//   activation that long after it instead of at once; the engine wakes up for
//   it (ProgressEngine::wake_at). Ranks that post meanwhile are fresh in the
//   round; an activation from another rank that arrives first is joined as
//   usual. Under solo this trades a fixed wait per round for the contributions
//   of ranks that are almost ready (eager-SGD's solo is delay 0).
// - Carry (default): a post that missed its round (this rank had joined it
//   already) stays in the accumulator and rides in the next round this rank
//   joins, so every contribution is in exactly one round's sum. Drop: it is
//   discarded and counted (dropped()). A carry weight w < 1 (float32/float64
//   sum or avg) adds w times the late post instead: a stale gradient counts
//   for less than a fresh one, between carry (1) and drop.
// - Each round reduces a small int64 header with its data: the round id (a
//   cross-check), how many ranks joined it as synchronous, how many late posts
//   (all ranks) it carries and their summed lateness, a bitmap of ranks
//   whose post for this round made it in (fresh) and a bitmap of the ranks that
//   activated it (initiator = lowest such rank; -1 for a synchronous round).
// - Staleness: every (A+1)-th round (A = max_staleness) is synchronous: a rank
//   joins it only when it arrives there itself (posts for it, or waits for it
//   without posting), and no activation messages are sent. So no rank gets more
//   than A rounds ahead of another; the fast rank's wait for the synchronous
//   round blocks until the slow rank posts (or waits) for it. A = 0: every round
//   is a plain allreduce.
// - Memory: one accumulator plus up to A+1 round buffers (rounds joined but not
//   yet waited for hold their results), allocated on demand: at most (A+2) x
//   count x dtype size (A+3 while a wait_ref result is lent), plus the
//   allreduce's scratch per round in flight. With shared memory (every rank a
//   process of this host and the rounds on the shm allreduce, on every rank)
//   the first min(A+3, 4) are symmetric, made at creation, so the data phase of
//   a round of at least QUORUM_SHM_ZERO_COPY_BYTES reduces straight between the
//   ranks' round buffers (the shm allreduce's zero-copy path).
// - Tags: [object id: 8 bits][round: low 20 bits] in the sequence field; at most
//   A+2 rounds of one object are in flight and A < 2^19, so the low bits are
//   unambiguous. Object ids come from the communicator's ObjectIds (creation
//   and destroy are collective, so every rank picks the same id; creation
//   checks it): live objects' ids differ in their low 8 bits, so at most 256
//   objects live on a communicator at once (the 257th create fails with
//   NO_MEMORY). An object's id is free again once it is destroyed (or freed).
// - flush() is collective: a synchronous round in which every rank gives up its
//   whole accumulator; with carry, after flush the sum of all results equals the
//   sum of all posts. It must be called at the same round on every rank, with no
//   post pending.
// - Progress: a poller on the engine answers activations and drives the rounds'
//   schedules; the communicator's progress thread runs it while the caller
//   computes. With QUORUM_PROGRESS_THREAD=off, rounds advance only while some
//   rank is inside a quorum call (post, wait, flush or any collective).
// - Buffers may be host or CUDA device memory; device buffers are staged
//   through host memory (accumulators and round buffers live on the host).
// - Errors: a failed peer (failed activation receive or data transfer) fails the
//   object with PEER_FAILED; a wait that sees no progress for QUORUM_TIMEOUT_MS
//   fails it with TIMEOUT naming what it waits for. A failed object answers
//   every later call with the same error.
// - Use: one thread per object; destroy objects before finalizing their
//   communicator.
// - destroy() is collective like create: the ranks exchange how many activation
//   messages each sent to each other and drain them, so no activation is left
//   unmatched. With rounds in flight it aborts them and returns INVALID_ARG.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "collectives/communicator.hpp"
#include "runtime/memory.hpp"

namespace quorum {

namespace partial {
struct PartialContext;
class PartialAccumulator;
class ActivationTree;
class RoundDriver;
}  // namespace partial

struct PartialOptions {
  quorum_partial_mode_t mode = QUORUM_PARTIAL_SOLO;
  uint64_t max_staleness = 32;
  bool carry = true;
  uint64_t seed = 0;
  uint64_t first_round = 0;  // tests: start the round counter high (same on every rank)
  // A post that would activate its round (solo: any; majority: the initiator's)
  // sends the activation this long after it; posts of other ranks meanwhile
  // are fresh in the round. 0: at once (eager-SGD).
  uint64_t activation_delay_us = 0;
  // With carry: a late post rides in its later round multiplied by this, in
  // (0, 1]; below 1 only for float32/float64 and sum or avg.
  double carry_weight = 1.0;
  // QUORUM_PARTIAL_QUORUM: a round activates once k ranks have arrived at it
  // (quorum_readiness.cpp), 1 <= k <= P; 0 in the other modes.
  unsigned k = 0;
};

// Largest activation delay (a round must not wait for its activation anywhere
// near the timeout).
constexpr uint64_t kMaxActivationDelayUs = 10'000'000;

// What wait() reports about a round, with timestamps for benchmarks.
struct PartialRoundInfo {
  uint64_t round = 0;
  int fresh = 0;
  bool own_fresh = false;
  int initiator = -1;
  bool synchronous = false;
  bool flush = false;
  uint64_t post_ns = 0;        // this rank's post for the round (0: none or late)
  uint64_t join_ns = 0;        // this rank joined (activation seen / arrived)
  uint64_t complete_ns = 0;    // data phase done on this rank
  int own_carried = 0;         // this rank's late posts that ride in this round (carry)
  uint64_t own_staleness = 0;  // their summed lateness, in rounds
  int64_t carried = 0;         // late posts of all ranks that ride in this round
  uint64_t staleness = 0;      // their summed lateness, in rounds (same on every rank)
  std::vector<int> fresh_ranks;
};

class PartialAllreduce {
 public:
  // Collective over the communicator (same order of creation on every rank).
  static Status create(Communicator &comm, size_t count, quorum_dtype_t dtype, quorum_op_t op,
                       const PartialOptions &options, std::unique_ptr<PartialAllreduce> *out);
  ~PartialAllreduce();
  PartialAllreduce(const PartialAllreduce &) = delete;
  PartialAllreduce &operator=(const PartialAllreduce &) = delete;

  Status post(const void *contribution);
  // post() without the copy: when the contribution is all of this rank's input
  // to its round (not late, nothing carried), the round reads it from the
  // caller's buffer, which must then stay unchanged until the matching wait
  // returns. Otherwise (and for device memory) it is post().
  Status post_ref(const void *contribution);
  Status wait(void *result, PartialRoundInfo *info = nullptr);
  // wait() without the copy: *result points at the round's result inside the
  // object (host memory), valid until the next post, wait, flush or destroy.
  Status wait_ref(const void **result, PartialRoundInfo *info = nullptr);
  Status flush(void *result, PartialRoundInfo *info = nullptr);
  // Collective; after it only the destructor may be called.
  Status destroy();

  // Statistics (read by the caller's thread; take the engine mutex).
  uint64_t next_round() const;  // the round the next wait returns
  // Rounds other ranks already activated (this rank joined them) that this
  // rank's waits have not returned yet. A post now would miss every one of
  // them (it belongs to the first): a rank that is behind may wait without
  // posting to catch up instead of computing contributions that would only be
  // carried or dropped. Never spans a synchronous round (joined on arrival).
  uint64_t rounds_behind() const;
  uint64_t dropped() const;  // drop mode: late posts discarded
  uint64_t carried() const;  // carry mode: late posts carried into a later round
  // Activations that arrived while a post was copying and waited for it.
  uint64_t deferred_activations() const;
  // fresh_histogram()[f]: how many rounds this rank waited for had f fresh ranks.
  std::vector<uint64_t> fresh_histogram() const;
  const PartialRoundInfo &last_info() const;
  uint64_t object_id() const;
  size_t buffers_allocated() const;
  // Of those, the plain ones: made once this rank held more rounds than
  // there are symmetric buffers (a round using one here cannot go zero-copy).
  size_t plain_buffers() const;
  // Rounds whose data phase took the shm allreduce's zero-copy path here.
  uint64_t zero_copy_rounds() const;
  uint64_t cross_memory_rounds() const;

 private:
  PartialAllreduce();
  // Collective (creation): the activation radix (rank 0's) and whether to
  // make symmetric round buffers (every rank has shm and the shm allreduce).
  Status agree_on_options(int *radix, bool *symmetric);

  // The parts (declared in this order: each outlives those after it).
  std::unique_ptr<partial::PartialContext> ctx_;
  std::unique_ptr<partial::PartialAccumulator> accumulator_;
  std::unique_ptr<partial::RoundDriver> driver_;
  std::unique_ptr<partial::ActivationTree> tree_;
  int finalize_hook_ = -1;
};

}  // namespace quorum
