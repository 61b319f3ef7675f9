// shm_channel.cpp: the shared-memory channel's creation (its segment and the
// sizes its knobs give every path) and the done-prefix bookkeeping.
#include "collectives/shm/shm_channel.hpp"

#include <algorithm>
#include <string>

#include "runtime/cross_memory.hpp"
#include "runtime/log.hpp"
#include "runtime/topology.hpp"

namespace quorum {

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
// 64 KiB: on 2 ranks (512 KiB L2 per core) in place at 16 MiB 1.06-1.07x the
// busbw of 128 KiB blocks, the same within noise from 1 to 8 MiB.
Knob<int64_t> knob_shm_cross_memory_block_bytes(
    "QUORUM_SHM_CROSS_MEMORY_BLOCK_BYTES", 64 * 1024,
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

// Whether the group's ranks have a core each: the cores their affinity masks
// cover together (group.cores, the same on every rank), or where that is
// unknown this process's usable cores (a rank bound to fewer CPUs then counts
// as sharing them). Ranks bound core per rank (mpirun's and srun's default)
// have one each. On 2 ranks with a core each, the cross-memory path measured
// 1.10-1.46x the copy path's bandwidth out of place and 1.43-1.71x in place
// at 64-256 KiB; 4 ranks on 2 cores 0.80-0.97x there.
bool ranks_have_own_cores(const ShmGroup &group) {
  return (group.cores > 0 ? group.cores : usable_core_count()) >= group.size;
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
  const bool automatic = cross_memory < 0 && ranks_have_own_cores(group);
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

}  // namespace quorum
