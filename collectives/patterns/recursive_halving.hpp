// recursive_halving.hpp: Rabenseifner's allreduce pattern for any P >= 1:
// reduce-scatter by recursive halving, then allgather by recursive doubling,
// with the same fold as recursive_doubling.hpp for sizes that are not powers
// of two.
//
// The buffer is split into P' blocks (blocks.hpp, P' = core size); block b is
// owned by core rank b after the reduce-scatter.
//   fold:            extra rank r sends its whole buffer to partner r - P',
//                    which reduces it (only when P is not a power of two).
//   reduce-scatter:  log2(P') steps. Before step s core rank c works on the
//                    window of P'/2^s blocks around it; its peer is
//                    c XOR (P'/2^(s+1)). It sends the half of the window that
//                    does not contain block c and keeps (reduces the peer's
//                    copy into) the half that does. After the last step c
//                    holds block c fully reduced.
//   allgather:       log2(P') steps, the halving in reverse. At step s core
//                    rank c sends its 2^s reduced blocks to c XOR 2^s and
//                    receives the peer's 2^s blocks.
//   unfold:          partner sends the whole result to its extra rank.
//
// Steps and bytes on the wire, N = buffer bytes:
//   reduce-scatter: log2(P') steps; a core rank sends N/2 + N/4 + ... =
//     (P'-1)/P' * N and receives as much (and reduces it).
//   allgather:      log2(P') steps, (P'-1)/P' * N sent and received.
//   allreduce:      2 log2(P') steps (+2 when P is not a power of two), about
//     2N per core rank plus N in and N out for a partnered rank: bandwidth
//     close to ring with logarithmic latency.
#pragma once

#include "collectives/patterns/pattern_math.hpp"
#include "collectives/patterns/recursive_doubling.hpp"

namespace quorum {
namespace patterns {
namespace recursive_halving {

using recursive_doubling::core_size;
using recursive_doubling::extra_count;
using recursive_doubling::partner;
using recursive_doubling::Role;
using recursive_doubling::role;

// Steps of each of the two core phases: log2(P').
inline int steps(int size) {
  return recursive_doubling::steps(size);
}

// Number of blocks the buffer is split into: P'.
inline int block_count(int size) {
  return core_size(size);
}

namespace detail {
inline bool core_step(int rank, int size, int step) {
  return role(rank, size) == Role::kCore && step >= 0 && step < steps(size);
}
}  // namespace detail

// Reduce-scatter step: the peer (c XOR P'/2^(s+1)).
inline int reduce_scatter_peer(int rank, int size, int step) {
  if (!detail::core_step(rank, size, step)) return kNoPeer;
  return rank ^ (core_size(size) >> (step + 1));
}

// Reduce-scatter step: the blocks kept (received from the peer and reduced).
inline BlockRange reduce_scatter_keep(int rank, int size, int step) {
  if (!detail::core_step(rank, size, step)) return {};
  const int window = core_size(size) >> step, half = window / 2;
  const int lo = rank & ~(window - 1);
  return (rank & half) ? BlockRange{lo + half, half} : BlockRange{lo, half};
}

// Reduce-scatter step: the blocks sent to the peer (the other half).
inline BlockRange reduce_scatter_send(int rank, int size, int step) {
  if (!detail::core_step(rank, size, step)) return {};
  const int window = core_size(size) >> step, half = window / 2;
  const int lo = rank & ~(window - 1);
  return (rank & half) ? BlockRange{lo, half} : BlockRange{lo + half, half};
}

// Block a core rank owns, fully reduced, after the reduce-scatter.
inline int owned_block(int rank, int size) {
  return role(rank, size) == Role::kCore ? rank : -1;
}

// Allgather step: the peer (c XOR 2^s).
inline int allgather_peer(int rank, int size, int step) {
  if (!detail::core_step(rank, size, step)) return kNoPeer;
  return rank ^ (1 << step);
}

// Allgather step: the blocks sent (all reduced blocks held so far).
inline BlockRange allgather_send(int rank, int size, int step) {
  if (!detail::core_step(rank, size, step)) return {};
  const int n = 1 << step;
  return {rank & ~(n - 1), n};
}

// Allgather step: the blocks received (the peer's).
inline BlockRange allgather_recv(int rank, int size, int step) {
  return allgather_send(allgather_peer(rank, size, step), size, step);
}

}  // namespace recursive_halving
}  // namespace patterns
}  // namespace quorum
