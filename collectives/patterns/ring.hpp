// ring.hpp: the ring pattern (any P >= 1): neighbours and which block each rank
// sends and receives at each step of ring reduce-scatter and ring allgather.
//
// Ring allreduce = reduce-scatter then allgather, over P blocks of the buffer
// (blocks.hpp; block b is the one rank b owns after the reduce-scatter):
//
//   reduce-scatter, P-1 steps: at step s rank r sends block (r-s-1) mod P to
//     next(r) and receives block (r-s-2) mod P from prev(r), which it reduces
//     into its own copy (so the block it sends at s+1 is the one it reduced at
//     s). After the last step rank r holds block r fully reduced.
//   allgather, P-1 steps: at step s rank r sends block (r-s) mod P (its own
//     block at step 0) to next(r) and receives block (r-s-1) mod P from
//     prev(r), storing it.
//
// Steps and bytes on the wire, N = buffer bytes (as Gloo's algorithms.md):
//   reduce-scatter: P-1 steps, each rank sends and receives (P-1)/P * N and
//     reduces (P-1)/P * N.
//   allgather:      P-1 steps, (P-1)/P * N sent and received per rank.
//   allreduce:      2(P-1) steps, 2(P-1)/P * N sent and received per rank,
//     bandwidth-optimal; every step is one send and one receive in flight at
//     once, so latency grows linearly with P.
// P = 1: zero steps (the block functions answer kNoPeer-like -1).
#pragma once

#include "collectives/patterns/blocks.hpp"
#include "collectives/patterns/pattern_math.hpp"

namespace quorum {
namespace patterns {
namespace ring {

inline int next(int rank, int size) {
  return valid_rank(rank, size) ? (rank + 1) % size : kNoPeer;
}
inline int prev(int rank, int size) {
  return valid_rank(rank, size) ? (rank + size - 1) % size : kNoPeer;
}

// Steps of each phase: P - 1.
inline int steps(int size) {
  return size >= 1 ? size - 1 : 0;
}

inline bool valid_step(int rank, int size, int step) {
  return valid_rank(rank, size) && step >= 0 && step < steps(size);
}

// Block index sent / received at step of the reduce-scatter; -1 if none.
inline int reduce_scatter_send_block(int rank, int size, int step) {
  return valid_step(rank, size, step) ? mod(int64_t(rank) - step - 1, size) : -1;
}
inline int reduce_scatter_recv_block(int rank, int size, int step) {
  return valid_step(rank, size, step) ? mod(int64_t(rank) - step - 2, size) : -1;
}

// Block fully reduced at rank after the reduce-scatter.
inline int reduce_scatter_owned_block(int rank, int size) {
  return valid_rank(rank, size) ? rank : -1;
}

// Block index sent / received at step of the allgather; -1 if none.
inline int allgather_send_block(int rank, int size, int step) {
  return valid_step(rank, size, step) ? mod(int64_t(rank) - step, size) : -1;
}
inline int allgather_recv_block(int rank, int size, int step) {
  return valid_step(rank, size, step) ? mod(int64_t(rank) - step - 1, size) : -1;
}

}  // namespace ring
}  // namespace patterns
}  // namespace quorum
