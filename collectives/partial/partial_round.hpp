// partial_round.hpp: one round of a partial allreduce: what it holds, the
// layout of the int64 header reduced with its data, building its schedule
// (data allreduce + header allreduce) from this rank's input, and reading
// the reduced header once it is done. Used by the round driver
// (round_driver.hpp); not installed.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <vector>

#include "collectives/partial/partial_accumulator.hpp"
#include "collectives/partial/partial_allreduce.hpp"
#include "collectives/partial/partial_context.hpp"

namespace quorum::partial {

// Header layout (int64, reduced with SUM): round id (low 32 bits), count of
// ranks that joined as synchronous, count that joined as flush, the late posts
// carried into the round and their summed lateness (over all ranks), then the
// fresh bitmap and the activator bitmap (32 ranks per word, so sums never
// overflow).
constexpr size_t kHdrRound = 0, kHdrSync = 1, kHdrFlush = 2, kHdrCarried = 3, kHdrStaleness = 4,
                 kHdrBitmaps = 5;

// How a rank joins a round.
struct JoinKind {
  bool self_activated = false;  // this rank activated it (its bit in the activator bitmap)
  bool synchronous = false;     // a synchronous round, joined on arrival
  bool flush = false;           // flush(): every rank gives up its whole accumulator
};

struct Round {
  uint64_t id = 0;
  uint8_t *buf = nullptr;
  std::vector<int64_t> header;
  std::unique_ptr<Schedule> sched;
  std::vector<ScratchPool::Lease> leases;
  bool synchronous = false;
  bool flush = false;
  bool own_fresh = false;
  bool complete = false;
  PartialRoundInfo info;
};

// A round joined with `in` (taken from the accumulator): its header and its
// schedule, built (not yet progressed).
Status build_round(PartialContext &ctx, uint64_t round, const RoundInput &in, JoinKind kind,
                   std::unique_ptr<Round> *out);

// Once r.sched is done and succeeded: checks the reduced header (MISMATCH,
// logged, when the ranks disagree) and fills r.info from it.
Status read_round_header(const PartialContext &ctx, Round &r);

}  // namespace quorum::partial
