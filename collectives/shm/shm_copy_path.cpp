// shm_copy_path.cpp: the shm allreduce's copy path, through the slots of the
// channel's segment (every op takes it unless a direct path applies).
//
// Per chunk (see shm_channel.hpp for the flags): every rank copies its input
// chunk into its slot and publishes it; once all inputs are there, rank r
// reduces slice r of the chunk (1/P of it, in rank order 0, 1, ..., P-1) into
// the shared result slot and publishes that; once all slices are there, every
// rank copies the whole result chunk out. One rank computes each slice, so all
// ranks get bitwise identical results. A rank neither copies in nor copies out
// its own slice: it reduces that from its send buffer and writes the result to
// its receive buffer too. Per rank, data thus crosses memory about four times
// its size on 2 ranks (half copied in, the reduction reading both halves and
// writing two, half copied out) without any system call. Small chunks, and a
// message of one chunk up to 64 KiB on 2 ranks, are reduced whole by every rank instead
// ("replicated": the same kernel over the same P inputs in the same order gives
// the same bits), which saves the second flag round trip and the copy out but
// copies the whole input in (one round trip per small message). With S slots
// per rank, chunk c + 1 is copied in while the peers still work on chunk c. A
// small message is a single replicated chunk (one flag round trip), and nobody
// waits for the peers to finish: a slot is rewritten only after every rank's
// done flag for its previous use. Out-of-place messages of
// QUORUM_SHM_STREAMING_BYTES and more (by default the size where the ranks'
// buffers fill the last-level cache, at most 8 MiB) write their results (into
// the receive buffers) with streaming stores (reduce/streaming.hpp), which
// saves the read of every line written. In place, every line written was just
// read (it is in cache already), and a streaming store would only evict it.
#include <algorithm>
#include <cstring>

#include "collectives/reduce/reduce_kernels.hpp"
#include "collectives/shm/shm_allreduce_task.hpp"

namespace quorum {

void ShmAllreduceTask::fill_slot(int s, size_t off, size_t n) {
  const int me = ch_->rank();
  uint8_t *slot = inline_payload_ ? ch_->posted_payload(me, s) : ch_->input(me, s);
  if (identity_) {
    fill_identity(slot, n, dtype_, op_);
  } else if (replicated_) {
    std::memcpy(slot, send_ + off * es_, n * es_);
  } else {
    copy_outside_own_slice(slot, send_ + off * es_, n,
                           [](uint8_t *d, const uint8_t *f, size_t b) { std::memcpy(d, f, b); });
  }
}

bool ShmAllreduceTask::inputs_filled(int s, uint64_t tag) {
  if (!unfilled_known_) {
    unfilled_.clear();
    for (int q = 0; q < ch_->size(); ++q) {
      ShmChannel::DirectPathDescriptor d;
      std::memcpy(&d, ch_->posted_payload(q, s), sizeof(d));
      if (!d.slot_filled) unfilled_.push_back(q);
    }
    unfilled_known_ = true;
  }
  while (!unfilled_.empty()) {
    if (ch_->filled(unfilled_.back(), s).load(std::memory_order_acquire) < tag) return false;
    unfilled_.pop_back();
  }
  return true;
}

void ShmAllreduceTask::reduce_whole(int s, size_t off, size_t n) {
  const int me = ch_->rank(), p = ch_->size();
  const size_t bytes = off * es_;
  auto src = [&](int q) -> const uint8_t * {
    if (q == me && send_ != recv_ && !identity_) return send_ + bytes;
    return inline_payload_ ? ch_->posted_payload(q, s) : ch_->input(q, s);
  };
  uint8_t *out = recv_ + bytes;
  if (streaming_ && p == 2) {
    reduce_out_streaming(out, src(0), src(1), n, dtype_, op_, p);
    return;
  }
  reduce_out(out, src(0), src(1), n, dtype_, op_);
  for (int q = 2; q < p; ++q) reduce_into(out, src(q), n, dtype_, op_);
  if (op_ == QUORUM_AVG) scale_average(out, n, dtype_, p);
}

void ShmAllreduceTask::reduce_own_slice(const Chunk &k) {
  const int me = ch_->rank(), p = ch_->size();
  auto slice = own_slice(k.n);
  if (slice.count == 0) return;
  const size_t at = slice.offset * es_;
  auto src = [&](int q) -> const uint8_t * {
    if (q == me && !identity_) return send_ + k.off * es_ + at;
    return ch_->input(q, k.s) + at;
  };
  // Into the result slot first (in place, the receive buffer is this
  // rank's input), then into the receive buffer while still in cache.
  uint8_t *res = ch_->result(k.s) + at;
  reduce_out(res, src(0), src(1), slice.count, dtype_, op_);
  for (int q = 2; q < p; ++q) reduce_into(res, src(q), slice.count, dtype_, op_);
  if (op_ == QUORUM_AVG) scale_average(res, slice.count, dtype_, p);
  copy_result(recv_ + k.off * es_ + at, res, slice.count * es_);
}

}  // namespace quorum
