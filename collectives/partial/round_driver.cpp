// round_driver.cpp: the calls of a partial allreduce on its round driver
// (see round_driver.hpp): post and post_ref (the accumulator takes the post,
// the activation tree activates its round), wait and flush (join where the
// rules say so, wait for the round with a timeout, hand out its result).
#include "collectives/partial/round_driver.hpp"

#include <cstring>
#include <utility>

#include "runtime/clock.hpp"
#include "runtime/knobs.hpp"

namespace quorum::partial {

Status RoundDriver::begin_call(const char *call) {
  if (destroyed_) return released_error(call);
  if (error_ != kOk) {
    restore_last_error(error_detail_);
    return error_;
  }
  accumulator_.return_lent();
  return kOk;
}

Status RoundDriver::begin_post(const char *call) {
  QUORUM_CHECK(begin_call(call));
  if (posted_) {
    return fail(QUORUM_ERR_INVALID_ARG, "partial",
                "{}: rank {} posted twice for round {} without a wait in between", call, ctx_.rank,
                waited_);
  }
  return kOk;
}

Status RoundDriver::released_error(const char *call) const {
  if (ctx_.orphaned) {
    return fail(QUORUM_ERR_INVALID_ARG, "partial",
                "{}: partial #{}'s communicator was finalized (the object was released then)", call,
                ctx_.object_id);
  }
  return fail(QUORUM_ERR_INVALID_ARG, "partial", "{} after destroy", call);
}

Status RoundDriver::post(const void *contribution) {
  if (buffer_kind(contribution) == BufferKind::Device) {
    QUORUM_CHECK(accumulator_.stage_device_post(&contribution));
  }
  uint64_t k = 0;
  bool late = false;
  {
    auto lock = ctx_.lock_engine();
    QUORUM_CHECK(begin_post("partial_post"));
    posted_ = true;
    k = waited_;
    late = k != joined_;  // round k was joined without it
    if (late && !ctx_.opts.carry) {
      accumulator_.note_dropped_post();
    } else {
      accumulator_.begin_copy();
    }
  }
  if (late && !ctx_.opts.carry) {
    ctx_.engine->progress_once();
    return kOk;
  }
  // The copy into the accumulator (or the sum with what it carries) runs
  // without the engine mutex, so this rank's progress thread keeps driving the
  // rounds' data phases meanwhile (the other ranks wait for its slices); an
  // activation that arrives now is deferred until the copy is in: the post
  // still lands wholly in one round. So joined_ stays put meanwhile: a late
  // post stays late (a weighted carry scales it first).
  Status s = accumulator_.add_post(contribution, late);
  {
    auto lock = ctx_.lock_engine();
    accumulator_.end_copy();
    if (s != kOk) {
      fail_object(s);  // deferred activations could not join: peers must not wait
    } else if (error_ != kOk) {
      restore_last_error(error_detail_);
      s = error_;
    }
    if (s != kOk) {
      tree_->drop_deferred_activations();
      return s;
    }
    // joined_ did not move during the copy (joins were deferred; only this
    // thread joins otherwise).
    if (k == joined_) {
      accumulator_.note_fresh_post();
    } else {
      // Late: round k was joined without this post; it rides in a later round.
      accumulator_.note_late_post(k);
    }
    s = tree_->handle_deferred_activations();
    if (s == kOk && k == joined_) s = tree_->on_post(k);
    // Quorum mode: readies counted during the copy may complete the count.
    if (s == kOk) s = tree_->activate_if_quorum();
  }
  ctx_.engine->progress_once();
  ctx_.engine->wake();
  return s;
}

Status RoundDriver::post_ref(const void *contribution) {
  if (buffer_kind(contribution) == BufferKind::Device) return post(contribution);
  Status s = kOk;
  {
    auto lock = ctx_.lock_engine();
    QUORUM_CHECK(begin_post("partial_post_ref"));
    // Lent only when it is all of this rank's input to its round; a late
    // post or one that adds to carried contributions is copied (post()).
    if (waited_ == joined_ && accumulator_.can_lend(contribution)) {
      posted_ = true;
      accumulator_.lend_post(contribution);
      s = tree_->on_post(waited_);
    } else {
      lock.unlock();
      return post(contribution);
    }
  }
  ctx_.engine->progress_once();
  ctx_.engine->wake();
  return s;
}

std::string RoundDriver::describe_wait(uint64_t round) {
  if (round >= joined_) {
    if (ctx_.sync_round(round)) return fmt::format("round {}: synchronous, not joined yet", round);
    return tree_->describe_wait(round);
  }
  Round *r = find_round(round);
  if (!r) return fmt::format("round {}: consumed", round);
  std::string peers;
  for (int q : r->sched->waiting_peers()) peers += (peers.empty() ? "" : ",") + std::to_string(q);
  return fmt::format("round {}: data phase waits for rank(s) [{}]: {}", round, peers,
                     r->sched->stall_report());
}

Status RoundDriver::wait_for_round(uint64_t round, const char *what) {
  const int64_t timeout = knob_timeout_ms.get();
  Deadline deadline = Deadline::after_ms(timeout);
  auto describe = [this, round] { return describe_wait(round); };
  Status s = run_until(
      *ctx_.engine, fmt::format("partial #{} {} round {}", ctx_.object_id, what, round),
      [this, round, deadline, timeout, describe](Status *st) {
        if (error_ != kOk) {
          restore_last_error(error_detail_);
          *st = error_;
          return TaskResult::Failed;
        }
        if (round_complete(round)) return TaskResult::Done;
        if (deadline.expired()) {
          *st = fail(QUORUM_ERR_TIMEOUT, "partial",
                     "partial allreduce #{} on rank {} timed out after {} ms; {}", ctx_.object_id,
                     ctx_.rank, timeout, describe());
          fail_object(QUORUM_ERR_TIMEOUT);
          return TaskResult::Failed;
        }
        return TaskResult::Pending;
      },
      describe);
  if (s != kOk) {
    auto lock = ctx_.lock_engine();
    // A failure the engine reported (a dead peer ends every request in
    // flight) fails the object too, so that later calls keep that error.
    fail_object(s);
    restore_last_error(error_detail_);
    return error_;
  }
  return kOk;
}

Status RoundDriver::consume(void *result, const void **ref, PartialRoundInfo *info) {
  std::unique_ptr<Round> r;
  {
    auto lock = ctx_.lock_engine();
    if (rounds_.empty() || rounds_.front()->id != waited_ || !rounds_.front()->complete) {
      return fail(QUORUM_ERR_INTERNAL, "partial", "partial #{} rank {}: round {} not ready",
                  ctx_.object_id, ctx_.rank, waited_);
    }
    r = std::move(rounds_.front());
    rounds_.pop_front();
    ++waited_;
    posted_ = false;
    accumulator_.count_round(r->info.fresh);
    last_info_ = r->info;
  }
  Status s = kOk;
  if (ref) {
    *ref = r->buf;
  } else if (buffer_kind(result) == BufferKind::Device) {
    s = device_copy(result, r->buf, ctx_.bytes);
  } else {
    std::memcpy(result, r->buf, ctx_.bytes);
  }
  {
    auto lock = ctx_.lock_engine();
    if (ref) {
      accumulator_.lend_result(r->buf);
    } else {
      accumulator_.recycle(r->buf);
    }
  }
  if (info) *info = r->info;
  return s;
}

Status RoundDriver::wait(void *result, const void **ref, PartialRoundInfo *info) {
  uint64_t k;
  {
    auto lock = ctx_.lock_engine();
    QUORUM_CHECK(begin_call("partial_wait"));
    k = waited_;
    // Arriving at a synchronous round without a post: join with what we carry.
    // Otherwise a wait without a post may activate (majority's initiator) or
    // arrive (quorum) at its round.
    if (k == joined_ && ctx_.sync_round(k)) {
      QUORUM_CHECK(join(k, JoinKind{false, true, false}));
    } else if (k == joined_ && !posted_) {
      QUORUM_CHECK(tree_->on_wait_without_post(k));
    }
  }
  QUORUM_CHECK(wait_for_round(k, "wait"));
  return consume(result, ref, info);
}

Status RoundDriver::flush(void *result, PartialRoundInfo *info) {
  uint64_t k;
  {
    auto lock = ctx_.lock_engine();
    QUORUM_CHECK(begin_call("partial_flush"));
    if (posted_) {
      return fail(QUORUM_ERR_INVALID_ARG, "partial",
                  "partial_flush: rank {} has a post for round {} that was not waited for",
                  ctx_.rank, waited_);
    }
    k = waited_;
    if (joined_ > k) {
      return fail(QUORUM_ERR_MISMATCH, "partial",
                  "partial_flush on rank {}: round {} was already activated by another rank's "
                  "post; every rank must call flush at the same round",
                  ctx_.rank, k);
    }
    QUORUM_CHECK(join(k, JoinKind{false, true, true}));
  }
  QUORUM_CHECK(wait_for_round(k, "flush"));
  return consume(result, nullptr, info);
}

}  // namespace quorum::partial
