// shm_chunk_steps.cpp: one chunk of a shm allreduce, stage by stage (see
// shm_channel.hpp for the flags): post its input, reduce once every rank
// posted, then finish once every rank's slice is in. Each stage returns what
// it did; step() runs them in turn until one has to wait.
#include <algorithm>

#include "collectives/shm/shm_allreduce_task.hpp"

namespace quorum {

bool ShmAllreduceTask::step(size_t c) {
  if (error_ != kOk) return false;
  if (path_ != Path::Copy && c > 0) return false;  // only the first chunk, if any
  const Chunk k = chunk(c);
  bool moved = false;
  for (;;) {
    Outcome o = Outcome::Waits;
    switch (stage_[c]) {
      case kIdle:
        o = post_chunk(k);
        break;
      case kPosted:
        o = reduce_chunk(k);
        break;
      case kDirectReduced:
        o = finish_direct_chunk(k);
        break;
      case kReduced:
        o = copy_out_chunk(k);
        break;
      default:  // kDone
        return moved;
    }
    switch (o) {
      case Outcome::Waits:
        return moved;
      case Outcome::Stops:
        return false;
      case Outcome::Ends:
        return true;
      case Outcome::Advances:
        moved = true;
        break;
    }
  }
}

ShmAllreduceTask::Outcome ShmAllreduceTask::post_chunk(const Chunk &k) {
  const uint64_t slots = static_cast<uint64_t>(ch_->slots());
  const int me = ch_->rank();
  // The slot's previous chunk (g - S) must be finished on every rank.
  if (k.g >= slots && !all_finished(k.s, k.g - slots)) return Outcome::Waits;
  // A direct-path candidate copies its first chunk in only if the copy
  // path is taken after all (see reduce_chunk).
  fill_deferred_ = k.c == 0 && path_ == Path::Undecided;
  if (!fill_deferred_) fill_slot(k.s, k.off, k.n);
  if (k.c == 0) {
    ch_->posted_signature(me, k.s).store(signature(), std::memory_order_relaxed);
    if (!inline_payload_) post_descriptor(k.s);
  }
  ch_->posted(me, k.s).store(ShmChannel::posted_word(k.tag, ch_->done_prefix()),
                             std::memory_order_release);
  stage_[k.c] = kPosted;
  return Outcome::Advances;
}

ShmAllreduceTask::Outcome ShmAllreduceTask::reduce_chunk(const Chunk &k) {
  const int me = ch_->rank();
  if (!all_posted(k.s, k.tag)) return Outcome::Waits;
  if (k.c == 0 && !signatures_agree(k.s)) return Outcome::Stops;
  bool filled_now = false;
  if (path_ == Path::Undecided) {
    decide_path(k.s);
    if (error_ != kOk) return Outcome::Stops;
    if (path_ != Path::Copy) {
      if (path_ == Path::ZeroCopy) {
        reduce_zero_copy();
      } else {
        error_ = reduce_cross_memory();
        if (error_ != kOk) return Outcome::Stops;
      }
      ch_->reduced(me, k.s).store(k.tag, std::memory_order_release);
      stage_[k.c] = kDirectReduced;
      return Outcome::Ends;
    }
    if (fill_deferred_) {
      fill_slot(k.s, k.off, k.n);
      ch_->filled(me, k.s).store(k.tag, std::memory_order_release);
      fill_deferred_ = false;
      filled_now = true;
    }
  }
  if (k.c == 0 && !inline_payload_ && !inputs_filled(k.s, k.tag)) {
    return filled_now ? Outcome::Ends : Outcome::Waits;
  }
  if (replicated_) {
    reduce_whole(k.s, k.off, k.n);
    ch_->done(me, k.s).store(k.tag, std::memory_order_release);
    // No wait for the peers to finish: slot s is rewritten only once
    // every rank's done flag shows it (the check before the copy in).
    stage_[k.c] = kDone;
    return Outcome::Ends;
  }
  reduce_own_slice(k);
  ch_->reduced(me, k.s).store(k.tag, std::memory_order_release);
  stage_[k.c] = kReduced;
  return Outcome::Advances;
}

ShmAllreduceTask::Outcome ShmAllreduceTask::finish_direct_chunk(const Chunk &k) {
  if (!all_reached(&ShmChannel::reduced, k.s, k.tag)) return Outcome::Waits;
  // finish_direct claims the slots of this op's last chunks: an earlier
  // op's chunk there (one still waiting on a peer, while this op went
  // ahead without slots) must be finished here first, or its later done
  // flag would go back below ours and a peer could rewrite the slot under it.
  if (ch_->done_prefix() < base_) return Outcome::Waits;
  finish_direct();
  return Outcome::Ends;
}

ShmAllreduceTask::Outcome ShmAllreduceTask::copy_out_chunk(const Chunk &k) {
  if (!all_reached(&ShmChannel::reduced, k.s, k.tag)) return Outcome::Waits;
  // The other ranks' slices (this rank's own is in place already).
  copy_outside_own_slice(recv_ + k.off * es_, ch_->result(k.s), k.n,
                         [this](uint8_t *d, const uint8_t *f, size_t b) { copy_result(d, f, b); });
  ch_->done(ch_->rank(), k.s).store(k.tag, std::memory_order_release);
  stage_[k.c] = kDone;
  return Outcome::Advances;
}

}  // namespace quorum
