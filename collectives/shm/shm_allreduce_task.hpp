// shm_allreduce_task.hpp: the task that runs one allreduce (or barrier) over a
// shared-memory channel (shm_channel.hpp), chunk by chunk, without blocking:
// progress() polls the flags and returns Pending. Internal to collectives/shm/
// (the rest of quorum reaches it through shm.hpp). Its parts:
//   shm_allreduce_task.cpp - set-up, the progress loop, cancel, timeouts
//   shm_chunk_steps.cpp    - one chunk's stages: post, reduce, finish
//   shm_copy_path.cpp      - the copy path through the slots
//   shm_direct_paths.cpp   - the zero-copy and cross-memory paths
//   shm_mismatch.cpp       - mismatched calls, crossings with collectives
//                            over messages, broken channels
//   shm_inline.cpp         - the blocking fast path (no schedule)
// A rank whose CollArgs say send_identity (a partial round joined with nothing
// posted) contributes the op's identity without it being in its buffer: it
// fills its slots with the identity, and on the zero-copy path it is left out
// of the sources (only its receive buffer must be symmetric).
//
// The task fails at once when a peer is known dead (transport->peer_failed) or
// when another rank marked the channel broken (its shm task failed or was
// aborted).
#pragma once

#include <atomic>
#include <cstdint>
#include <cstring>
#include <memory>
#include <string>
#include <vector>

#include <sys/types.h>

#include "collectives/algorithms/algorithm.hpp"
#include "collectives/patterns/blocks.hpp"
#include "collectives/reduce/streaming.hpp"
#include "collectives/scratch_pool.hpp"
#include "collectives/shm/shm_channel.hpp"
#include "runtime/progress/engine.hpp"
#include "runtime/progress/schedule.hpp"

namespace quorum {

class ShmAllreduceTask : public Task {
 public:
  // seq: the collective's sequence number on the communicator (kNoSequence:
  // none); scratch: for the signature exchange after a crossing (null: no
  // exchange). See shm_allreduce_inline (shm.hpp).
  ShmAllreduceTask(ShmChannel *ch, Transport *t, const CollArgs &a, uint64_t seq,
                   ScratchPool *scratch);

  TaskResult progress(Status *status) override;
  void cancel(Status why) override;

  // No message of the signature exchange (see start_crossing) in flight.
  bool quiescent() const override { return !crossing_ || crossing_->quiescent(); }
  // The exchange's receives would not settle: left allocated, with their
  // scratch, so that no late message lands in memory used again.
  void leak_crossing();

  // The rank a timeout names (the schedule's stall report).
  int peer() const override;

  // Whether the last progress() call moved any chunk forward.
  bool moved() const { return moved_; }

  // The first rank this one waits for (its posted, else reduced, flag for
  // the first unfinished chunk is behind), or -1: whom a timeout names.
  int lagging_rank() const;

  // Gives up after the timeout: the channel is broken naming `lagging`, so
  // that the other ranks report the same stalled rank.
  void time_out(int lagging);

  std::string describe() const override;

 private:
  enum : uint8_t { kIdle = 0, kPosted = 1, kReduced = 2, kDone = 3, kDirectReduced = 4 };
  // Copy: through the slots. ZeroCopy and CrossMemory (the direct paths):
  // straight between the ranks' buffers. A candidate's path is known once
  // every rank posted its first chunk.
  enum class Path : uint8_t { Copy, Undecided, ZeroCopy, CrossMemory };

  TaskResult failed(Status *status, Status s) {
    waiting_.release();
    *status = s;
    return TaskResult::Failed;
  }

  // Where chunk c of this op lies: its number g on the channel's stream, its
  // slot s, the tag its flags reach (g + 1) and its elements [off, off + n).
  struct Chunk {
    size_t c;
    uint64_t g;
    int s;
    uint64_t tag;
    size_t off, n;
  };
  Chunk chunk(size_t c) const;
  // What one stage of a chunk did (shm_chunk_steps.cpp): Waits for a flag
  // (step returns whether anything moved before), Stops (step returns false),
  // Ends (step returns true at once), Advances (the next stage may go on).
  enum class Outcome : uint8_t { Waits, Stops, Ends, Advances };

  // Advances chunk c as far as the flags allow; true if it moved.
  bool step(size_t c);
  // kIdle: once the slot is free on every rank, copy in (unless deferred) and post.
  Outcome post_chunk(const Chunk &k);
  // kPosted: once every rank posted, check signatures, take the op's path and
  // reduce (the whole chunk, or this rank's slice).
  Outcome reduce_chunk(const Chunk &k);
  // kDirectReduced: once every rank's slice is in, finish the op's chunks.
  Outcome finish_direct_chunk(const Chunk &k);
  // kReduced: once every rank's slice is in, copy the rest of the result out.
  Outcome copy_out_chunk(const Chunk &k);

  // A peer whose message-call line shows this collective's number (it runs
  // another collective, or this one over messages), or -1.
  int peer_over_messages();
  // Rank q runs collective seq_ over messages: the shm protocol cannot finish
  // (q never posts), so the channel is broken as a mismatch, and this rank
  // joins q's signature exchange at seq_ with its own call (over shared
  // memory), which every rank's verdict then shows to differ.
  void start_crossing(int q);
  // Runs the signature exchange started by start_crossing; its verdict (a
  // mismatch: this rank's call is marked as over shared memory) is the call's.
  TaskResult progress_crossing(Status *status);
  // The channel is broken (another rank's shm task failed, or this one's): the
  // call fails, as a mismatch where that broke it, after the signature
  // exchange with a rank over messages where one runs this collective.
  TaskResult progress_broken(Status *status);

  // Every rank's flag for slot s has reached `value`.
  bool all_reached(std::atomic<uint64_t> &(ShmChannel::*flag)(int, int), int s, uint64_t value) {
    for (int q = 0; q < ch_->size(); ++q) {
      if ((ch_->*flag)(q, s).load(std::memory_order_acquire) < value) return false;
    }
    return true;
  }

  // Every rank posted chunk `tag` in slot s; learns their done prefixes.
  bool all_posted(int s, uint64_t tag) {
    for (int q = 0; q < ch_->size(); ++q) {
      const uint64_t word = ch_->posted(q, s).load(std::memory_order_acquire);
      if ((word & ShmChannel::kTagMask) < tag) return false;
      if (q != ch_->rank()) ch_->learn_done_prefix(q, word);
    }
    return true;
  }

  // Every rank finished chunk g (its done flag for slot s shows tag g + 1): from
  // the prefix a posted word told, else from the done flag itself. The acquire
  // load that read that posted word orders the peer's reads of chunk g before
  // this rank's rewrite of the slot, as the done flag's would.
  bool all_finished(int s, uint64_t g) {
    for (int q = 0; q < ch_->size(); ++q) {
      if (ch_->peer_done_prefix(q) > g) continue;  // never learned of this rank itself
      if (ch_->done(q, s).load(std::memory_order_acquire) < g + 1) return false;
    }
    return true;
  }

  // The copy path (shm_copy_path.cpp).
  // This rank's input for chunk [off, off + n) into its slot s: the whole
  // chunk (replicated), or all but its own slice (sliced: nobody else reads
  // that part of its slot, this rank reduces it from its send buffer).
  void fill_slot(int s, size_t off, size_t n);
  // On the copy path, every rank's first-chunk input is in its slot s: those
  // whose descriptor says they posted without it (direct-path candidates)
  // have raised filled since. Reads the descriptors once.
  bool inputs_filled(int s, uint64_t tag);
  // recv[off, off + n) = the inputs of slot s reduced in rank order. This
  // rank's own input is read from the send buffer (the same bits as its slot)
  // unless in place, where the output would overwrite it first.
  void reduce_whole(int s, size_t off, size_t n);
  // This rank's slice of chunk k reduced into the result slot, then into its
  // receive buffer (sliced).
  void reduce_own_slice(const Chunk &k);

  // The part of an n-element chunk this rank reduces on the sliced path.
  patterns::Block own_slice(size_t n) const {
    return patterns::block(n, ch_->size(), ch_->rank(), patterns::align_elements(64, es_));
  }

  // The bytes of an n-element chunk before and after this rank's own slice,
  // src to dst, through copy(dst, src, bytes).
  template <typename Copy>
  void copy_outside_own_slice(uint8_t *dst, const uint8_t *src, size_t n, Copy copy) const {
    const auto mine = own_slice(n);
    copy(dst, src, mine.offset * es_);
    const size_t after = (mine.offset + mine.count) * es_;
    copy(dst + after, src + after, n * es_ - after);
  }

  // A result into a receive buffer: streaming stores for large messages.
  void copy_result(uint8_t *dst, const uint8_t *src, size_t bytes) const {
    if (streaming_) {
      copy_streaming(dst, src, bytes);
    } else {
      std::memcpy(dst, src, bytes);
    }
  }

  // Mismatched calls (shm_mismatch.cpp).
  // Every rank posted the same op (size, dtype, op) as its first chunk in slot
  // s; else error_ is QUORUM_ERR_MISMATCH naming the first rank that did not
  // (every rank reads the same signatures, so every rank fails), and nothing
  // of the op has been read or written outside this rank's own buffers.
  bool signatures_agree(int s);
  // A barrier's never equals an allreduce's (no dtype has that code).
  static constexpr uint64_t kBarrierSignature = ShmChannel::op_signature(0, 0xff, 0xff);
  uint64_t signature() const {
    return barrier_ ? kBarrierSignature : ShmChannel::op_signature(count_ * es_, dtype_, op_);
  }
  static std::string describe_signature(uint64_t signature);

  // The direct paths (shm_direct_paths.cpp).
  // This rank's first posted line: where its buffers lie, for the direct paths.
  void post_descriptor(int s);
  // Every rank's first posted line is read (each rank reads the same lines:
  // the same decision). Zero-copy when every rank's buffers lie in symmetric
  // regions (a rank contributing the identity needs only its receive buffer
  // there), else cross-memory when every rank offers it, else copy.
  void decide_path(int s);
  // out[0, n) = the n elements at source(0), ..., source(k - 1) reduced in
  // that order (the identity when k is 0), averaged over every rank for
  // QUORUM_AVG: a block of the direct paths' slice.
  template <typename Source>
  void reduce_block(uint8_t *out, size_t k, Source source, size_t n) const;
  // This rank's slice, block by block through a small buffer that stays in
  // cache, straight between the symmetric buffers.
  void reduce_zero_copy();
  // This rank's slice, as reduce_zero_copy, with the peers' buffers reached
  // by cross-memory attach.
  Status reduce_cross_memory();
  // A cross-memory copy from or to rank q; a failure names the rank (a dead
  // one as QUORUM_ERR_PEER_FAILED).
  Status read_peer(int q, uint64_t from, uint8_t *to, size_t bytes);
  Status write_peer(int q, uint64_t to, const uint8_t *from, size_t bytes);
  Status peer_copy_failed(int q, const char *verb, const char *buffer, size_t bytes, int err);
  // Every rank's slice is in: the op's chunks are finished here (the done
  // flags of the slots its last chunks map to let later chunks reuse them).
  void finish_direct();

  ShmChannel *ch_;
  Transport *t_;
  uint64_t seq_;          // on the communicator (kNoSequence: none)
  ScratchPool *scratch_;  // for the signature exchange (null: no exchange)
  std::vector<ScratchPool::Lease> crossing_leases_;  // outlive crossing_'s tasks
  std::unique_ptr<Schedule> crossing_;               // the signature exchange, once started
  Status crossing_status_ = kOk;
  const uint8_t *send_;
  uint8_t *recv_;
  size_t count_;
  quorum_dtype_t dtype_;
  quorum_op_t op_;
  size_t es_;
  size_t chunk_elems_ = 1;
  size_t nchunks_ = 0;
  uint64_t base_ = 0;
  size_t first_ = 0;  // the first chunk not done
  bool replicated_ = false;
  bool inline_payload_ = false;  // one chunk that fits beside its posted flag
  bool streaming_ = false;       // results written with streaming stores
  bool moved_ = false;
  bool fill_deferred_ = false;   // posted the first chunk without its input
  bool unfilled_known_ = false;  // unfilled_ read from the descriptors
  std::vector<int> unfilled_;    // ranks whose first-chunk input may not be in yet
  Path path_ = Path::Copy;
  bool zero_copy_candidate_ = false;
  ShmRegions::Location send_location_, recv_location_;  // in the symmetric regions (zero-copy)
  bool cross_memory_candidate_ = false;
  Status error_ = kOk;                // the direct paths' failure
  bool identity_ = false;             // this rank contributes the identity
  bool barrier_ = false;              // a barrier (one element): its own signature
  std::vector<uint8_t *> sources_;    // contributing ranks' send buffers (zero-copy)
  std::vector<uint8_t *> peer_recv_;  // every rank's receive buffer (zero-copy)
  struct Peer {
    pid_t pid = 0;
    uint64_t send = 0, recv = 0;  // addresses in that process
    bool contributes = false;     // its send buffer is read (not the identity)
  };
  std::vector<Peer> peers_;  // every rank (cross-memory)
  uint8_t stage_inline_[16];
  std::unique_ptr<uint8_t[]> stage_heap_;
  uint8_t *stage_ = stage_inline_;
  MemoryWaitGuard waiting_;
};

}  // namespace quorum
