// shm_mismatch.cpp: mismatched calls on the shared-memory channel.
//
// Ranks that disagree on an op (a mismatched call) all see it in the first
// chunk's signatures and fail with QUORUM_ERR_MISMATCH, before any rank reads
// or writes another's buffers with its own idea of their size; the chunk
// numbers no longer agree after that, so the channel is broken too. Later
// calls on a broken channel fail at once, naming the rank and status of the
// first failure: as QUORUM_ERR_MISMATCH after a mismatch, else as
// QUORUM_ERR_PEER_FAILED.
// Collectives over messages (all but the shm allreduce and barrier, and
// those with device buffers or another algorithm forced on a rank): a rank
// notes each one's sequence number on its own line of the header, one word
// of eight by seq % 8 (note_message_call, one store). A rank whose shm op
// waits for a rank that never posts reads that rank's line: when it shows
// the op's own sequence number, the two ranks called different collectives
// (or one took shared memory and the other messages), and waiting would end
// in a timeout. The waiting rank then breaks the channel as a mismatch and
// joins the message ranks' signature exchange (signature.hpp) at that
// sequence number with its own call, marked as taken over shared memory, so
// that every rank, on either side, fails with QUORUM_ERR_MISMATCH naming
// two calls that differ. A rank that finds the channel broken runs the same
// exchange where a peer's line shows its sequence number.
#include <memory>
#include <string>
#include <vector>

#include "collectives/reduce/dtype.hpp"
#include "collectives/shm/shm.hpp"
#include "collectives/shm/shm_allreduce_task.hpp"
#include "collectives/signature.hpp"
#include "runtime/log.hpp"

namespace quorum {

int ShmAllreduceTask::peer_over_messages() {
  if (seq_ == kNoSequence || scratch_ == nullptr) return -1;
  for (int q = 0; q < ch_->size(); ++q) {
    if (q != ch_->rank() && ch_->in_message_call(q, seq_)) return q;
  }
  return -1;
}

void ShmAllreduceTask::start_crossing(int q) {
  ch_->set_broken(QUORUM_ERR_MISMATCH);
  QLOG_DEBUG("shm", "{} #{} on rank {}: rank {} runs this collective over messages",
             barrier_ ? "barrier" : "allreduce", seq_, ch_->rank(), q);
  CollArgs mine;
  mine.kind = barrier_ ? CollKind::Barrier : CollKind::Allreduce;
  mine.count = barrier_ ? 0 : count_;
  mine.dtype = dtype_;
  mine.op = op_;
  mine.over_shm = true;
  crossing_ = std::make_unique<Schedule>("signature exchange after a crossing");
  Builder b(*crossing_, t_, ch_->rank(), ch_->size(), mine.kind, seq_, *scratch_);
  TaskId verdict = -1;
  crossing_status_ = build_signature_exchange(b, mine, seq_, false, &verdict);
  crossing_leases_ = b.take_leases();
  waiting_.release();  // messages now: the engine may sleep on transport events
}

TaskResult ShmAllreduceTask::progress_crossing(Status *status) {
  moved_ = false;
  if (crossing_status_ != kOk) return failed(status, crossing_status_);
  while (crossing_->progress()) moved_ = true;
  if (!crossing_->done()) return TaskResult::Pending;
  if (crossing_->status() != kOk) return failed(status, crossing_->status());
  return failed(status, fail(QUORUM_ERR_MISMATCH, "shm",
                             "{} #{} on rank {}: a rank ran this collective over messages while "
                             "this rank went through shared memory",
                             barrier_ ? "barrier" : "allreduce", seq_, ch_->rank()));
}

TaskResult ShmAllreduceTask::progress_broken(Status *status) {
  // Broken by a mismatch, maybe by a rank that found a peer in a message
  // collective of this number: join that exchange, which ends every
  // rank's call as a mismatch. (After a peer failure or a timeout, fail
  // at once: an exchange would wait for a dead rank.)
  const int q = ch_->broken_status() == QUORUM_ERR_MISMATCH ? peer_over_messages() : -1;
  if (q >= 0) {
    start_crossing(q);
    return progress_crossing(status);
  }
  // A rank that saw a mismatched call first broke the channel: this one
  // reports the mismatch too where its first chunk shows it.
  if (error_ == kOk && nchunks_ > 0 && stage_[0] == kPosted) {
    const uint64_t g = base_;
    const int s = static_cast<int>(g % static_cast<uint64_t>(ch_->slots()));
    if (all_posted(s, g + 1)) signatures_agree(s);
  }
  if (error_ != kOk) return failed(status, error_);
  return failed(status, shm_broken_error(*ch_));
}

bool ShmAllreduceTask::signatures_agree(int s) {
  const int me = ch_->rank();
  const uint64_t mine = signature();
  for (int q = 0; q < ch_->size(); ++q) {
    const uint64_t theirs = ch_->posted_signature(q, s).load(std::memory_order_relaxed);
    if (theirs == mine) continue;
    error_ = fail(QUORUM_ERR_MISMATCH, "shm",
                  "allreduce mismatch seen on rank {} (shared memory): rank {} called {} but "
                  "rank {} called {}",
                  me, q, describe_signature(theirs), me, describe_signature(mine));
    return false;
  }
  return true;
}

std::string ShmAllreduceTask::describe_signature(uint64_t signature) {
  if (signature == kBarrierSignature) return "barrier";
  const auto dtype = static_cast<quorum_dtype_t>((signature >> 48) & 0xff);
  const auto op = static_cast<quorum_op_t>(signature >> 56);
  const uint64_t bytes = signature & ShmChannel::kTagMask;
  const size_t es = dtype_size(dtype);
  return es == 0 ? fmt::format("allreduce({} B, dtype {}, op {})", bytes, int{dtype}, int{op})
                 : fmt::format("allreduce(count={}, {}, {})", bytes / es, dtype_name(dtype),
                               op_name(op));
}

namespace {

// What an allreduce on a broken channel reports once the signature exchange
// in front of it agreed (broken_channel_task).
class BrokenChannelTask : public Task {
 public:
  explicit BrokenChannelTask(const ShmChannel *ch) : ch_(ch) {}
  TaskResult progress(Status *status) override {
    *status = shm_broken_error(*ch_);
    return TaskResult::Failed;
  }
  std::string describe() const override { return "allreduce on a broken shared-memory channel"; }

 private:
  const ShmChannel *ch_;
};

}  // namespace

Status shm_broken_error(const ShmChannel &ch) {
  // A mismatch stays one (no rank died); anything else broke the protocol on
  // some rank, as a dead peer would.
  const Status why = ch.broken_status();
  if (why == QUORUM_ERR_PEER_FAILED) {
    return fail(why, "shm", "rank {} failed during a shared-memory allreduce", ch.broken_by());
  }
  if (why == QUORUM_ERR_TIMEOUT) {
    return fail(why, "shm",
                "a shared-memory allreduce timed out waiting for rank {} (it has not joined), "
                "after which no shared-memory allreduce of this communicator can go on",
                ch.broken_by());
  }
  return fail(why == QUORUM_ERR_MISMATCH ? why : QUORUM_ERR_PEER_FAILED, "shm",
              "a shared-memory allreduce failed on rank {} ({}), after which no shared-memory "
              "allreduce of this communicator can go on",
              ch.broken_by(), quorum_strerror(why));
}

std::unique_ptr<Task> broken_channel_task(const ShmChannel *ch) {
  return std::make_unique<BrokenChannelTask>(ch);
}

}  // namespace quorum
