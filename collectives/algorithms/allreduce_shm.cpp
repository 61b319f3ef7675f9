// allreduce_shm.cpp: allreduce through a shared-memory segment, for
// communicators whose ranks are all processes of this host.
//
// Per chunk (see allreduce_shm.hpp for the flags): every rank copies its input
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
//
// The task never blocks: it polls the flags and returns Pending. It fails at
// once when a peer is known dead (transport->peer_failed) or when another rank
// marked the channel broken (its shm task failed or was aborted).
#include "collectives/algorithms/allreduce_shm.hpp"

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstring>
#include <optional>
#include <thread>
#include <vector>

#include <unistd.h>

#include "collectives/algorithms/algorithms.hpp"
#include "collectives/patterns/blocks.hpp"
#include "collectives/reduce/reduce_kernels.hpp"
#include "collectives/reduce/streaming.hpp"
#include "collectives/signature.hpp"
#include "runtime/clock.hpp"
#include "runtime/cross_memory.hpp"
#include "runtime/log.hpp"
#include "runtime/progress/engine.hpp"
#include "runtime/topology.hpp"

namespace quorum {

Knob<bool> knob_shm("QUORUM_SHM", true,
                    "Map a shared-memory segment for communicators whose ranks are all "
                    "processes of this host (ucx), used by the shm allreduce");
Knob<int64_t> knob_shm_chunk_bytes("QUORUM_SHM_CHUNK_BYTES", 512 * 1024,
                                   "shm allreduce: bytes per chunk (one slot); chunks are "
                                   "pipelined two at a time");
Knob<int64_t> knob_shm_replicated_bytes(
    "QUORUM_SHM_REPLICATED_BYTES", 16384,
    "shm allreduce: chunks up to this size (and on 2 ranks a message of one chunk up to "
    "64 KiB) are reduced whole by every rank (one flag round trip) instead of 1/P per rank");
Knob<int64_t> knob_shm_zero_copy_bytes(
    "QUORUM_SHM_ZERO_COPY_BYTES", 65536,
    "shm allreduce: messages of at least this size whose buffers every rank allocated with "
    "quorum_mem_alloc are reduced straight between the ranks' buffers (no copy in or out); "
    "0: never");
Knob<int64_t> knob_shm_cross_memory_bytes(
    "QUORUM_SHM_CROSS_MEMORY_BYTES", -1,
    "shm allreduce: messages of at least this size whose buffers are not all symmetric are "
    "reduced straight between the ranks' buffers with cross-memory attach (process_vm_readv/"
    "writev; no copy in or out), where the ranks may attach to each other. -1: 32 KiB x "
    "ranks (64 KiB on 2), at most 1 MiB, when every rank of this host has a core of its "
    "own, else 1 MiB (ranks that share cores do better copying below that); 0: never");
Knob<int64_t> knob_shm_cross_memory_out_of_place_max_bytes(
    "QUORUM_SHM_CROSS_MEMORY_OUT_OF_PLACE_MAX_BYTES", -1,
    "shm allreduce: out-of-place messages above this size copy instead of taking the "
    "cross-memory path (its writes to the peers' receive buffers read every line first, which "
    "costs more than the copies once the buffers are well out of the cache). -1: twice "
    "QUORUM_SHM_STREAMING_BYTES's default (the cache's size / ranks, at most 16 MiB); 0: no "
    "limit");
Knob<int64_t> knob_shm_cross_memory_block_bytes(
    "QUORUM_SHM_CROSS_MEMORY_BLOCK_BYTES", 128 * 1024,
    "shm allreduce, cross-memory path: bytes read from each peer per system call (the blocks "
    "are reduced in a buffer that should stay in cache)");
Knob<int64_t> knob_shm_streaming_bytes(
    "QUORUM_SHM_STREAMING_BYTES", -1,
    "shm allreduce: out-of-place messages of at least this size write their results with "
    "streaming (non-temporal) stores, which skip the read of every written line; that pays "
    "once the ranks' send and receive buffers exceed the last-level cache (in place the "
    "written lines were just read: never). -1: from that point, the cache's size / "
    "(2 x ranks), at most 8 MiB (a virtual machine reports its host's whole cache, which "
    "other tenants share); 0: never");
Knob<int64_t> knob_shm_max_bytes("QUORUM_SHM_MAX_BYTES", 64 << 20,
                                 "Largest shared-memory segment per communicator; the chunk "
                                 "shrinks to fit (P + 1) x 2 slots");

namespace {

// The out-of-place message size from which every rank's send and receive
// buffer together fill the last-level cache: streaming stores pay from there.
// Capped: in a virtual machine the cache hwloc reports is the host's, shared
// with other tenants. Out of place on 2 ranks, on one reporting 300 MiB:
// streaming measured 7% faster at 8 MiB and 20-30% at 32-64 MiB than without.
// The cross-memory path's writes into the peers' receive buffers read each
// line first; it stops paying at twice that size (there the lines it writes
// were written by the last call and may still be in the shared cache). At
// 16 MiB it measured 0.98-1.22x the copy path's speed (six runs, one host;
// two earlier hosts 0.83x and 0.97x), at 32 MiB 0.86-0.98x, at 8 MiB 1.09-1.26x.
size_t out_of_place_beyond_cache_bytes(int ranks) {
  constexpr size_t kMaxBytes = size_t{8} << 20;
  TopologyInfo topo;
  const uint64_t llc = query_topology(&topo) == kOk ? topo.last_level_cache_bytes : 0;
  return llc > 0 ? std::clamp<size_t>(llc / (2 * static_cast<size_t>(ranks)), 64 << 10, kMaxBytes)
                 : kMaxBytes;
}

// Whether this host has a core for each of its `ranks` ranks (a rank bound
// to fewer CPUs counts as sharing them). On 2 ranks with a core each, the
// cross-memory path measured 1.10-1.46x the copy path's bandwidth out of place
// and 1.43-1.71x in place at 64-256 KiB; 4 ranks on 2 cores 0.80-0.97x there.
bool ranks_have_own_cores(int ranks) {
  return usable_core_count() >= ranks;
}

}  // namespace

Status ShmChannel::create(const ShmGroup &group, std::unique_ptr<ShmChannel> *out,
                          std::shared_ptr<ShmRegions> regions) {
  out->reset();
  const int p = group.size;
  constexpr int kSlots = 2;
  // broken, 4 flags per rank and slot, a message-call line per rank.
  const size_t flag_lines = 1 + 4 * static_cast<size_t>(p) * kSlots + static_cast<size_t>(p);
  const size_t header = (flag_lines * kLine + 4095) / 4096 * 4096;
  const size_t budget = static_cast<size_t>(std::max<int64_t>(0, knob_shm_max_bytes.get()));
  size_t chunk = static_cast<size_t>(std::max<int64_t>(4096, knob_shm_chunk_bytes.get()));
  const size_t nslots = static_cast<size_t>(p + 1) * kSlots;
  if (budget > header) chunk = std::min(chunk, (budget - header) / nslots);
  chunk = chunk / 4096 * 4096;
  if (chunk < 4096) {
    QLOG_INFO("shm", "no shared-memory segment: QUORUM_SHM_MAX_BYTES {} is too small for {} ranks",
              budget, p);
    return kOk;
  }
  std::unique_ptr<ShmSegment> seg;
  QUORUM_CHECK(ShmSegment::create(group, header + nslots * chunk, &seg));
  if (!seg) return kOk;
  std::unique_ptr<ShmChannel> ch(new ShmChannel());
  ch->segment_ = std::move(seg);
  ch->regions_ = regions ? std::move(regions) : std::make_shared<ShmRegions>();
  ch->data_ = ch->segment_->data() + header;
  ch->rank_ = group.rank;
  ch->size_ = p;
  ch->slots_ = kSlots;
  ch->chunk_bytes_ = chunk;
  ch->peer_done_.reset(new std::atomic<uint64_t>[static_cast<size_t>(p)]);
  for (int q = 0; q < p; ++q) ch->peer_done_[static_cast<size_t>(q)].store(0);
  ch->replicated_bytes_ =
      static_cast<size_t>(std::max<int64_t>(0, knob_shm_replicated_bytes.get()));
  // Below a few KiB the replicated path (one flag round trip) is faster.
  const int64_t zero_copy = knob_shm_zero_copy_bytes.get();
  ch->zero_copy_bytes_ = zero_copy <= 0 ? SIZE_MAX : std::max<size_t>(4096, zero_copy);
  // Collective: every rank takes part; one whose knob says never turns it off for all.
  int64_t cross_memory = knob_shm_cross_memory_bytes.get();
  const bool automatic = cross_memory < 0 && ranks_have_own_cores(p);
  // Per rank and block, 2 (P - 1) system calls move 1/P of the message each:
  // the threshold grows with P, up to the 1 MiB ranks that share cores use.
  if (cross_memory < 0) {
    cross_memory = automatic ? std::min<int64_t>(int64_t{32 << 10} * p, 1 << 20) : 1 << 20;
  }
  bool attach = false;
  QUORUM_CHECK(probe_cross_memory(group, cross_memory > 0, &attach));
  ch->cross_memory_bytes_ = !attach ? SIZE_MAX : std::max<size_t>(4096, cross_memory);
  ch->cross_memory_automatic_ = attach && automatic;
  ch->cross_memory_block_bytes_ =
      static_cast<size_t>(std::max<int64_t>(4096, knob_shm_cross_memory_block_bytes.get()));
  // Both knobs below: -1 derives from the out-of-place size from which the
  // ranks' buffers leave the cache, 0 is "never" (no limit), else the size given.
  const size_t beyond_cache = out_of_place_beyond_cache_bytes(p);
  auto size_knob = [](int64_t v, size_t automatic) {
    return v < 0 ? automatic : v == 0 ? SIZE_MAX : static_cast<size_t>(v);
  };
  ch->cross_memory_out_of_place_max_bytes_ =
      size_knob(knob_shm_cross_memory_out_of_place_max_bytes.get(), 2 * beyond_cache);
  ch->cross_memory_out_of_place_max_automatic_ =
      knob_shm_cross_memory_out_of_place_max_bytes.get() < 0;
  ch->streaming_bytes_ = size_knob(knob_shm_streaming_bytes.get(), beyond_cache);
  QLOG_INFO("shm",
            "shared-memory segment of {} B ({} ranks, chunk {} B, streaming stores from {} B, "
            "cross-memory attach {})",
            ch->segment_->size(), p, chunk, ch->streaming_bytes_,
            attach ? fmt::format("from {} B", ch->cross_memory_bytes_) : std::string("off"));
  *out = std::move(ch);
  return kOk;
}

void ShmChannel::finish_chunks(uint64_t from, uint64_t to) {
  uint64_t cur = done_prefix_.load(std::memory_order_seq_cst);
  while (cur >= from && cur < to) {
    // In order (the common case): no lock. Then take over ranges that waited
    // for this one; seq_cst pairs this CAS and that load with the other
    // branch's count store and prefix load, so one of the two sees the other.
    if (done_prefix_.compare_exchange_weak(cur, to, std::memory_order_seq_cst)) {
      if (ahead_count_.load(std::memory_order_seq_cst) == 0) return;
      std::lock_guard<std::mutex> lock(ahead_mutex_);
      absorb_ahead_locked();
      return;
    }
  }
  if (cur >= to) return;  // already covered
  std::lock_guard<std::mutex> lock(ahead_mutex_);
  uint64_t &end = ahead_[from];
  end = std::max(end, to);
  ahead_count_.store(ahead_.size(), std::memory_order_seq_cst);
  absorb_ahead_locked();
}

void ShmChannel::absorb_ahead_locked() {
  while (!ahead_.empty()) {
    auto first = ahead_.begin();
    uint64_t cur = done_prefix_.load(std::memory_order_seq_cst);
    if (first->first > cur) return;
    const uint64_t end = first->second;
    ahead_.erase(first);
    ahead_count_.store(ahead_.size(), std::memory_order_seq_cst);
    while (cur < end && !done_prefix_.compare_exchange_weak(cur, end, std::memory_order_seq_cst)) {
    }
  }
}

namespace {

// On 2 ranks, a message of one chunk up to this size is replicated. Beyond it
// slicing measured faster in place and about as fast out of place (2 ranks,
// medians of 5-6 alternating runs): at 512 KiB 16.0 against 6.3 GB/s in place
// and 15.2 against 16.4 out of place; at 256 KiB 7.2 against 5.6 and 6.9
// against 5.9; at 128 KiB 5.8 against 5.2 and 5.6 against 5.5.
constexpr size_t kOneChunkReplicatedBytes = 64 << 10;

class ShmAllreduceTask : public Task {
 public:
  // seq, scratch: see shm_allreduce_inline.
  ShmAllreduceTask(ShmChannel *ch, Transport *t, const CollArgs &a, uint64_t seq,
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
    // data (see the top of this file). Every rank must choose the same, so the
    // choice cannot depend on whether this rank's call is in place (a partial
    // round can be in place on one rank and not on another).
    const bool one_chunk_2_ranks =
        ch->size() == 2 && nchunks_ == 1 && count_ * es_ <= kOneChunkReplicatedBytes;
    replicated_ =
        one_chunk_2_ranks || std::min(count_, chunk_elems_) * es_ <= ch->replicated_bytes();
    inline_payload_ = replicated_ && count_ * es_ <= ShmChannel::kInlinePayload;
    // A candidate for a direct path offers it in its first posted line; the
    // path is taken when every rank offers it (see decide_path).
    // Zero-copy only where this rank's own buffers are symmetric: elsewhere no
    // rank can take it (and this one fills its slot at once, see kIdle).
    if (count_ * es_ >= ch->zero_copy_bytes()) {
      send_location_ = ch->regions().locate(send_, count_ * es_);
      recv_location_ = ch->regions().locate(recv_, count_ * es_);
      zero_copy_candidate_ =
          recv_location_.region != 0 && (identity_ || send_location_.region != 0);
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

  TaskResult progress(Status *status) override {
    if (crossing_) return progress_crossing(status);
    if (ch_->broken()) {
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

  void cancel(Status why) override {
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

  // No message of the signature exchange (see start_crossing) in flight.
  bool quiescent() const override { return !crossing_ || crossing_->quiescent(); }
  // The exchange's receives would not settle: left allocated, with their
  // scratch, so that no late message lands in memory used again.
  void leak_crossing() {
    QLOG_ERROR("shm",
               "rank {}: the signature exchange of collective #{} did not stop; left "
               "allocated",
               ch_->rank(), seq_);
    (void)crossing_.release();
    (void)new std::vector<ScratchPool::Lease>(std::move(crossing_leases_));
  }

  // The rank a timeout names (the schedule's stall report).
  int peer() const override {
    if (crossing_) {
      const std::vector<int> peers = crossing_->waiting_peers();
      return peers.empty() ? -1 : peers.front();
    }
    return lagging_rank();
  }

  // Whether the last progress() call moved any chunk forward.
  bool moved() const { return moved_; }

  // The first rank this one waits for (its posted, else reduced, flag for
  // the first unfinished chunk is behind), or -1: whom a timeout names.
  int lagging_rank() const {
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

  // Gives up after the timeout: the channel is broken naming `lagging`, so
  // that the other ranks report the same stalled rank.
  void time_out(int lagging) {
    if (crossing_) {
      cancel(QUORUM_ERR_TIMEOUT);
      return;
    }
    if (first_ < nchunks_) ch_->set_broken(QUORUM_ERR_TIMEOUT, lagging);
    waiting_.release();
  }

  std::string describe() const override {
    if (crossing_) {
      return fmt::format("shm {} #{}: signature exchange with ranks over messages: {}",
                         barrier_ ? "barrier" : "allreduce", seq_, crossing_->stall_report());
    }
    return fmt::format("shm {} chunk {} of {} (stage {})", barrier_ ? "barrier" : "allreduce",
                       first_, nchunks_, first_ < nchunks_ ? int{stage_[first_]} : int{kDone});
  }

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

  // A peer whose message-call line shows this collective's number (it runs
  // another collective, or this one over messages), or -1.
  int peer_over_messages() {
    if (seq_ == kNoSequence || scratch_ == nullptr) return -1;
    for (int q = 0; q < ch_->size(); ++q) {
      if (q != ch_->rank() && ch_->in_message_call(q, seq_)) return q;
    }
    return -1;
  }

  // Rank q runs collective seq_ over messages: the shm protocol cannot finish
  // (q never posts), so the channel is broken as a mismatch, and this rank
  // joins q's signature exchange at seq_ with its own call (over shared
  // memory), which every rank's verdict then shows to differ.
  void start_crossing(int q) {
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

  // Runs the signature exchange started by start_crossing; its verdict (a
  // mismatch: this rank's call is marked as over shared memory) is the call's.
  TaskResult progress_crossing(Status *status) {
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

  // Advances chunk c as far as the flags allow; true if it moved.
  bool step(size_t c) {
    const uint64_t g = base_ + c;
    const int slots = ch_->slots();
    const int s = static_cast<int>(g % static_cast<uint64_t>(slots));
    const uint64_t tag = g + 1;
    const size_t off = c * chunk_elems_;
    const size_t n = std::min(chunk_elems_, count_ - off);
    const int me = ch_->rank(), p = ch_->size();
    bool moved = false;
    if (error_ != kOk) return false;
    if (path_ != Path::Copy && c > 0) return false;  // only the first chunk, if any
    if (stage_[c] == kIdle) {
      // The slot's previous chunk (g - S) must be finished on every rank.
      if (g >= static_cast<uint64_t>(slots) && !all_finished(s, g - static_cast<uint64_t>(slots))) {
        return false;
      }
      // A direct-path candidate copies its first chunk in only if the copy
      // path is taken after all (see kPosted).
      fill_deferred_ = c == 0 && path_ == Path::Undecided;
      if (!fill_deferred_) fill_slot(s, off, n);
      if (c == 0) {
        ch_->posted_signature(me, s).store(signature(), std::memory_order_relaxed);
      }
      if (c == 0 && !inline_payload_) {
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
        std::memcpy(ch_->posted_payload(me, s), &d, sizeof(d));
      }
      ch_->posted(me, s).store(ShmChannel::posted_word(tag, ch_->done_prefix()),
                               std::memory_order_release);
      stage_[c] = kPosted;
      moved = true;
    }
    if (stage_[c] == kPosted) {
      if (!all_posted(s, tag)) return moved;
      if (c == 0 && !signatures_agree(s)) return false;
      if (path_ == Path::Undecided) {
        decide_path(s);
        if (error_ != kOk) return false;
        if (path_ != Path::Copy) {
          if (path_ == Path::ZeroCopy) {
            reduce_zero_copy();
          } else {
            error_ = reduce_cross_memory();
            if (error_ != kOk) return false;
          }
          ch_->reduced(me, s).store(tag, std::memory_order_release);
          stage_[c] = kDirectReduced;
          return true;
        }
        if (fill_deferred_) {
          fill_slot(s, off, n);
          ch_->filled(me, s).store(tag, std::memory_order_release);
          fill_deferred_ = false;
          moved = true;
        }
      }
      if (c == 0 && !inline_payload_ && !inputs_filled(s, tag)) return moved;
      if (replicated_) {
        reduce_whole(s, off, n);
        ch_->done(me, s).store(tag, std::memory_order_release);
        // No wait for the peers to finish: slot s is rewritten only once
        // every rank's done flag shows it (the check before the copy in).
        stage_[c] = kDone;
        return true;
      }
      auto slice = own_slice(n);
      if (slice.count > 0) {
        const size_t at = slice.offset * es_;
        auto src = [&](int q) -> const uint8_t * {
          if (q == me && !identity_) return send_ + off * es_ + at;
          return ch_->input(q, s) + at;
        };
        // Into the result slot first (in place, the receive buffer is this
        // rank's input), then into the receive buffer while still in cache.
        uint8_t *res = ch_->result(s) + at;
        reduce_out(res, src(0), src(1), slice.count, dtype_, op_);
        for (int q = 2; q < p; ++q) reduce_into(res, src(q), slice.count, dtype_, op_);
        if (op_ == QUORUM_AVG) scale_average(res, slice.count, dtype_, p);
        copy_result(recv_ + off * es_ + at, res, slice.count * es_);
      }
      ch_->reduced(me, s).store(tag, std::memory_order_release);
      stage_[c] = kReduced;
      moved = true;
    }
    if (stage_[c] == kDirectReduced) {
      if (!all_reached(&ShmChannel::reduced, s, tag)) return moved;
      // finish_direct claims the slots of this op's last chunks: an earlier
      // op's chunk there (one still waiting on a peer, while this op went
      // ahead without slots) must be finished here first, or its later done
      // flag would go back below ours and a peer could rewrite the slot under it.
      if (ch_->done_prefix() < base_) return moved;
      finish_direct();
      return true;
    }
    if (stage_[c] == kReduced) {
      if (!all_reached(&ShmChannel::reduced, s, tag)) return moved;
      // The other ranks' slices (this rank's own is in place already).
      copy_outside_own_slice(
          recv_ + off * es_, ch_->result(s), n,
          [this](uint8_t *d, const uint8_t *f, size_t b) { copy_result(d, f, b); });
      ch_->done(me, s).store(tag, std::memory_order_release);
      stage_[c] = kDone;
      moved = true;
    }
    return moved;
  }

  // This rank's input for chunk [off, off + n) into its slot s: the whole
  // chunk (replicated), or all but its own slice (sliced: nobody else reads
  // that part of its slot, this rank reduces it from its send buffer).
  void fill_slot(int s, size_t off, size_t n) {
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

  // Every rank posted the same op (size, dtype, op) as its first chunk in slot
  // s; else error_ is QUORUM_ERR_MISMATCH naming the first rank that did not
  // (every rank reads the same signatures, so every rank fails), and nothing
  // of the op has been read or written outside this rank's own buffers.
  bool signatures_agree(int s) {
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
  // A barrier's never equals an allreduce's (no dtype has that code).
  static constexpr uint64_t kBarrierSignature = ShmChannel::op_signature(0, 0xff, 0xff);
  uint64_t signature() const {
    return barrier_ ? kBarrierSignature : ShmChannel::op_signature(count_ * es_, dtype_, op_);
  }
  static std::string describe_signature(uint64_t signature) {
    if (signature == kBarrierSignature) return "barrier";
    const auto dtype = static_cast<quorum_dtype_t>((signature >> 48) & 0xff);
    const auto op = static_cast<quorum_op_t>(signature >> 56);
    const uint64_t bytes = signature & ShmChannel::kTagMask;
    const size_t es = dtype_size(dtype);
    return es == 0 ? fmt::format("allreduce({} B, dtype {}, op {})", bytes, int{dtype}, int{op})
                   : fmt::format("allreduce(count={}, {}, {})", bytes / es, dtype_name(dtype),
                                 op_name(op));
  }

  // On the copy path, every rank's first-chunk input is in its slot s: those
  // whose descriptor says they posted without it (direct-path candidates)
  // have raised filled since. Reads the descriptors once.
  bool inputs_filled(int s, uint64_t tag) {
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

  // recv[off, off + n) = the inputs of slot s reduced in rank order. This
  // rank's own input is read from the send buffer (the same bits as its slot)
  // unless in place, where the output would overwrite it first.
  void reduce_whole(int s, size_t off, size_t n) {
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

  // Every rank's first posted line is read (each rank reads the same lines:
  // the same decision). Zero-copy when every rank's buffers lie in symmetric
  // regions (a rank contributing the identity needs only its receive buffer
  // there), else cross-memory when every rank offers it, else copy.
  void decide_path(int s) {
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

  // out[0, n) = the n elements at source(0), ..., source(k - 1) reduced in
  // that order (the identity when k is 0), averaged over every rank for
  // QUORUM_AVG: a block of the direct paths' slice.
  template <typename Source>
  void reduce_block(uint8_t *out, size_t k, Source source, size_t n) const {
    if (k == 0) {
      fill_identity(out, n, dtype_, op_);
    } else if (k == 1) {
      std::memcpy(out, source(0), n * es_);
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
  void reduce_zero_copy() {
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
  Status reduce_cross_memory() {
    const int me = ch_->rank(), p = ch_->size();
    auto slice = own_slice(count_);
    const size_t block = std::max<size_t>(1, ch_->cross_memory_block_bytes() / es_);
    const size_t block_bytes = block * es_;
    // Slot 0 holds the result; slot 1 + i the i-th contributing peer's part.
    std::unique_ptr<uint8_t[]> tmp(new uint8_t[block_bytes * static_cast<size_t>(p)]);
    uint8_t *acc = tmp.get();
    std::vector<const uint8_t *> src;
    for (size_t o = slice.offset; o < slice.offset + slice.count; o += block) {
      const size_t n = std::min(block, slice.offset + slice.count - o);
      const size_t at = o * es_;
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
          copy_result(recv_ + at, acc, n * es_);
        } else {
          QUORUM_CHECK(write_peer(q, peers_[static_cast<size_t>(q)].recv + at, acc, n * es_));
        }
      }
    }
    return kOk;
  }

  // A cross-memory copy from or to rank q; a failure names the rank (a dead
  // one as QUORUM_ERR_PEER_FAILED).
  Status read_peer(int q, uint64_t from, uint8_t *to, size_t bytes) {
    const int err = cross_memory_read(peers_[static_cast<size_t>(q)].pid, from, to, bytes);
    return err == 0 ? kOk : peer_copy_failed(q, "read from", "send", bytes, err);
  }
  Status write_peer(int q, uint64_t to, const uint8_t *from, size_t bytes) {
    const int err = cross_memory_write(peers_[static_cast<size_t>(q)].pid, to, from, bytes);
    return err == 0 ? kOk : peer_copy_failed(q, "write to", "receive", bytes, err);
  }
  Status peer_copy_failed(int q, const char *verb, const char *buffer, size_t bytes, int err) {
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

  // Every rank's slice is in: the op's chunks are finished here (the done
  // flags of the slots its last chunks map to let later chunks reuse them).
  void finish_direct() {
    const int me = ch_->rank();
    const size_t slots = static_cast<size_t>(ch_->slots());
    for (size_t c = nchunks_ > slots ? nchunks_ - slots : 0; c < nchunks_; ++c) {
      const uint64_t g = base_ + c;
      ch_->done(me, static_cast<int>(g % slots)).store(g + 1, std::memory_order_release);
    }
    std::fill(stage_, stage_ + nchunks_, uint8_t{kDone});
  }

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

Status shm_allreduce_inline(ShmChannel *ch, Transport *t, const CollArgs &a, ProgressEngine &engine,
                            int64_t timeout_ms, uint64_t spin_ns, int64_t nap_us, uint64_t seq,
                            ScratchPool *scratch) {
  ShmAllreduceTask task(ch, t, a, seq, scratch);
  Status status = kOk;
  // Clocks are read only after polls that moved nothing (in a VM a clock read
  // costs as much as a flag round trip); the deadline starts at the first.
  uint64_t stalled_since = 0;
  int64_t nap_max_us = -1;  // read at the first nap (not on the fast path)
  std::optional<Deadline> deadline;
  for (unsigned polls = 0;; ++polls) {
    TaskResult r = task.progress(&status);
    if (r == TaskResult::Done) return kOk;
    if (r == TaskResult::Failed) return status;
    // Now and then: the transport (it notices dead peers) and other requests
    // (an earlier non-blocking shm allreduce must finish before this one can).
    bool moved = task.moved() || ((polls & 63) == 63 && engine.progress_once());
    if (moved) {
      stalled_since = 0;
      continue;
    }
    if ((polls & 15) != 15) continue;
    const uint64_t now = now_ns();
    if (stalled_since == 0) stalled_since = now;
    if (!deadline) deadline = Deadline::after_ms(timeout_ms);
    if (deadline->expired()) {
      const int lagging = task.lagging_rank();
      task.time_out(lagging);
      // The signature exchange's receives must be settled before its scratch
      // goes back to the pool (bounded: a transport that never cancels them
      // is stuck anyway).
      const Deadline settle = Deadline::after_ms(1000);
      while (!task.quiescent() && !settle.expired()) engine.progress_once();
      if (!task.quiescent()) task.leak_crossing();
      return fail(QUORUM_ERR_TIMEOUT, "progress",
                  "{} on rank {} timed out after {} ms; waiting for rank {}: {}",
                  a.kind == CollKind::Barrier ? std::string("barrier (shm)")
                                              : fmt::format("allreduce (shm, count {})", a.count),
                  ch->rank(), timeout_ms, lagging, task.describe());
    }
    if (now - stalled_since > spin_ns) {
      if (nap_max_us < 0) nap_max_us = knob_memory_nap_max_us.get();
      const int64_t us = memory_nap_us(now - stalled_since, nap_us, nap_max_us);
      std::this_thread::sleep_for(std::chrono::microseconds(us));
    }
  }
}

Status build_allreduce_shm(Builder &b, const CollArgs &a, TaskId *last) {
  ShmChannel *ch = b.shm();
  if (ch == nullptr || ch->size() != b.size()) {
    return fail(QUORUM_ERR_UNSUPPORTED, "allreduce",
                "shm allreduce needs every rank on this host over ucx (no shared-memory segment)");
  }
  // On a partial object's channel (rounds numbered on their own) nobody notes
  // message calls, so its ops never join an exchange.
  *last =
      b.add(std::make_unique<ShmAllreduceTask>(ch, b.transport(), a, b.seq(), &b.scratch_pool()));
  return kOk;
}

}  // namespace quorum
