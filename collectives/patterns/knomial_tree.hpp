// knomial_tree.hpp: the k-nomial tree (radix k >= 2) over any P >= 1 ranks,
// rooted at any root; k = 2 is the binomial tree.
//
// Ranks are renumbered relative to the root, v = (r - root) mod P, and written
// in base k. The parent of v > 0 is v with its lowest non-zero digit cleared;
// the children of v are v + d*k^j for every position j below v's lowest
// non-zero digit (every k^j < k^L for the root, L = ceil(log_k P)) and
// d = 1..k-1, if < P. Send order: highest position first (the subtrees that
// may be tallest; when P is a power of k, the largest), then d ascending; it
// is the order of the broadcast levels below.
//
//   broadcast: L levels. At level t (stride S = k^(L-1-t)) every v that is a
//     multiple of k*S sends to v + d*S, d = 1..k-1 (up to k-1 messages in
//     flight at once); v receives at the level whose stride is the place of
//     its lowest non-zero digit.
//   reduce: the same levels reversed, children send to the parent.
//
// Steps and bytes on the wire, N = message bytes: ceil(log_k P) levels, each
// with up to k-1 concurrent messages from one sender, so at most
// (k-1) * ceil(log_k P) * N sent by the root of a broadcast; P-1 messages in
// all. Larger k: fewer levels (latency) for more fan-out per rank. depth(r) =
// number of non-zero base-k digits of v.
#pragma once

#include <vector>

#include "collectives/patterns/pattern_math.hpp"

namespace quorum {
namespace patterns {
namespace knomial_tree {

inline bool valid(int rank, int size, int root, int radix) {
  return radix >= 2 && valid_rank(rank, size) && valid_rank(root, size);
}

inline int to_virtual(int rank, int size, int root) {
  return mod(int64_t(rank) - root, size);
}
inline int to_real(int vrank, int size, int root) {
  return mod(int64_t(vrank) + root, size);
}

// Levels: ceil(log_radix size); 0 for invalid arguments.
inline int steps(int size, int radix) {
  return (size >= 1 && radix >= 2) ? ceil_log(size, radix) : 0;
}

namespace detail {
// radix^j of v's lowest non-zero digit (radix^L for v == 0).
inline int64_t lowest_place(int64_t v, int size, int radix) {
  if (v == 0) return ipow(radix, steps(size, radix));
  int64_t place = 1;
  while ((v / place) % radix == 0) place *= radix;
  return place;
}
}  // namespace detail

inline int parent(int rank, int size, int root, int radix) {
  if (!valid(rank, size, root, radix) || rank == root) return kNoPeer;
  const int64_t v = to_virtual(rank, size, root);
  const int64_t place = detail::lowest_place(v, size, radix);
  return to_real(int(v - (v / place) % radix * place), size, root);
}

// Children in send order (highest place first, then digit ascending).
inline std::vector<int> children(int rank, int size, int root, int radix) {
  std::vector<int> out;
  if (!valid(rank, size, root, radix)) return out;
  const int64_t v = to_virtual(rank, size, root);
  for (int64_t place = detail::lowest_place(v, size, radix) / radix; place >= 1; place /= radix)
    for (int64_t d = 1; d < radix && v + d * place < size; ++d)
      out.push_back(to_real(int(v + d * place), size, root));
  return out;
}

// Hops from the root (0 for the root, -1 for invalid arguments).
inline int depth(int rank, int size, int root, int radix) {
  if (!valid(rank, size, root, radix)) return -1;
  int d = 0;
  for (int64_t v = to_virtual(rank, size, root); v > 0; v /= radix) d += (v % radix) != 0;
  return d;
}

namespace detail {
inline bool valid_level(int rank, int size, int root, int radix, int level) {
  return valid(rank, size, root, radix) && level >= 0 && level < steps(size, radix);
}
inline int64_t bcast_stride(int size, int radix, int level) {
  return ipow(radix, steps(size, radix) - 1 - level);
}
}  // namespace detail

// Broadcast level: the ranks this rank sends to, in order (may be empty).
inline std::vector<int> bcast_send_to(int rank, int size, int root, int radix, int level) {
  std::vector<int> out;
  if (!detail::valid_level(rank, size, root, radix, level)) return out;
  const int64_t s = detail::bcast_stride(size, radix, level), v = to_virtual(rank, size, root);
  if (v % (radix * s) != 0) return out;
  for (int64_t d = 1; d < radix && v + d * s < size; ++d)
    out.push_back(to_real(int(v + d * s), size, root));
  return out;
}

// Broadcast level: the rank this rank receives from, or kNoPeer.
inline int bcast_recv_from(int rank, int size, int root, int radix, int level) {
  if (!detail::valid_level(rank, size, root, radix, level)) return kNoPeer;
  const int64_t s = detail::bcast_stride(size, radix, level), v = to_virtual(rank, size, root);
  const int64_t r = v % (radix * s);
  return (r != 0 && v % s == 0) ? to_real(int(v - r), size, root) : kNoPeer;
}

// Reduce level t is broadcast level L-1-t with the direction reversed.
inline int reduce_send_to(int rank, int size, int root, int radix, int level) {
  if (!detail::valid_level(rank, size, root, radix, level)) return kNoPeer;
  return bcast_recv_from(rank, size, root, radix, steps(size, radix) - 1 - level);
}
inline std::vector<int> reduce_recv_from(int rank, int size, int root, int radix, int level) {
  if (!detail::valid_level(rank, size, root, radix, level)) return {};
  return bcast_send_to(rank, size, root, radix, steps(size, radix) - 1 - level);
}

}  // namespace knomial_tree
}  // namespace patterns
}  // namespace quorum
