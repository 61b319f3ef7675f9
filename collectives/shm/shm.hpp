// shm.hpp: the face of intra-host shared memory (collectives/shm/), the one
// header the rest of quorum includes. Every rank of a group that lives on this
// host maps one channel (shm_channel.hpp); an allreduce or a barrier over its
// ranks then moves through that segment instead of messages: copies through
// its slots (shm_copy_path.cpp), or straight between the ranks' buffers
// (shm_direct_paths.cpp), as chosen per op and once per communicator
// (shm_path_choice.hpp). Whether shared memory carries a call is decided
// here only (shm_use.cpp): the communicator, the algorithm table, the barrier
// fast path and the partial rounds ask these functions.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>

#include "collectives/algorithms/algorithm.hpp"
#include "collectives/scratch_pool.hpp"
#include "collectives/shm/shm_channel.hpp"
#include "collectives/shm/shm_path_choice.hpp"
#include "collectives/shm/shm_regions.hpp"
#include "runtime/knobs.hpp"
#include "runtime/progress/schedule.hpp"

namespace quorum {

class ProgressEngine;
class Transport;

extern Knob<bool> knob_shm;

// Whether shared memory carries a call (shm_use.cpp).

// Whether a communicator makes a channel (collective: the same inputs on
// every rank): QUORUM_SHM on, ranks over ucx, every rank on this host.
bool shm_channel_wanted(const char *transport, size_t local_ranks, int size);

// Whether the knobs send allreduces (and barriers, on the blocking fast path)
// through the channel where one exists: at every size, from the knobs alone
// (the blocking fast path caches it).
bool allreduce_uses_shm();

// What a caller knows about a call beyond its arguments.
struct ShmCallFacts {
  // Whether a buffer of the call lies in device memory (such calls go over the
  // transport); asked last, only when the rest allows shared memory. Null:
  // never asked (the caller's buffers are host memory).
  bool (*device_buffers)(const void *send, const void *recv) = nullptr;
  // The caller checks signatures: after a mismatch broke the channel, its
  // allreduces fail over messages instead (shm_after_mismatch).
  bool signature_check = false;
};

// Whether call `a` may go through channel `ch` (null: none): an allreduce on
// host buffers unless shm_after_mismatch, or a barrier on a channel that is
// not broken; other kinds never. Whether it does is then the knobs' choice
// (allreduce_uses_shm): select_algorithm picks the "shm" allreduce
// (AlgorithmMedium::SharedMemory) where this says so and the knobs want it,
// and the blocking fast path runs it inline.
bool shm_usable(const ShmChannel *ch, const CollArgs &a, const ShmCallFacts &facts = {});

// An allreduce after a mismatch broke `ch`, with signatures checked: it fails
// on every rank whichever path it would take, after a signature exchange that
// meets a mismatched call over messages (broken_channel_task).
bool shm_after_mismatch(const ShmChannel *ch, const CollArgs &a, bool signature_check);

// Running a call over a channel.

// A blocking allreduce through the channel, run by the calling thread without
// a schedule (the small-message fast path); polls `engine` now and then,
// naps between polls once the protocol has stalled for spin_ns (the
// engine's choice: short when ranks share cores) for nap_us at first, longer
// the longer it waits (memory_nap_us), and gives up with
// QUORUM_ERR_TIMEOUT after timeout_ms (<= 0: never). a.kind Barrier (one
// int32 sum): a barrier, whose signature matches no allreduce.
// seq: the collective's sequence number on the communicator (kNoSequence:
// none, e.g. the path probe); with `scratch`, a rank that finds a peer in a
// message collective of that number joins its signature exchange
// (shm_mismatch.cpp).
constexpr uint64_t kNoSequence = UINT64_MAX;
Status shm_allreduce_inline(ShmChannel *ch, Transport *t, const CollArgs &a, ProgressEngine &engine,
                            int64_t timeout_ms, uint64_t spin_ns, int64_t nap_us,
                            uint64_t seq = kNoSequence, ScratchPool *scratch = nullptr);

// The same allreduce as a task of a schedule, over the channel's ranks (ranks
// 0..P-1 of the channel are ranks 0..P-1 of `t`). seq, scratch: as above.
std::unique_ptr<Task> shm_allreduce_task(ShmChannel *ch, Transport *t, const CollArgs &a,
                                         uint64_t seq, ScratchPool *scratch);

// The failure of a shm allreduce on a broken channel: QUORUM_ERR_MISMATCH
// after a mismatch, QUORUM_ERR_TIMEOUT after a timeout, else
// QUORUM_ERR_PEER_FAILED, naming the rank of the first failure.
Status shm_broken_error(const ShmChannel &ch);
// An allreduce after a mismatch broke the channel, on every rank whichever
// path it would take: the signature exchange over messages (so that it meets
// a rank in another collective of this number, or one that went over
// messages), then this task, which fails with shm_broken_error.
std::unique_ptr<Task> broken_channel_task(const ShmChannel *ch);

}  // namespace quorum
