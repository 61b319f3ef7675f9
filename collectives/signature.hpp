// signature.hpp: detects mismatched collective calls across ranks.
//
// Every rank describes its call (kind, count, dtype, op, root) in a small
// record; a dissemination exchange of ceil(log2 P) steps (one 64-byte message
// per step and rank) spreads the smallest and largest description to every
// rank. If they differ, every rank fails with QUORUM_ERR_MISMATCH naming two
// ranks that disagree and what each called, before any data moves.
#pragma once

#include "collectives/algorithms/algorithm.hpp"

namespace quorum {

Status add_signature_check(Builder &b, const CollArgs &args, uint64_t seq, TaskId *done);

}  // namespace quorum
