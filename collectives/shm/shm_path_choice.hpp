// shm_path_choice.hpp: which way the shm allreduce moves ordinary buffers on
// this host, cross-memory attach or copies through the segment, chosen by
// timing both once when a communicator is made.
#pragma once

#include <cstdint>
#include <vector>

#include "runtime/knobs.hpp"
#include "runtime/shm_segment.hpp"
#include "runtime/status.hpp"

namespace quorum {

class ProgressEngine;
class ShmChannel;
class Transport;

extern Knob<bool> knob_shm_cross_memory_probe;

// Collective over the channel's ranks (every rank calls it right after the
// channel's creation, before any other op on it). Where the automatic rule
// turned the cross-memory path on (ShmChannel::cross_memory_automatic) for
// out-of-place messages of kProbeBytes and QUORUM_SHM_CROSS_MEMORY_PROBE is
// on, runs such allreduces on each path in turns, gathers every rank's median
// per path, and turns the cross-memory path off when copy_path_wins says so,
// or lifts its out-of-place limit (where that is automatic) when
// copy_path_far_slower says so. Otherwise changes nothing. Fails only as the
// allreduces or the gather fail.
Status choose_cross_memory_path(ShmChannel *ch, Transport *t, ProgressEngine &engine,
                                const ShmGroup &group, int64_t timeout_ms);

// The probe's allreduce size and how many of its ops take each path.
constexpr size_t kProbeBytes = size_t{1} << 20;
constexpr int kProbeOpsPerPath = 18;

// timings: per rank, the median op time on the cross-memory path, then on the
// copy path (ns). True when the copy path is clearly faster: the ranks' summed
// cross-memory time exceeds the copy path's by more than a quarter (a margin
// above the probe's noise; within it the cross-memory path, the size rule's
// choice, stays).
bool copy_path_wins(const std::vector<uint64_t> &timings);

// Same timings. True when the copy path is far slower: more than 2.5 times the
// cross-memory path's summed time. Then the cores pass lines between them
// slowly (on one host the two vCPUs' round trip went from ~130 ns to ~550 ns
// for seconds at a time, and the copy path fell to 1.6-2.0 GB/s at every size
// while the cross-memory path kept 3.6-3.7 at 16-64 MiB out of place), and
// the cross-memory path is taken out of place at every size. On hosts where
// it merely wins (1.1-1.7x) the copy path stays faster above the out-of-place
// limit.
bool copy_path_far_slower(const std::vector<uint64_t> &timings);

}  // namespace quorum
