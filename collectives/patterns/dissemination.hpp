// dissemination.hpp: the dissemination pattern (Hensgen, Finkel and Manber)
// for barrier and allgather over any P >= 1 ranks.
//
// ceil(log2 P) steps; at step s rank r sends to (r + 2^s) mod P and receives
// from (r - 2^s) mod P. Barrier: the messages are empty; after the last step
// every rank has (transitively) heard from every other rank.
// Allgather (Bruck's algorithm without the final local rotation): before step
// s rank r holds the 2^s blocks r, r-1, ..., r-2^s+1 (mod P); at step s it
// sends the first min(2^s, P - 2^s) of them, so that after the last step it
// holds all P blocks exactly once.
//
// Steps and bytes on the wire, N = total gathered bytes (N/P per rank):
//   barrier:   ceil(log2 P) steps, one empty message sent and received per
//              step per rank.
//   allgather: ceil(log2 P) steps, (P-1)/P * N sent and received per rank,
//              messages of 2^s blocks (not contiguous in the output when
//              they wrap around rank 0).
#pragma once

#include "collectives/patterns/pattern_math.hpp"

namespace quorum {
namespace patterns {
namespace dissemination {

inline int steps(int size) {
  return size >= 1 ? ceil_log2(size) : 0;
}

inline bool valid_step(int rank, int size, int step) {
  return valid_rank(rank, size) && step >= 0 && step < steps(size);
}

inline int send_to(int rank, int size, int step) {
  return valid_step(rank, size, step) ? mod(int64_t(rank) + (int64_t(1) << step), size) : kNoPeer;
}

inline int recv_from(int rank, int size, int step) {
  return valid_step(rank, size, step) ? mod(int64_t(rank) - (int64_t(1) << step), size) : kNoPeer;
}

// Allgather: how many blocks travel at step (the same for every rank).
inline int allgather_block_count(int size, int step) {
  if (size < 1 || step < 0 || step >= steps(size)) return 0;
  const int held = 1 << step;
  return held < size - held ? held : size - held;
}

// Allgather: the j-th block (j < allgather_block_count) rank sends at step:
// (rank - j) mod P. -1 for invalid arguments.
inline int allgather_send_block(int rank, int size, int step, int j) {
  if (!valid_step(rank, size, step) || j < 0 || j >= allgather_block_count(size, step)) return -1;
  return mod(int64_t(rank) - j, size);
}

// Allgather: the j-th block rank receives at step: (rank - 2^s - j) mod P.
inline int allgather_recv_block(int rank, int size, int step, int j) {
  if (!valid_step(rank, size, step) || j < 0 || j >= allgather_block_count(size, step)) return -1;
  return mod(int64_t(rank) - (int64_t(1) << step) - j, size);
}

}  // namespace dissemination
}  // namespace patterns
}  // namespace quorum
