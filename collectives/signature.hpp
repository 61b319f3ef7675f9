// signature.hpp: detects mismatched collective calls across ranks.
//
// Every rank describes its call (kind, count, dtype, op, root) in a small
// record; a dissemination exchange of ceil(log2 P) steps (one 64-byte message
// per step and rank) spreads the smallest and largest description to every
// rank. If they differ, every rank fails with QUORUM_ERR_MISMATCH naming two
// ranks that disagree and what each called, before any data moves.
#pragma once

#include <string>

#include "collectives/algorithms/algorithm.hpp"

namespace quorum {

Status add_signature_check(Builder &b, const CollArgs &args, uint64_t seq, TaskId *done);

// One rank's description of its call, as compared across ranks.
struct CallRecord {
  uint64_t count;
  int32_t rank;
  uint8_t kind, dtype, op, pad;
  int32_t root;
  uint32_t pad2;
  bool operator<(const CallRecord &o) const;
  bool same_call(const CallRecord &o) const;
};
CallRecord call_record(const CollArgs &args, int rank);
std::string describe_call(const CallRecord &r);

// The smallest and largest description seen so far; `conflict` (the rank
// that saw it, plus one) marks a message that could not carry one (longer or
// shorter than the call expected: the calls differ too). What an algorithm
// that checks signatures itself carries at the head of its messages.
struct CallRange {
  CallRecord lo, hi;
  int32_t conflict = 0;
  int32_t conflict_peer = -1;
  static CallRange of(const CallRecord &r) { return CallRange{r, r, 0, -1}; }
  void merge(const CallRange &o);
  void mark_conflict(int rank, int peer);
  bool agreed() const { return conflict == 0 && lo.same_call(hi); }
};
// QUORUM_ERR_MISMATCH naming the ranks that disagree (range not agreed).
Status mismatch_error(const CallRange &range, int rank, uint64_t seq);

}  // namespace quorum
