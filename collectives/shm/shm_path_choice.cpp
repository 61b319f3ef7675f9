// shm_path_choice.cpp: times the shm allreduce's cross-memory path against
// its copy path once per communicator and keeps the faster.
//
// Which one wins depends on the host far more than on the size. On two hosts
// the cross-memory path measured 1.1-1.7x the copy path's bandwidth from
// 64 KiB to 16 MiB (2 ranks, out of place); on another, whose kernel copies
// from cache ran at a fifth of memcpy's speed (process_vm_readv 9-12 GB/s
// against 41-52; page pinning costs more than the copy there) while its cores
// passed lines between them quickly, it measured 0.5-0.7x from 256 KiB to
// 16 MiB and about even below. So one size decides for all: 1 MiB, where both
// ranks' buffers stay in cache, alternating the two paths in turns (the first
// ops of a turn warm the caches and are not timed) and comparing medians.
// It costs about 36 allreduces of 1 MiB (a few ms) per communicator and runs
// only where the automatic rule chose the cross-memory path; a rule on the
// system-call speed alone would miss the copy path's side.
#include "collectives/shm/shm_path_choice.hpp"

#include <algorithm>
#include <utility>

#include "collectives/algorithms/algorithm.hpp"
#include "collectives/shm/shm.hpp"
#include "runtime/clock.hpp"
#include "runtime/log.hpp"
#include "runtime/progress/engine.hpp"

namespace quorum {

Knob<bool> knob_shm_cross_memory_probe(
    "QUORUM_SHM_CROSS_MEMORY_PROBE", true,
    "shm allreduce: where QUORUM_SHM_CROSS_MEMORY_BYTES's automatic rule turns the cross-memory "
    "path on, time it against the copy path once per communicator (1 MiB allreduces, a few ms) "
    "and turn it off where copying is clearly faster, or take it out of place at every size "
    "where copying is far slower; off: the size rules alone");

namespace {

constexpr int kTurnsPerPath = 3;
constexpr int kUntimedPerTurn = 2;
constexpr int kTimedPerTurn = kProbeOpsPerPath / kTurnsPerPath - kUntimedPerTurn;

uint64_t median(std::vector<uint64_t> v) {
  std::nth_element(v.begin(), v.begin() + static_cast<long>(v.size() / 2), v.end());
  return v[v.size() / 2];
}

// The ranks' summed medians: cross-memory path, copy path.
std::pair<uint64_t, uint64_t> summed(const std::vector<uint64_t> &timings) {
  uint64_t cross_memory = 0, copy = 0;
  for (size_t i = 0; i + 1 < timings.size(); i += 2) {
    cross_memory += timings[i];
    copy += timings[i + 1];
  }
  return {cross_memory, copy};
}

}  // namespace

bool copy_path_wins(const std::vector<uint64_t> &timings) {
  const auto [cross_memory, copy] = summed(timings);
  return copy > 0 && cross_memory * 4 > copy * 5;
}

bool copy_path_far_slower(const std::vector<uint64_t> &timings) {
  const auto [cross_memory, copy] = summed(timings);
  return cross_memory > 0 && copy * 2 > cross_memory * 5;
}

Status choose_cross_memory_path(ShmChannel *ch, Transport *t, ProgressEngine &engine,
                                const ShmGroup &group, int64_t timeout_ms) {
  // The probe's ops (out of place) must be able to take the cross-memory path.
  if (!knob_shm_cross_memory_probe.get() || !ch->cross_memory_automatic() ||
      ch->cross_memory_bytes() > kProbeBytes ||
      ch->cross_memory_out_of_place_max_bytes() < kProbeBytes) {
    return kOk;
  }
  const size_t from = ch->cross_memory_bytes();
  const uint64_t cross_memory_ops_before = ch->cross_memory_ops();
  const size_t count = kProbeBytes / sizeof(float);
  std::vector<float> send(count, static_cast<float>(group.rank + 1)), recv(count);
  CollArgs a{CollKind::Allreduce, send.data(), recv.data(), count, QUORUM_FLOAT32, QUORUM_SUM, 0};
  const int64_t nap_us = std::max<int64_t>(1, knob_memory_nap_us.get());
  std::vector<uint64_t> times[2];  // cross memory, copy
  for (int turn = 0; turn < 2 * kTurnsPerPath; ++turn) {
    const int path = turn % 2;
    ch->set_cross_memory_bytes(path == 0 ? from : SIZE_MAX);
    for (int i = 0; i < kUntimedPerTurn + kTimedPerTurn; ++i) {
      const uint64_t start = now_ns();
      Status s = shm_allreduce_inline(ch, t, a, engine, timeout_ms, engine.spin_ns(), nap_us);
      if (s != kOk) {
        ch->set_cross_memory_bytes(from);
        return s;
      }
      if (i >= kUntimedPerTurn) times[path].push_back(now_ns() - start);
    }
  }
  const uint64_t mine[2] = {median(times[0]), median(times[1])};
  std::vector<uint64_t> all(2 * static_cast<size_t>(group.size));
  QUORUM_CHECK(group.allgather(mine, all.data(), sizeof(mine)));
  const bool copy = copy_path_wins(all);
  const bool unlimited = ch->cross_memory_out_of_place_max_automatic() && copy_path_far_slower(all);
  ch->set_cross_memory_bytes(copy ? SIZE_MAX : from);
  if (unlimited) ch->set_cross_memory_out_of_place_max_bytes(SIZE_MAX);
  ch->set_path_probe(
      {true, copy, unlimited, mine[0], mine[1], ch->cross_memory_ops() - cross_memory_ops_before});
  QLOG_INFO("shm",
            "allreduce of {} B on ordinary buffers: cross-memory path {:.1f} us, copy path "
            "{:.1f} us (median, rank {}); {}",
            kProbeBytes, mine[0] / 1e3, mine[1] / 1e3, group.rank,
            copy ? "copying (cross-memory attach off)"
                 : fmt::format("cross-memory attach from {} B{}", from,
                               unlimited ? ", out of place at every size" : ""));
  return kOk;
}

}  // namespace quorum
