// round_progress.cpp: how the round driver of a partial allreduce moves (see
// round_driver.hpp): joining a round, the poller the progress thread runs,
// failing the object, and its end: release (local) and destroy (collective:
// the activation messages are drained first).
#include <utility>

#include "collectives/partial/round_driver.hpp"
#include "runtime/clock.hpp"
#include "runtime/knobs.hpp"
#include "runtime/log.hpp"

namespace quorum::partial {

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

}  // namespace

Status run_until(ProgressEngine &engine, const std::string &what,
                 std::function<TaskResult(Status *)> fn, std::function<std::string()> desc) {
  auto sched = std::make_unique<Schedule>(what);
  sched->add(std::make_unique<ConditionTask>(std::move(fn), std::move(desc)));
  auto req = std::make_shared<Request>(std::move(sched), Deadline::never(), what);
  engine.submit(req);
  return engine.wait(req);
}

// ---- creation ----

Status RoundDriver::acquire_object_id() {
  QUORUM_CHECK(ctx_.comm.object_ids().acquire(&ctx_.object_id));
  holds_object_id_ = true;
  return kOk;
}

void RoundDriver::start_polling() {
  poller_id_ = ctx_.engine->add_poller([this] { return poll(); });
}

// ---- rounds (mutex held) ----

Status RoundDriver::join(uint64_t round, JoinKind kind) {
  RoundInput in;
  if (!accumulator_.take_round_input(round, &in)) {
    Status s = fail(QUORUM_ERR_NO_MEMORY, "partial",
                    "partial #{} rank {}: no buffer to join round {} ({} allocated, {} B each)",
                    ctx_.object_id, ctx_.rank, round, accumulator_.allocated(), ctx_.bytes);
    fail_object(s);
    return s;
  }
  std::unique_ptr<Round> r;
  Status s = build_round(ctx_, round, in, kind, &r);
  if (s != kOk) {
    fail_object(s);
    return s;
  }
  joined_ = round + 1;
  r->sched->progress();
  rounds_.push_back(std::move(r));
  return kOk;
}

Round *RoundDriver::find_round(uint64_t round) {
  for (auto &r : rounds_) {
    if (r->id == round) return r.get();
  }
  return nullptr;
}

bool RoundDriver::round_complete(uint64_t round) const {
  if (round >= joined_) return false;
  for (const auto &r : rounds_) {
    if (r->id == round) return r->complete;
  }
  return true;  // consumed already
}

bool RoundDriver::progress_rounds() {
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
    Status s = read_round_header(ctx_, r);
    if (s != kOk) {
      fail_object(s);
      return true;
    }
    r.complete = true;
    r.leases.clear();
    any = true;
  }
  return any;
}

bool RoundDriver::poll() {
  bool any = tree_->poll_sends();
  // A failed or destroyed object only lets its aborted transfers finish.
  if (error_ != kOk || destroyed_) return any;
  any |= tree_->poll_receives();
  any |= tree_->poll_delayed_activation();
  any |= progress_rounds();
  return any;
}

// ---- failures ----

void RoundDriver::fail_object(Status s) {
  if (error_ != kOk) return;
  error_ = s;
  error_detail_ = last_error();
  ctx_.comm.note_failure(s);
  abort_rounds(s);
}

void RoundDriver::abort_rounds(Status s) {
  for (auto &r : rounds_) {
    if (!r->complete && !r->sched->done()) r->sched->abort(s);
  }
}

bool RoundDriver::in_flight(std::string *why) const {
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

// ---- the end ----

void RoundDriver::orphan() {
  if (!destroyed_) {
    // A failed object is expected here (an application's error path).
    log(error_ != kOk ? LogLevel::Info : LogLevel::Warn, "partial",
        "partial #{} rank {}: the communicator is finalized before the partial collective was "
        "destroyed; released locally (destroy it before quorum_finalize)",
        ctx_.object_id, ctx_.rank);
    release();
  }
  ctx_.orphaned = true;
}

Status RoundDriver::release() {
  {
    auto lock = ctx_.lock_engine();
    destroyed_ = true;
    abort_rounds(QUORUM_ERR_INVALID_ARG);
    tree_->cancel_transfers();
  }
  // Wait until no task or transport request touches our buffers any more
  // (cancellations may complete in a later progress pass).
  Deadline deadline = Deadline::after_ms(knob_timeout_ms.get());
  Status s = run_until(
      *ctx_.engine, fmt::format("partial #{} release", ctx_.object_id),
      [this, deadline](Status *st) {
        bool quiet = tree_->quiet();
        for (auto &r : rounds_) quiet &= r->complete || r->sched->quiescent();
        if (quiet) return TaskResult::Done;
        if (deadline.expired()) {
          *st = fail(QUORUM_ERR_TIMEOUT, "partial", "partial #{}: transfers did not stop",
                     ctx_.object_id);
          return TaskResult::Failed;
        }
        return TaskResult::Pending;
      },
      [] { return std::string("releasing"); });
  if (poller_id_ >= 0) ctx_.engine->remove_poller(poller_id_);
  poller_id_ = -1;
  auto lock = ctx_.lock_engine();
  rounds_.clear();
  tree_->clear_sends();
  // Its tags are free for a later object (after destroy, no message of this
  // one is left anywhere).
  if (holds_object_id_) ctx_.comm.object_ids().release(ctx_.object_id);
  holds_object_id_ = false;
  return s;
}

Status RoundDriver::destroy() {
  std::string why;
  bool flight = false, failed = false;
  const int size = ctx_.size;
  std::vector<int64_t> counts(size + 1, 0);
  {
    auto lock = ctx_.lock_engine();
    if (ctx_.orphaned) return released_error("partial_destroy");
    if (destroyed_) {
      return fail(QUORUM_ERR_INVALID_ARG, "partial", "partial_destroy called twice");
    }
    flight = in_flight(&why);
    failed = error_ != kOk;
    for (int q = 0; q < size; ++q) counts[q] = tree_->sent_to()[q];
    counts[size] = flight ? 1 : 0;
  }
  Status result = kOk;
  bool drain = false;
  int64_t expected = 0;
  if (!failed && size > 1) {
    // Collective: how many activations were sent to each rank, and whether any
    // rank still has rounds in flight (then nobody drains, all abort).
    std::vector<int64_t> total(size + 1, 0);
    result =
        ctx_.comm.allreduce(counts.data(), total.data(), counts.size(), QUORUM_INT64, QUORUM_SUM);
    if (result == kOk) {
      drain = total[size] == 0;
      expected = total[ctx_.rank];
    }
  }
  if (drain) {
    Deadline deadline = Deadline::after_ms(knob_timeout_ms.get());
    result = run_until(
        *ctx_.engine, fmt::format("partial #{} destroy", ctx_.object_id),
        [this, expected, deadline](Status *st) {
          const int64_t got = tree_->received();
          if (got >= expected && tree_->sends_done()) return TaskResult::Done;
          if (error_ != kOk) {
            *st = error_;
            return TaskResult::Failed;
          }
          if (deadline.expired()) {
            *st = fail(QUORUM_ERR_TIMEOUT, "partial",
                       "partial #{} rank {}: destroy drained {} of {} activation messages",
                       ctx_.object_id, ctx_.rank, got, expected);
            return TaskResult::Failed;
          }
          return TaskResult::Pending;
        },
        [] { return std::string("draining activations"); });
  }
  QLOG_INFO("partial",
            "partial #{} rank {}: destroyed after {} rounds ({} through zero-copy, {} through "
            "cross-memory attach), {} buffers of {} B ({} symmetric unused)",
            ctx_.object_id, ctx_.rank, waited_, ctx_.shm ? ctx_.shm->zero_copy_ops() : 0,
            ctx_.shm ? ctx_.shm->cross_memory_ops() : 0, accumulator_.allocated(), ctx_.bytes,
            accumulator_.symmetric_unused());
  Status q = release();
  if (failed) {
    restore_last_error(error_detail_);
    return error_;
  }
  if (flight) {
    return fail(QUORUM_ERR_INVALID_ARG, "partial",
                "partial_destroy on rank {} with rounds in flight: {}; they were aborted (wait or "
                "flush first)",
                ctx_.rank, why);
  }
  if (result != kOk) return result;
  return q;
}

}  // namespace quorum::partial
