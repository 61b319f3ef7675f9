// shm_direct_paths.cpp: the shm allreduce's direct paths, which reduce
// straight between the ranks' buffers instead of through the slots.
//
// Zero-copy path (messages of QUORUM_SHM_ZERO_COPY_BYTES and more): the first
// chunk's posted line also carries where the rank's send and receive buffers
// lie in the channel's symmetric regions (quorum_mem_alloc). When every rank's
// do, each rank reduces its 1/P slice straight from every rank's send buffer
// into every rank's receive buffer (one read and one write of each byte per
// rank instead of a copy in, a reduction and a copy out), publishes reduced,
// and returns once every rank's reduced flag shows the op is finished. Every
// rank reads the same descriptors and so takes the same path; the other
// chunks are never posted. A candidate (for zero-copy: a rank whose own
// buffers are symmetric) posts its first chunk without copying it in (its
// descriptor says so): where the path turns out to be the copy path after
// all (a rank that is no candidate), it copies it in then and raises filled,
// which the others wait for before they read that slot.
//
// Cross-memory path (messages of QUORUM_SHM_CROSS_MEMORY_BYTES and more, when
// not every rank's buffers are symmetric): the first posted line carries the
// rank's pid and its buffers' addresses instead, and when every rank's does,
// each rank reduces its 1/P slice as on the zero-copy path, but reads the
// peers' send buffers and writes their receive buffers with cross-memory
// attach (runtime/cross_memory.hpp), block by block through a buffer that
// stays in cache: per rank the slice's inputs are read once and the results
// written once, the same memory traffic as zero-copy, plus two system calls
// per peer and block. Out of place, messages above
// QUORUM_SHM_CROSS_MEMORY_OUT_OF_PLACE_MAX_BYTES (by default where the
// ranks' buffers outgrow the cache, at most 8 MiB) copy instead: the kernel's
// writes into the peers' receive buffers read each line first, which costs
// more than the copy path once the buffers leave the cache (in place, those
// lines were just read), and the copy path writes with streaming stores
// there. (Reading the peers' inputs by cross-memory attach but passing the
// results through the result slots measured no faster than copying in, at
// 32 and 64 MiB, with or without streaming stores.) The ranks agreed at the
// channel's creation that they can attach to each other (probe_cross_memory),
// or no rank offers it.
#include <algorithm>
#include <cerrno>
#include <cstring>
#include <vector>

#include <unistd.h>

#include "collectives/reduce/reduce_kernels.hpp"
#include "collectives/shm/shm_allreduce_task.hpp"
#include "runtime/cross_memory.hpp"
#include "runtime/log.hpp"

namespace quorum {

void ShmAllreduceTask::post_descriptor(int s) {
  // A descriptor even when this rank is no candidate (it says "no
  // region"): a peer whose QUORUM_SHM_ZERO_COPY_BYTES differs then
  // copies too instead of reading a stale line.
  ShmChannel::DirectPathDescriptor d;
  d.send_identity = identity_ ? 1 : 0;
  d.slot_filled = fill_deferred_ ? 0 : 1;
  if (zero_copy_candidate_) d.set_locations(send_location_, recv_location_);
  if (cross_memory_candidate_) {
    d.pid = static_cast<uint32_t>(getpid());
    d.send_address = identity_ ? 0 : reinterpret_cast<uintptr_t>(send_);
    d.recv_address = reinterpret_cast<uintptr_t>(recv_);
  }
  std::memcpy(ch_->posted_payload(ch_->rank(), s), &d, sizeof(d));
}

void ShmAllreduceTask::decide_path(int s) {
  const int p = ch_->size();
  const size_t bytes = count_ * es_;
  std::vector<ShmChannel::DirectPathDescriptor> d(static_cast<size_t>(p));
  bool symmetric = true, cross_memory = true;
  for (int q = 0; q < p; ++q) {
    auto &dq = d[static_cast<size_t>(q)];
    std::memcpy(&dq, ch_->posted_payload(q, s), sizeof(dq));
    if ((dq.send_region == 0 && !dq.send_identity) || dq.recv_region == 0) symmetric = false;
    if (dq.pid == 0) cross_memory = false;
  }
  path_ = Path::Copy;
  sources_.clear();
  if (cross_memory && !symmetric) {
    peers_.assign(d.size(), Peer{});
    for (int q = 0; q < p; ++q) {
      const auto &dq = d[static_cast<size_t>(q)];
      peers_[static_cast<size_t>(q)] = {static_cast<pid_t>(dq.pid), dq.send_address,
                                        dq.recv_address, dq.send_identity == 0};
    }
    path_ = Path::CrossMemory;
    ch_->count_cross_memory();
    return;
  }
  if (!symmetric) return;
  peer_recv_.assign(static_cast<size_t>(p), nullptr);
  for (int q = 0; q < p; ++q) {
    const auto &dq = d[static_cast<size_t>(q)];
    uint8_t *send = dq.send_identity ? nullptr : ch_->regions().peer_address(dq.send(), q, bytes);
    uint8_t *recv = ch_->regions().peer_address(dq.recv(), q, bytes);
    if ((!send && !dq.send_identity) || !recv) {
      // A region this rank freed while a peer still uses it: nobody can go on.
      error_ = fail(QUORUM_ERR_INVALID_ARG, "shm",
                    "rank {}'s allreduce buffers lie in symmetric region {}/{}, which "
                    "this rank no longer maps (freed with quorum_mem_free?)",
                    q, dq.send_region, dq.recv_region);
      return;
    }
    if (send) sources_.push_back(send);
    peer_recv_[static_cast<size_t>(q)] = recv;
  }
  path_ = Path::ZeroCopy;
  ch_->count_zero_copy();
}

template <typename Source>
void ShmAllreduceTask::reduce_block(uint8_t *out, size_t k, Source source, size_t n) const {
  if (k == 0) {
    fill_identity(out, n, dtype_, op_);
  } else if (k == 1) {
    if (out != source(0)) std::memcpy(out, source(0), n * es_);
  } else {
    reduce_out(out, source(0), source(1), n, dtype_, op_);
    for (size_t i = 2; i < k; ++i) reduce_into(out, source(i), n, dtype_, op_);
  }
  if (op_ == QUORUM_AVG) scale_average(out, n, dtype_, ch_->size());
}

// This rank's slice, block by block through a small buffer that stays in
// cache: reduced from the contributing ranks' send buffers in rank order
// (the identity when none contributes), then copied to every rank's receive
// buffer (safe in place: only this rank touches the slice).
void ShmAllreduceTask::reduce_zero_copy() {
  const int p = ch_->size();
  auto slice = own_slice(count_);
  constexpr size_t kBlockBytes = 32 * 1024;
  const size_t block = std::max<size_t>(1, kBlockBytes / es_);
  std::unique_ptr<uint8_t[]> tmp(new uint8_t[block * es_]);
  for (size_t o = slice.offset; o < slice.offset + slice.count; o += block) {
    const size_t n = std::min(block, slice.offset + slice.count - o);
    const size_t at = o * es_;
    reduce_block(
        tmp.get(), sources_.size(), [&](size_t i) { return sources_[i] + at; }, n);
    for (int q = 0; q < p; ++q) {
      copy_result(peer_recv_[static_cast<size_t>(q)] + at, tmp.get(), n * es_);
    }
  }
}

// This rank's slice, as reduce_zero_copy, with the peers' buffers reached
// by cross-memory attach: per block, every contributing peer's part is read
// into a buffer of its own, reduced in rank order (this rank's straight from
// its send buffer) and written to every rank's receive buffer. Safe in
// place: only this rank touches the slice, in every rank's buffers.
//
// Where it can, the block is reduced straight into this rank's receive
// buffer and written to the peers from there, which saves a pass over the
// block (a copy out of the accumulator): in place when this rank's input is
// the first or second in rank order (reduce_out may overwrite one of its two
// inputs, not an input that a later reduce_into still needs; on 2 ranks
// always), out of place below twice the streaming size, the automatic
// out-of-place limit of this path (there the buffers still share the cache
// with the peers' copies, and on 2 ranks at 4 MiB this measured 1.17x as fast
// as writing the slice with streaming stores). Above it, where the probe lifted
// that limit, the slice is written with streaming stores from the
// accumulator (reducing into the receive buffer would read every line first).
Status ShmAllreduceTask::reduce_cross_memory() {
  const int me = ch_->rank(), p = ch_->size();
  auto slice = own_slice(count_);
  const size_t block = std::max<size_t>(1, ch_->cross_memory_block_bytes() / es_);
  const size_t block_bytes = block * es_;
  int contributors_before_me = 0;
  for (int q = 0; q < me; ++q) contributors_before_me += peers_[static_cast<size_t>(q)].contributes;
  const bool in_place = send_ == recv_;
  const bool into_recv =
      in_place ? (!peers_[static_cast<size_t>(me)].contributes || contributors_before_me <= 1)
               : !streaming_ || count_ * es_ / 2 < ch_->streaming_bytes();
  // Slot 0 holds the result (unless into_recv); slot 1 + i the i-th
  // contributing peer's part.
  std::unique_ptr<uint8_t[]> tmp(new uint8_t[block_bytes * static_cast<size_t>(p)]);
  std::vector<const uint8_t *> src;
  for (size_t o = slice.offset; o < slice.offset + slice.count; o += block) {
    const size_t n = std::min(block, slice.offset + slice.count - o);
    const size_t at = o * es_;
    uint8_t *acc = into_recv ? recv_ + at : tmp.get();
    src.clear();
    size_t read = 0;  // peers' parts read so far
    for (int q = 0; q < p; ++q) {
      const Peer &peer = peers_[static_cast<size_t>(q)];
      if (!peer.contributes) continue;
      if (q == me) {
        src.push_back(send_ + at);
        continue;
      }
      uint8_t *into = tmp.get() + block_bytes * ++read;
      QUORUM_CHECK(read_peer(q, peer.send + at, into, n * es_));
      src.push_back(into);
    }
    reduce_block(
        acc, src.size(), [&](size_t i) { return src[i]; }, n);
    for (int q = 0; q < p; ++q) {
      if (q == me) {
        if (!into_recv) copy_result(recv_ + at, acc, n * es_);
      } else {
        QUORUM_CHECK(write_peer(q, peers_[static_cast<size_t>(q)].recv + at, acc, n * es_));
      }
    }
  }
  return kOk;
}

Status ShmAllreduceTask::read_peer(int q, uint64_t from, uint8_t *to, size_t bytes) {
  const int err = cross_memory_read(peers_[static_cast<size_t>(q)].pid, from, to, bytes);
  return err == 0 ? kOk : peer_copy_failed(q, "read from", "send", bytes, err);
}

Status ShmAllreduceTask::write_peer(int q, uint64_t to, const uint8_t *from, size_t bytes) {
  const int err = cross_memory_write(peers_[static_cast<size_t>(q)].pid, to, from, bytes);
  return err == 0 ? kOk : peer_copy_failed(q, "write to", "receive", bytes, err);
}

Status ShmAllreduceTask::peer_copy_failed(int q, const char *verb, const char *buffer, size_t bytes,
                                          int err) {
  if (err == ESRCH || (t_ && t_->peer_failed(q))) {
    return fail(QUORUM_ERR_PEER_FAILED, "shm",
                "rank {} failed during a shared-memory allreduce (count {})", q, count_);
  }
  return fail(QUORUM_ERR_TRANSPORT, "shm",
              "allreduce (count {}) on rank {}: cross-memory {} rank {}'s {} buffer ({} B, "
              "process {}): {}",
              count_, ch_->rank(), verb, q, buffer, bytes, peers_[static_cast<size_t>(q)].pid,
              std::strerror(err));
}

void ShmAllreduceTask::finish_direct() {
  const int me = ch_->rank();
  const size_t slots = static_cast<size_t>(ch_->slots());
  for (size_t c = nchunks_ > slots ? nchunks_ - slots : 0; c < nchunks_; ++c) {
    const uint64_t g = base_ + c;
    ch_->done(me, static_cast<int>(g % slots)).store(g + 1, std::memory_order_release);
  }
  std::fill(stage_, stage_ + nchunks_, uint8_t{kDone});
}

}  // namespace quorum
