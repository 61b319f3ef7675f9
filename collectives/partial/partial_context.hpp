// partial_context.hpp: what the parts of one partial allreduce share, fixed at
// creation: the communicator and its engine and transport, this rank's place,
// the reduction (count, dtype, op), the options, the object id, the shared
// memory channel of its rounds and the header layout. The activation tree,
// the accumulator and the round driver each hold a reference to it (see
// partial_allreduce.hpp); not installed.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <mutex>

#include "collectives/communicator.hpp"
#include "collectives/partial/activation.hpp"
#include "collectives/partial/partial_allreduce.hpp"

namespace quorum::partial {

struct PartialContext {
  explicit PartialContext(Communicator &c) : comm(c) {}

  Communicator &comm;
  ProgressEngine *engine = nullptr;
  Transport *transport = nullptr;
  int rank = 0;
  int size = 1;
  size_t count = 0;
  size_t bytes = 0;
  quorum_dtype_t dtype = QUORUM_FLOAT32;
  quorum_op_t op = QUORUM_SUM;
  PartialOptions opts;
  uint64_t object_id = 0;
  // Header words reduced with each round's data (partial_round.hpp).
  size_t header_words = 0;
  size_t bitmap_words = 0;
  // Rounds' data through shared memory when every rank is a process of this
  // host: a channel of this object's own (its chunk stream follows the round
  // order, which every rank shares); outlives the rounds and the buffers.
  std::unique_ptr<ShmChannel> shm;
  // The communicator was finalized before the object was destroyed: its
  // engine is gone, nothing may touch it any more.
  bool orphaned = false;

  // The engine mutex (none once orphaned).
  std::unique_lock<std::mutex> lock_engine() const {
    if (orphaned) return {};
    return std::unique_lock<std::mutex>(engine->mutex());
  }
  bool sync_round(uint64_t round) const { return scheduled_sync_round(round, opts.max_staleness); }
  bool quorum_mode() const { return opts.mode == QUORUM_PARTIAL_QUORUM && opts.k > 1; }
};

}  // namespace quorum::partial
