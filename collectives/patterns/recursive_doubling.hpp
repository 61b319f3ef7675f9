// recursive_doubling.hpp: recursive doubling for any P >= 1, with the standard
// fold for sizes that are not powers of two.
//
// Let P' = 2^floor(log2 P) (the core) and E = P - P' (the extra ranks,
// r >= P'). Core rank c < E is the partner of extra rank c + P'.
//   fold:   (only when E > 0) every extra rank sends its whole buffer to its
//           partner, which reduces it into its own.
//   core:   log2(P') steps; at step s core rank c exchanges its whole buffer
//           with c XOR 2^s and reduces. After the last step every core rank
//           holds the full reduction.
//   unfold: (only when E > 0) every partner sends the result to its extra rank.
//
// Steps and bytes on the wire, N = buffer bytes:
//   allreduce: log2(P') steps (+2 when E > 0); a core rank sends and receives
//     N per step, log2(P') * N in all, plus N in and N out if it has a partner;
//     an extra rank sends N and receives N. Latency-optimal for small N, but
//     moves log2(P') * N per rank: use ring or Rabenseifner for large N.
//   allgather (core only, block of rank c = its contribution): before step s
//     core rank c holds the 2^s blocks core_held(c, s) and sends them all to
//     its peer; N/P' * (P'-1) per rank in all.
#pragma once

#include "collectives/patterns/pattern_math.hpp"

namespace quorum {
namespace patterns {
namespace recursive_doubling {

enum class Role { kCore, kExtra, kInvalid };

// P' = the largest power of two <= size (0 for size < 1).
inline int core_size(int size) {
  return size >= 1 ? 1 << floor_log2(size) : 0;
}

// Number of extra ranks E = size - P'.
inline int extra_count(int size) {
  return size >= 1 ? size - core_size(size) : 0;
}

inline Role role(int rank, int size) {
  if (!valid_rank(rank, size)) return Role::kInvalid;
  return rank >= core_size(size) ? Role::kExtra : Role::kCore;
}

// The fold partner: extra r -> r - P'; core c < E -> c + P'; else kNoPeer.
inline int partner(int rank, int size) {
  if (!valid_rank(rank, size)) return kNoPeer;
  const int core = core_size(size);
  if (rank >= core) return rank - core;
  if (rank < extra_count(size)) return rank + core;
  return kNoPeer;
}

// Core steps: log2(P').
inline int steps(int size) {
  return size >= 1 ? floor_log2(size) : 0;
}

// Peer of a core rank at core step; kNoPeer for extra ranks / bad step.
inline int peer(int rank, int size, int step) {
  if (role(rank, size) != Role::kCore || step < 0 || step >= steps(size)) return kNoPeer;
  return rank ^ (1 << step);
}

// Blocks (indexed by core rank) a core rank holds before core step s of an
// allgather, i.e. what it sends at step s: the aligned group of 2^s ranks
// around it. At s == steps() it is every block.
inline BlockRange core_held(int rank, int size, int step) {
  if (role(rank, size) != Role::kCore || step < 0 || step > steps(size)) return {};
  const int n = 1 << step;
  return {rank & ~(n - 1), n};
}

}  // namespace recursive_doubling
}  // namespace patterns
}  // namespace quorum
