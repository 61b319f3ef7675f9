// round_driver.hpp: the round driver of a partial allreduce: the sequence of
// rounds on this rank (joined_: the next to join, waited_: the next a wait
// returns), the calls (post, post_ref, wait, wait_ref, flush, destroy), the
// poller that the progress thread runs (activation tree, then the joined
// rounds' schedules), timeouts, and failures: a dead peer or a mismatch
// fails the object, and every later call answers with that error. It joins
// rounds when the activation tree says so, with the input the accumulator
// gives (see partial_allreduce.hpp for the rules). Not installed.
#pragma once

#include <cstdint>
#include <deque>
#include <functional>
#include <memory>
#include <string>

#include "collectives/partial/activation_tree.hpp"
#include "collectives/partial/partial_accumulator.hpp"
#include "collectives/partial/partial_context.hpp"
#include "collectives/partial/partial_round.hpp"

namespace quorum::partial {

// Runs the engine until fn says Done or Failed (fn checks its own deadline).
Status run_until(ProgressEngine &engine, const std::string &what,
                 std::function<TaskResult(Status *)> fn, std::function<std::string()> desc);

class RoundDriver {
 public:
  RoundDriver(PartialContext &ctx, PartialAccumulator &accumulator)
      : ctx_(ctx), accumulator_(accumulator) {}
  RoundDriver(const RoundDriver &) = delete;
  RoundDriver &operator=(const RoundDriver &) = delete;

  // Creation: the tree that activates the rounds, the object's id (its tags;
  // returned by release()), the first round, then the poller.
  void set_activation_tree(ActivationTree *tree) { tree_ = tree; }
  Status acquire_object_id();
  void start_at(uint64_t first_round) { joined_ = waited_ = first_round; }
  void start_polling();

  // The calls (see PartialAllreduce).
  Status post(const void *contribution);
  Status post_ref(const void *contribution);
  // result: copied there; or ref: lent (*ref) until the next call.
  Status wait(void *result, const void **ref, PartialRoundInfo *info);
  Status flush(void *result, PartialRoundInfo *info);
  Status destroy();
  // Aborts rounds, cancels transfers, waits until they stop, removes the poller.
  Status release();
  // The communicator is being finalized before this object was destroyed:
  // release, then never touch the communicator or its engine again.
  void orphan();
  bool destroyed() const { return destroyed_; }

  // For the activation tree (mutex held).
  Status join(uint64_t round, JoinKind kind);
  uint64_t joined() const { return joined_; }
  bool round_complete(uint64_t round) const;
  // Fails the object (the first error stays) and aborts its rounds.
  void fail_object(Status s);
  bool failed() const { return error_ != kOk; }
  bool active() const { return !destroyed_ && error_ == kOk; }

  // Statistics (mutex held).
  uint64_t next_round() const { return waited_; }
  uint64_t rounds_behind() const { return joined_ > waited_ && !posted_ ? joined_ - waited_ : 0; }
  const PartialRoundInfo &last_info() const { return last_info_; }

 private:
  // Mutex held: the poller.
  bool poll();
  bool progress_rounds();
  Round *find_round(uint64_t round);
  void abort_rounds(Status s);
  bool in_flight(std::string *why) const;
  Status wait_for_round(uint64_t round, const char *what);
  // Why round `round` is not complete here (the timeout's message).
  std::string describe_wait(uint64_t round);
  // The waited round's result: copied to result, or lent (*ref) until the next call.
  Status consume(void *result, const void **ref, PartialRoundInfo *info);
  // The error of a call after destroy or after the communicator's finalize.
  Status released_error(const char *call) const;
  // Mutex held, at the start of post/wait/flush: the object's error or the
  // released error if any, else takes back a lent result.
  Status begin_call(const char *call);
  // begin_call, and no post pending since the last wait.
  Status begin_post(const char *call);

  PartialContext &ctx_;
  PartialAccumulator &accumulator_;
  ActivationTree *tree_ = nullptr;
  bool holds_object_id_ = false;  // released with the object's tags (release())
  int poller_id_ = -1;

  // Round bookkeeping (engine mutex).
  uint64_t joined_ = 0;                        // next round to join
  uint64_t waited_ = 0;                        // next round wait() returns
  bool posted_ = false;                        // posted for round waited_ and not yet waited
  std::deque<std::unique_ptr<Round>> rounds_;  // joined, not yet consumed

  Status error_ = kOk;
  std::string error_detail_;
  bool destroyed_ = false;
  PartialRoundInfo last_info_;
};

}  // namespace quorum::partial
