// signature.hpp: detects mismatched collective calls across ranks.
//
// Every rank describes its call (kind, count, dtype, op, root) in a small
// record. A recursive-doubling exchange (patterns/recursive_doubling.hpp:
// log2 P' steps, plus fold and unfold when P is no power of two) spreads the
// smallest and largest description to every rank, each message starting with
// the range its sender has seen (a CallRange, 56 B). A message of an
// unexpected size (a mismatched call whose range cannot be read) marks a
// conflict, which travels on the way the range would have. No rank fails
// before it sent all its messages; then every rank whose range is not one
// call fails with QUORUM_ERR_MISMATCH naming two ranks that disagree.
//
// In front of a collective (add_signature_check) the messages carry only the
// range, and the collective's own tasks wait for the verdict. The small
// allreduce (recursive doubling, CollArgs::check_signature) is this exchange
// with its data after the range: no extra message. Both use the tag kind
// Signature with the collective's sequence number, so an allreduce and a
// checked call of another kind meet and disagree instead of waiting. The
// data of a mismatched allreduce is garbage, never read out of bounds: each
// rank reduces its own count from its own buffers. A barrier over messages is
// the header-only exchange alone (itself a barrier). A rank whose shm
// allreduce or barrier meets a rank on messages joins the exchange with its
// call marked as over shared memory (collectives/shm/shm_mismatch.cpp), so
// that it differs even from the same call over messages.
#pragma once

#include <string>

#include "collectives/algorithms/algorithm.hpp"

namespace quorum {

Status add_signature_check(Builder &b, const CollArgs &args, uint64_t seq, TaskId *done);
// The exchange, with_data: an allreduce of args (recursive doubling) whose
// messages carry the ranges; *last is its verdict.
Status build_signature_exchange(Builder &b, const CollArgs &args, uint64_t seq, bool with_data,
                                TaskId *last);

// One rank's description of its call, as compared across ranks.
struct CallRecord {
  uint64_t count;
  int32_t rank;
  uint8_t kind, dtype, op;
  uint8_t over_shm;  // 1: through the shared-memory channel (CollArgs::over_shm)
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
