// binomial_tree.hpp: the binomial tree over any P >= 1 ranks, rooted at any
// root, for broadcast (root to all) and reduce (all to root).
//
// Ranks are renumbered relative to the root, v = (r - root) mod P. The parent
// of v > 0 is v with its lowest set bit cleared; the children of v are
// v + 2^k for every 2^k below v's lowest set bit (every 2^k < P for the
// root), largest 2^k first, as in MPICH: the child that may head the
// tallest subtree is served first (when P is a power of two, also the
// largest subtree). This is the order of the broadcast steps below.
//
//   broadcast: ceil(log2 P) steps. At step t (mask m = 2^(L-1-t), L the step
//     count) every v that is a multiple of 2m sends to v + m (if < P); v
//     receives at the step where m is its lowest set bit, from its parent.
//   reduce: the same steps reversed (mask 2^t at step t): v with lowest set
//     bit m sends its partial result to v - m; v receives from children in
//     reverse send order (smallest subtree, first to finish, first).
//
// Steps and bytes on the wire, N = message bytes: ceil(log2 P) steps; the
// root sends (bcast) or receives and reduces (reduce) ceil(log2 P) * N at
// most, every other rank receives N once and sends N once per child
// (bcast) / receives N per child and sends N once (reduce); P-1 messages in
// all. depth(r) = popcount(v) is the number of hops from the root.
#pragma once

#include <vector>

#include "collectives/patterns/pattern_math.hpp"

namespace quorum {
namespace patterns {
namespace binomial_tree {

inline bool valid(int rank, int size, int root) {
  return valid_rank(rank, size) && valid_rank(root, size);
}

inline int to_virtual(int rank, int size, int root) {
  return mod(int64_t(rank) - root, size);
}
inline int to_real(int vrank, int size, int root) {
  return mod(int64_t(vrank) + root, size);
}

inline int steps(int size) {
  return size >= 1 ? ceil_log2(size) : 0;
}

inline int parent(int rank, int size, int root) {
  if (!valid(rank, size, root) || rank == root) return kNoPeer;
  const int v = to_virtual(rank, size, root);
  return to_real(v & (v - 1), size, root);
}

// Children in broadcast send order (farthest first).
inline std::vector<int> children(int rank, int size, int root) {
  std::vector<int> out;
  if (!valid(rank, size, root)) return out;
  const int v = to_virtual(rank, size, root);
  const int64_t lowbit = v == 0 ? (int64_t(1) << steps(size)) : (v & -v);
  for (int64_t m = lowbit >> 1; m > 0; m >>= 1)
    if (v + m < size) out.push_back(to_real(int(v + m), size, root));
  return out;
}

// Hops from the root (0 for the root, -1 for invalid arguments).
inline int depth(int rank, int size, int root) {
  if (!valid(rank, size, root)) return -1;
  return __builtin_popcount(unsigned(to_virtual(rank, size, root)));
}

namespace detail {
inline bool valid_step(int rank, int size, int root, int step) {
  return valid(rank, size, root) && step >= 0 && step < steps(size);
}
// The mask a step of a broadcast uses.
inline int64_t bcast_mask(int size, int step) {
  return int64_t(1) << (steps(size) - 1 - step);
}
}  // namespace detail

// Broadcast step: the rank this rank sends to, or kNoPeer.
inline int bcast_send_to(int rank, int size, int root, int step) {
  if (!detail::valid_step(rank, size, root, step)) return kNoPeer;
  const int64_t m = detail::bcast_mask(size, step), v = to_virtual(rank, size, root);
  return (v % (2 * m) == 0 && v + m < size) ? to_real(int(v + m), size, root) : kNoPeer;
}

// Broadcast step: the rank this rank receives from, or kNoPeer.
inline int bcast_recv_from(int rank, int size, int root, int step) {
  if (!detail::valid_step(rank, size, root, step)) return kNoPeer;
  const int64_t m = detail::bcast_mask(size, step), v = to_virtual(rank, size, root);
  return v % (2 * m) == m ? to_real(int(v - m), size, root) : kNoPeer;
}

// Reduce step t is broadcast step L-1-t with the direction reversed.
inline int reduce_send_to(int rank, int size, int root, int step) {
  if (!detail::valid_step(rank, size, root, step)) return kNoPeer;
  return bcast_recv_from(rank, size, root, steps(size) - 1 - step);
}
inline int reduce_recv_from(int rank, int size, int root, int step) {
  if (!detail::valid_step(rank, size, root, step)) return kNoPeer;
  return bcast_send_to(rank, size, root, steps(size) - 1 - step);
}

}  // namespace binomial_tree
}  // namespace patterns
}  // namespace quorum
