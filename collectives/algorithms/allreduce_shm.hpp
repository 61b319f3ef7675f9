// allreduce_shm.hpp: the shared-memory channel of a communicator whose ranks
// all live on this host (processes over ucx), used by the "shm" allreduce.
//
// Segment layout: a header of flags (one 64-byte line each), then P x S input
// slots of C bytes (rank r's copy of its current chunk, S slots per rank for
// double buffering), then S result slots of C bytes. Chunks are numbered on a
// stream shared by every shm allreduce of the communicator (g = 0, 1, ...;
// the same on every rank because collectives start in the same order); chunk
// g uses slot g % S and publishes the value g + 1 in these flags per rank:
//   posted[r][s]  - rank r's input for chunk g is in its slot, unless its
//                   descriptor says otherwise (a message of up to 48 bytes,
//                   or the descriptor, rides in the rest of this flag's line,
//                   and on an op's first chunk the op's signature: its size
//                   in bytes, dtype and op, which every rank compares with
//                   its own before it reads or writes anything of the op)
//   reduced[r][s] - rank r wrote its 1/P slice of the result of chunk g
//   done[r][s]    - rank r copied the result out (and read everyone's input)
//   filled[r][s]  - rank r's input for chunk g is in its slot, where it was
//                   posted without it (a direct-path candidate, see below)
// A rank writes slot s for chunk g only once done[q][s] >= g + 1 - S on every
// rank q, so nobody still reads what chunk g - S left there. Flags only grow,
// so they are never cleared. `broken` is set by a rank whose shm task fails or
// is aborted: the others then fail at once instead of waiting for a timeout.
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
// The posted word also carries, in its top 16 bits, how far the rank's done
// prefix (every chunk below it finished) lagged the chunk it posts. A peer that
// reads the word anyway (it needs the input) thus learns that those chunks are
// finished there and skips their done flags when it reuses their slots: a small
// message costs one cache-line transfer per peer, not two. Chunk tags use the
// low 48 bits of the posted word.
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
//
// A rank whose CollArgs say send_identity (a partial round joined with nothing
// posted) contributes the op's identity without it being in its buffer: it
// fills its slots with the identity, and on the zero-copy path it is left out
// of the sources (only its receive buffer must be symmetric).
#pragma once

#include <algorithm>
#include <atomic>
#include <cstdint>
#include <map>
#include <memory>
#include <mutex>

#include "collectives/algorithms/shm_regions.hpp"
#include "runtime/bootstrap/bootstrap.hpp"
#include "runtime/knobs.hpp"
#include "runtime/shm_segment.hpp"

namespace quorum {

extern Knob<bool> knob_shm;
extern Knob<int64_t> knob_shm_chunk_bytes;
extern Knob<int64_t> knob_shm_max_bytes;
extern Knob<int64_t> knob_shm_zero_copy_bytes;

class ProgressEngine;
class Transport;
struct CollArgs;
class ShmChannel;
class ScratchPool;
class Task;

// A blocking allreduce through the channel, run by the calling thread without
// a schedule (the small-message fast path); polls `engine` now and then,
// naps between polls once the protocol has stalled for spin_ns (the
// engine's choice: short when ranks share cores) for nap_us at first, longer
// the longer it waits (memory_nap_us), and gives up with
// QUORUM_ERR_TIMEOUT after timeout_ms (<= 0: never). a.kind Barrier (one
// int32 sum): a barrier, whose signature matches no allreduce.
// seq: the collective's sequence number on the communicator (kNoSequence:
// none, e.g. the path probe); with `scratch`, a rank that finds a peer in a
// message collective of that number joins its signature exchange (see the
// top of ShmChannel's comment).
constexpr uint64_t kNoSequence = UINT64_MAX;
Status shm_allreduce_inline(ShmChannel *ch, Transport *t, const CollArgs &a, ProgressEngine &engine,
                            int64_t timeout_ms, uint64_t spin_ns, int64_t nap_us,
                            uint64_t seq = kNoSequence, ScratchPool *scratch = nullptr);

// The failure of a shm allreduce on a broken channel: QUORUM_ERR_MISMATCH
// after a mismatch, QUORUM_ERR_TIMEOUT after a timeout, else
// QUORUM_ERR_PEER_FAILED, naming the rank of the first failure.
Status shm_broken_error(const ShmChannel &ch);
// An allreduce after a mismatch broke the channel, on every rank whichever
// path it would take: the signature exchange over messages (so that it meets
// a rank in another collective of this number, or one that went over
// messages), then this task, which fails with shm_broken_error.
std::unique_ptr<Task> broken_channel_task(const ShmChannel *ch);

class ShmChannel {
 public:
  // Collective over `group`; *out stays empty (and kOk) when the segment
  // cannot be made. `regions`: symmetric buffers shared with another channel
  // over the same group (a partial object's channel sees the communicator's
  // quorum_mem_alloc buffers); null: a set of its own.
  static Status create(const ShmGroup &group, std::unique_ptr<ShmChannel> *out,
                       std::shared_ptr<ShmRegions> regions = nullptr);

  int rank() const { return rank_; }
  int size() const { return size_; }
  int slots() const { return slots_; }
  size_t chunk_bytes() const { return chunk_bytes_; }
  // QUORUM_SHM_REPLICATED_BYTES, read when the channel was made.
  size_t replicated_bytes() const { return replicated_bytes_; }
  // QUORUM_SHM_ZERO_COPY_BYTES (SIZE_MAX: never), read when the channel was made.
  size_t zero_copy_bytes() const { return zero_copy_bytes_; }
  // QUORUM_SHM_CROSS_MEMORY_BYTES (SIZE_MAX: never, also when the ranks cannot
  // attach to each other's memory), read when the channel was made.
  size_t cross_memory_bytes() const { return cross_memory_bytes_; }
  // Whether that came from the knob's automatic rule with the path on (ranks
  // that can attach, a core each): choose_cross_memory_path may then time it
  // against the copy path and turn it off.
  bool cross_memory_automatic() const { return cross_memory_automatic_; }
  // Every rank alike, between ops: the cross-memory path from `bytes` on
  // (SIZE_MAX: never). Safe while a peer still finishes an earlier op: a path
  // is taken only when every rank's first posted line offers it.
  void set_cross_memory_bytes(size_t bytes) { cross_memory_bytes_ = bytes; }
  // What choose_cross_memory_path measured on this rank (ran: it timed both).
  struct PathProbe {
    bool ran = false;
    bool copy_chosen = false;
    bool out_of_place_unlimited = false;        // the cross-memory path at every size out of place
    uint64_t cross_memory_ns = 0, copy_ns = 0;  // this rank's medians
    uint64_t cross_memory_ops = 0;              // of its ops, those that went cross-memory
  };
  const PathProbe &path_probe() const { return path_probe_; }
  void set_path_probe(const PathProbe &probe) { path_probe_ = probe; }
  // QUORUM_SHM_CROSS_MEMORY_BLOCK_BYTES (at least 4096).
  size_t cross_memory_block_bytes() const { return cross_memory_block_bytes_; }
  // QUORUM_SHM_CROSS_MEMORY_OUT_OF_PLACE_MAX_BYTES (SIZE_MAX: no limit).
  size_t cross_memory_out_of_place_max_bytes() const {
    return cross_memory_out_of_place_max_bytes_;
  }
  // Whether that came from the knob's automatic rule (the path probe may lift it).
  bool cross_memory_out_of_place_max_automatic() const {
    return cross_memory_out_of_place_max_automatic_;
  }
  // Every rank alike, between ops (SIZE_MAX: no limit).
  void set_cross_memory_out_of_place_max_bytes(size_t bytes) {
    cross_memory_out_of_place_max_bytes_ = bytes;
  }
  // QUORUM_SHM_STREAMING_BYTES (SIZE_MAX: never), read when the channel was made.
  size_t streaming_bytes() const { return streaming_bytes_; }
  // The first of `n` consecutive chunk numbers for one collective.
  uint64_t reserve(uint64_t n) { return next_chunk_.fetch_add(n); }

  std::atomic<uint64_t> &posted(int r, int s) { return flag(1 + 0 * size_ * slots_, r, s); }
  // The posted word: tag (low 48 bits) and done-prefix lag (high 16; kLagUnknown: none).
  static constexpr uint64_t kTagMask = (uint64_t{1} << 48) - 1;
  static constexpr uint64_t kLagUnknown = 0xffff;
  static uint64_t posted_word(uint64_t tag, uint64_t done_prefix) {
    const uint64_t lag = std::min(tag - done_prefix, kLagUnknown);
    return (tag & kTagMask) | (lag << 48);
  }
  // This rank's done prefix: every chunk g < it is finished here (input read,
  // result out). Release/acquire: the finished chunks' reads of the segment
  // happen before a post that publishes the prefix, even when another thread
  // finished them.
  uint64_t done_prefix() const { return done_prefix_.load(std::memory_order_acquire); }
  // Chunks [from, to) are finished here (called again with a larger `to` as an
  // op's chunks finish). Ops may finish out of order (a one-chunk op whose
  // slot was free before its predecessor's last chunk): such a range waits in
  // a list until the prefix reaches it, so the prefix never stalls.
  void finish_chunks(uint64_t from, uint64_t to);
  // The highest done prefix learned of rank q (from its posted words).
  uint64_t peer_done_prefix(int q) const {
    return peer_done_[static_cast<size_t>(q)].load(std::memory_order_acquire);
  }
  void learn_done_prefix(int q, uint64_t word) {
    const uint64_t lag = word >> 48;
    if (lag == kLagUnknown) return;
    const uint64_t prefix = (word & kTagMask) - lag;
    auto &known = peer_done_[static_cast<size_t>(q)];
    uint64_t cur = known.load(std::memory_order_relaxed);
    while (cur < prefix && !known.compare_exchange_weak(cur, prefix, std::memory_order_release,
                                                        std::memory_order_relaxed)) {
    }
  }
  // The rest of posted(r, s)'s cache line but its last word: a message this
  // small travels with its flag (one cache-line transfer to each peer instead
  // of two).
  static constexpr size_t kInlinePayload = 48;
  uint8_t *posted_payload(int r, int s) {
    return reinterpret_cast<uint8_t *>(&posted(r, s)) + sizeof(uint64_t);
  }
  // The last word of posted(r, s)'s line: the signature of the op whose first
  // chunk rank r posted there (op_signature).
  std::atomic<uint64_t> &posted_signature(int r, int s) {
    return *reinterpret_cast<std::atomic<uint64_t> *>(posted_payload(r, s) + kInlinePayload);
  }
  // An op's size in bytes (low 48 bits), dtype and op, as one word.
  static constexpr uint64_t op_signature(uint64_t bytes, int dtype, int op) {
    return (bytes & kTagMask) | (static_cast<uint64_t>(dtype & 0xff) << 48) |
           (static_cast<uint64_t>(op & 0xff) << 56);
  }
  // Words of rank r's message-call line (see the top of this file).
  static constexpr uint64_t kMessageCallWords = 8;  // one line
  std::atomic<uint64_t> &message_call(int r, uint64_t seq) {
    return (&line(1 + 4 * static_cast<size_t>(size_) * slots_ +
                  static_cast<size_t>(r)))[seq % kMessageCallWords];
  }
  // This rank runs collective `seq` over messages.
  void note_message_call(uint64_t seq) {
    message_call(rank_, seq).store(seq + 1, std::memory_order_release);
  }
  // Rank q runs (or ran) collective `seq` over messages.
  bool in_message_call(int q, uint64_t seq) {
    return message_call(q, seq).load(std::memory_order_acquire) == seq + 1;
  }
  std::atomic<uint64_t> &reduced(int r, int s) { return flag(1 + 1 * size_ * slots_, r, s); }
  std::atomic<uint64_t> &done(int r, int s) { return flag(1 + 2 * size_ * slots_, r, s); }
  // A direct-path candidate's first chunk posted before its input was in the
  // slot: the input is there once this reaches the chunk's tag.
  std::atomic<uint64_t> &filled(int r, int s) { return flag(1 + 3 * size_ * slots_, r, s); }
  uint8_t *input(int r, int s) const {
    return data_ + (static_cast<size_t>(r) * slots_ + s) * chunk_bytes_;
  }
  uint8_t *result(int s) const {
    return data_ + (static_cast<size_t>(size_) * slots_ + s) * chunk_bytes_;
  }
  // Symmetric buffers (quorum_mem_alloc) of this channel's ranks
  // (Communicator::alloc_symmetric makes them).
  ShmRegions &regions() { return *regions_; }
  const std::shared_ptr<ShmRegions> &shared_regions() const { return regions_; }
  // How many allreduces took the zero-copy path on this rank.
  uint64_t zero_copy_ops() const { return zero_copy_ops_.load(std::memory_order_relaxed); }
  void count_zero_copy() { zero_copy_ops_.fetch_add(1, std::memory_order_relaxed); }
  // How many allreduces took the cross-memory path on this rank.
  uint64_t cross_memory_ops() const { return cross_memory_ops_.load(std::memory_order_relaxed); }
  void count_cross_memory() { cross_memory_ops_.fetch_add(1, std::memory_order_relaxed); }
  // Where a direct-path candidate's buffers lie (zero-copy: in the symmetric
  // regions; cross-memory: in its process); rides in its first posted line.
  struct DirectPathDescriptor {
    // Zero-copy candidates (else region 0): where the buffers lie in the
    // symmetric regions (ShmRegions::Location, without its padding).
    uint32_t send_region = 0, recv_region = 0;
    uint64_t send_offset = 0, recv_offset = 0;
    // Cross-memory candidates (else pid 0): the process and the buffers' addresses in it.
    uint64_t send_address = 0, recv_address = 0;
    uint32_t pid = 0;
    uint8_t send_identity = 0;  // contributes the identity: send is not read
    uint8_t slot_filled = 1;    // the input is in the slot (else: see filled())
    ShmRegions::Location send() const { return {send_region, send_offset}; }
    ShmRegions::Location recv() const { return {recv_region, recv_offset}; }
    void set_locations(ShmRegions::Location send, ShmRegions::Location recv) {
      send_region = send.region;
      send_offset = send.offset;
      recv_region = recv.region;
      recv_offset = recv.offset;
    }
  };
  static_assert(sizeof(DirectPathDescriptor) <= kInlinePayload);
  // A rank's shm task failed or was aborted: the flags no longer agree, and
  // no shm allreduce of the communicator can go on. The first such failure
  // is kept: its status and the rank it names (the dead rank of a peer
  // failure, else the rank that saw it).
  bool broken() const { return line(0).load(std::memory_order_acquire) != 0; }
  void set_broken(Status why, int culprit = -1) {
    uint64_t none = 0;
    const uint64_t named = static_cast<uint64_t>(culprit >= 0 ? culprit : rank_);
    const uint64_t word = (named + 1) << 32 | static_cast<uint32_t>(why);
    line(0).compare_exchange_strong(none, word, std::memory_order_release,
                                    std::memory_order_relaxed);
  }
  Status broken_status() const {
    return static_cast<Status>(line(0).load(std::memory_order_acquire) & 0xffffffff);
  }
  int broken_by() const {
    return static_cast<int>(line(0).load(std::memory_order_acquire) >> 32) - 1;
  }

 private:
  static constexpr size_t kLine = 64;
  // Moves the prefix over every waiting range it reaches.
  void absorb_ahead_locked();
  std::atomic<uint64_t> &line(size_t i) const {
    return *reinterpret_cast<std::atomic<uint64_t> *>(segment_->data() + i * kLine);
  }
  std::atomic<uint64_t> &flag(size_t base, int r, int s) {
    return line(base + static_cast<size_t>(r) * slots_ + s);
  }

  std::unique_ptr<ShmSegment> segment_;
  uint8_t *data_ = nullptr;
  int rank_ = 0;
  int size_ = 0;
  int slots_ = 2;
  size_t chunk_bytes_ = 0;
  size_t replicated_bytes_ = 0;
  size_t zero_copy_bytes_ = SIZE_MAX;
  size_t streaming_bytes_ = SIZE_MAX;
  size_t cross_memory_bytes_ = SIZE_MAX;
  bool cross_memory_automatic_ = false;
  PathProbe path_probe_;
  size_t cross_memory_out_of_place_max_bytes_ = SIZE_MAX;
  bool cross_memory_out_of_place_max_automatic_ = false;
  size_t cross_memory_block_bytes_ = 128 * 1024;
  std::atomic<uint64_t> next_chunk_{0};
  std::atomic<uint64_t> done_prefix_{0};
  // Ranges finished ahead of the prefix (start -> end), under ahead_mutex_.
  std::mutex ahead_mutex_;
  std::map<uint64_t, uint64_t> ahead_;
  std::atomic<size_t> ahead_count_{0};
  std::unique_ptr<std::atomic<uint64_t>[]> peer_done_;  // per rank, local to this process
  std::shared_ptr<ShmRegions> regions_;
  std::atomic<uint64_t> zero_copy_ops_{0};
  std::atomic<uint64_t> cross_memory_ops_{0};
};

}  // namespace quorum
