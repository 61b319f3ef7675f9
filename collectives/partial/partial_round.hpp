// partial_round.hpp: what one round of a partial allreduce holds, and the
// layout of the int64 header reduced with its data; shared by the object's
// API (partial_allreduce.cpp) and its activation and round driving
// (partial_rounds.cpp), not installed.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <vector>

#include "collectives/partial/partial_allreduce.hpp"

namespace quorum {

namespace partial {
// Header layout (int64, reduced with SUM): round id (low 32 bits), count of
// ranks that joined as synchronous, count that joined as flush, the late posts
// carried into the round and their summed lateness (over all ranks), then the
// fresh bitmap and the activator bitmap (32 ranks per word, so sums never
// overflow).
constexpr size_t kHdrRound = 0, kHdrSync = 1, kHdrFlush = 2, kHdrCarried = 3, kHdrStaleness = 4,
                 kHdrBitmaps = 5;
}  // namespace partial

struct PartialAllreduce::Round {
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

}  // namespace quorum
