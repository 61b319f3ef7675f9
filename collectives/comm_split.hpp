// comm_split.hpp: sub-communicators, as MPI_Comm_split and MPI_Comm_dup make
// them. Each is a whole Communicator of its own (transport endpoints,
// progress engine, shared-memory channel where its ranks share a host), so
// every collective and partial object works on it unchanged, and its tags
// cannot meet its parent's.
//
// How: one allgather over the parent of (color, key); the ranks of one color,
// ordered by (key, parent rank), form the new communicator. Its bootstrap
// (the address exchange of Communicator::create) runs as point-to-point
// messages between those ranks over the parent's transport, tagged by a
// number every parent rank draws alike; once made, the new communicator's
// bootstrap runs over its own transport, so it does not need its parent any
// more (either may be finalized first).
#pragma once

#include <memory>

#include "collectives/communicator.hpp"

namespace quorum {

// Color of a rank that joins no new communicator (*out stays empty).
constexpr int kSplitUndefined = -1;

// Collective over the parent: every rank calls it, in the same order as the
// parent's other collectives. color >= 0 or kSplitUndefined.
Status comm_split(Communicator &parent, int color, int key, std::unique_ptr<Communicator> *out);
// The same ranks in the same order: comm_split(parent, 0, parent.rank()).
Status comm_dup(Communicator &parent, std::unique_ptr<Communicator> *out);

}  // namespace quorum
