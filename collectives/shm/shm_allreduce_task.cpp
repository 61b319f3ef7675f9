// shm_allreduce_task.cpp: the shm allreduce task's set-up (which path each
// size takes), its progress loop over the chunks in flight, and how it stops:
// cancel, timeouts and the stall report.
#include "collectives/shm/shm_allreduce_task.hpp"

#include <algorithm>

#include "collectives/reduce/reduce_kernels.hpp"
#include "collectives/shm/shm.hpp"
#include "runtime/log.hpp"

namespace quorum {

namespace {

// On 2 ranks, a message of one chunk up to this size is replicated. Beyond it
// slicing measured faster in place and about as fast out of place (2 ranks,
// medians of 5-6 alternating runs): at 512 KiB 16.0 against 6.3 GB/s in place
// and 15.2 against 16.4 out of place; at 256 KiB 7.2 against 5.6 and 6.9
// against 5.9; at 128 KiB 5.8 against 5.2 and 5.6 against 5.5.
constexpr size_t kOneChunkReplicatedBytes = 64 << 10;

}  // namespace

ShmAllreduceTask::ShmAllreduceTask(ShmChannel *ch, Transport *t, const CollArgs &a, uint64_t seq,
                                   ScratchPool *scratch)
    : ch_(ch),
      t_(t),
      seq_(seq),
      scratch_(scratch),
      send_(static_cast<const uint8_t *>(a.send)),
      recv_(static_cast<uint8_t *>(a.recv)),
      count_(a.count),
      dtype_(a.dtype),
      op_(a.op),
      es_(dtype_size(a.dtype)),
      identity_(a.send_identity),
      barrier_(a.kind == CollKind::Barrier) {
  chunk_elems_ = std::max<size_t>(1, ch->chunk_bytes() / es_);
  nchunks_ = (count_ + chunk_elems_ - 1) / chunk_elems_;
  base_ = ch->reserve(nchunks_);
  // Small chunks: one flag round trip. On 2 ranks also a message of one
  // chunk up to kOneChunkReplicatedBytes, whose data stays in cache (out of
  // place measured faster there); larger ones are sliced, which moves less
  // data (see shm_copy_path.cpp). Every rank must choose the same, so the
  // choice cannot depend on whether this rank's call is in place (a partial
  // round can be in place on one rank and not on another).
  const bool one_chunk_2_ranks =
      ch->size() == 2 && nchunks_ == 1 && count_ * es_ <= kOneChunkReplicatedBytes;
  replicated_ = one_chunk_2_ranks || std::min(count_, chunk_elems_) * es_ <= ch->replicated_bytes();
  inline_payload_ = replicated_ && count_ * es_ <= ShmChannel::kInlinePayload;
  // A candidate for a direct path offers it in its first posted line; the
  // path is taken when every rank offers it (see decide_path).
  // Zero-copy only where this rank's own buffers are symmetric: elsewhere no
  // rank can take it (and this one fills its slot at once, see post_chunk).
  if (count_ * es_ >= ch->zero_copy_bytes()) {
    send_location_ = ch->regions().locate(send_, count_ * es_);
    recv_location_ = ch->regions().locate(recv_, count_ * es_);
    zero_copy_candidate_ = recv_location_.region != 0 && (identity_ || send_location_.region != 0);
  }
  cross_memory_candidate_ =
      count_ * es_ >= ch->cross_memory_bytes() &&
      (send_ == recv_ || count_ * es_ <= ch->cross_memory_out_of_place_max_bytes());
  path_ = zero_copy_candidate_ || cross_memory_candidate_ ? Path::Undecided : Path::Copy;
  // In place, the lines written were just read (they are in cache): a
  // streaming store would evict them.
  streaming_ = count_ * es_ >= ch->streaming_bytes() && send_ != recv_;
  // Small messages (the latency path) keep their chunk stages inline.
  if (nchunks_ > sizeof(stage_inline_)) {
    stage_heap_.reset(new uint8_t[nchunks_]);
    stage_ = stage_heap_.get();
  }
  std::fill(stage_, stage_ + nchunks_, uint8_t{kIdle});
}

TaskResult ShmAllreduceTask::progress(Status *status) {
  if (crossing_) return progress_crossing(status);
  if (ch_->broken()) return progress_broken(status);
  const size_t window = static_cast<size_t>(ch_->slots());
  moved_ = false;
  for (;;) {
    bool advanced = false;
    for (size_t c = first_; c < std::min(nchunks_, first_ + window); ++c) advanced |= step(c);
    if (error_ != kOk) {
      ch_->set_broken(error_);
      return failed(status, error_);
    }
    const size_t before = first_;
    while (first_ < nchunks_ && stage_[first_] == kDone) ++first_;
    if (first_ != before) ch_->finish_chunks(base_, base_ + first_);
    if (first_ == nchunks_) {
      waiting_.release();
      return TaskResult::Done;
    }
    if (!advanced) break;
    moved_ = true;
  }
  for (int q = 0; q < ch_->size(); ++q) {
    if (q != ch_->rank() && t_ && t_->peer_failed(q)) {
      ch_->set_broken(QUORUM_ERR_PEER_FAILED, q);
      return failed(status, fail(QUORUM_ERR_PEER_FAILED, "shm",
                                 "rank {} failed during a shared-memory allreduce", q));
    }
  }
  // Stalled: a rank that runs this collective number over messages will
  // never post (one load of its message-call line per peer).
  if (const int q = peer_over_messages(); q >= 0) {
    start_crossing(q);
    return progress_crossing(status);
  }
  waiting_.acquire();
  return TaskResult::Pending;
}

void ShmAllreduceTask::cancel(Status why) {
  if (crossing_) {
    if (!crossing_->done()) crossing_->abort(why);
    waiting_.release();
    return;
  }
  // Aborted mid-protocol: the flags no longer agree, so no shm allreduce can
  // follow. The others then name the rank this one waited for, or the dead
  // rank that ended this one's wait, rather than this rank.
  if (first_ < nchunks_) {
    int culprit = -1;
    if (why == QUORUM_ERR_TIMEOUT) culprit = lagging_rank();
    if (why == QUORUM_ERR_PEER_FAILED && t_) culprit = t_->failed_peer();
    ch_->set_broken(why, culprit);
  }
  waiting_.release();
}

void ShmAllreduceTask::leak_crossing() {
  QLOG_ERROR("shm",
             "rank {}: the signature exchange of collective #{} did not stop; left "
             "allocated",
             ch_->rank(), seq_);
  (void)crossing_.release();
  (void)new std::vector<ScratchPool::Lease>(std::move(crossing_leases_));
}

int ShmAllreduceTask::peer() const {
  if (crossing_) {
    const std::vector<int> peers = crossing_->waiting_peers();
    return peers.empty() ? -1 : peers.front();
  }
  return lagging_rank();
}

int ShmAllreduceTask::lagging_rank() const {
  if (crossing_) return peer();
  if (first_ >= nchunks_) return -1;
  const uint64_t g = base_ + first_;
  const int s = static_cast<int>(g % static_cast<uint64_t>(ch_->slots()));
  for (int q = 0; q < ch_->size(); ++q) {
    const uint64_t word = ch_->posted(q, s).load(std::memory_order_acquire);
    if ((word & ShmChannel::kTagMask) < g + 1) return q;
  }
  for (int q = 0; q < ch_->size(); ++q) {
    if (ch_->reduced(q, s).load(std::memory_order_acquire) < g + 1) return q;
  }
  return -1;
}

void ShmAllreduceTask::time_out(int lagging) {
  if (crossing_) {
    cancel(QUORUM_ERR_TIMEOUT);
    return;
  }
  if (first_ < nchunks_) ch_->set_broken(QUORUM_ERR_TIMEOUT, lagging);
  waiting_.release();
}

std::string ShmAllreduceTask::describe() const {
  if (crossing_) {
    return fmt::format("shm {} #{}: signature exchange with ranks over messages: {}",
                       barrier_ ? "barrier" : "allreduce", seq_, crossing_->stall_report());
  }
  return fmt::format("shm {} chunk {} of {} (stage {})", barrier_ ? "barrier" : "allreduce", first_,
                     nchunks_, first_ < nchunks_ ? int{stage_[first_]} : int{kDone});
}

ShmAllreduceTask::Chunk ShmAllreduceTask::chunk(size_t c) const {
  const uint64_t g = base_ + c;
  const size_t off = c * chunk_elems_;
  return {c,     g,   static_cast<int>(g % static_cast<uint64_t>(ch_->slots())),
          g + 1, off, std::min(chunk_elems_, count_ - off)};
}

std::unique_ptr<Task> shm_allreduce_task(ShmChannel *ch, Transport *t, const CollArgs &a,
                                         uint64_t seq, ScratchPool *scratch) {
  return std::make_unique<ShmAllreduceTask>(ch, t, a, seq, scratch);
}

}  // namespace quorum
