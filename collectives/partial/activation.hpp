// activation.hpp: the pure parts of partial-collective activation, kept apart
// from execution so they can be unit-tested without a network: the binomial
// activation tree (any P), the majority initiator of a round, the counter
// rank of a quorum round, which rounds are synchronous, and the tag fields of
// a round.
//
// Activation tree: relative rank v = (r - root) mod P. The root (v = 0) sends
// to v + 2^j for every 2^j < P; a rank v > 0 sends to v + 2^j for every 2^j
// below the lowest set bit of v (and v + 2^j < P). Every rank is reached once,
// in ceil(log2 P) steps, for any P (not only powers of two).
#pragma once

#include <cstdint>
#include <vector>

namespace quorum::partial {

// Children of `rank` in the tree rooted at `root`, largest subtree first.
inline std::vector<int> tree_children(int rank, int root, int size) {
  std::vector<int> out;
  const int v = ((rank - root) % size + size) % size;
  const int64_t low = v == 0 ? (int64_t{1} << 40) : (v & -v);
  std::vector<int> rel;
  for (int64_t bit = 1; bit < low && v + bit < size; bit <<= 1) rel.push_back(v + int(bit));
  for (auto it = rel.rbegin(); it != rel.rend(); ++it) out.push_back((*it + root) % size);
  return out;
}

// Parent of `rank` in the tree rooted at `root` (-1 for the root).
inline int tree_parent(int rank, int root, int size) {
  const int v = ((rank - root) % size + size) % size;
  if (v == 0) return -1;
  return ((v - (v & -v)) + root) % size;
}

// splitmix64: a counter-based hash, so any rank computes any round's value
// without replaying history.
inline uint64_t splitmix64(uint64_t x) {
  x += 0x9e3779b97f4a7c15ull;
  x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ull;
  x = (x ^ (x >> 27)) * 0x94d049bb133111ebull;
  return x ^ (x >> 31);
}

// Majority mode: the one rank whose post activates round k.
inline int majority_initiator(uint64_t seed, uint64_t round, int size) {
  return static_cast<int>(splitmix64(seed ^ splitmix64(round)) % static_cast<uint64_t>(size));
}

// Quorum mode: the rank that counts the arrivals at round k and activates it
// once k ranks arrived (rotating, so no rank counts every round).
inline int quorum_counter(uint64_t round, int size) {
  return static_cast<int>(round % static_cast<uint64_t>(size));
}
// Quorum mode's ready message travels as an activation message whose root
// field has this bit set; the rest of the field is the sender's rank.
constexpr uint32_t kReadyFlag = 0x80000000u;

// Every (A+1)-th round is synchronous (rounds A, 2A+1, ...); A = 0: all of them.
inline bool scheduled_sync_round(uint64_t round, uint64_t max_staleness) {
  return round % (max_staleness + 1) == max_staleness;
}

// Tag fields. The 28-bit sequence field of a tag holds [object id: 8][round: 20].
// At most max_staleness + 2 rounds of one object are in flight at once (see
// partial_allreduce.hpp) and max_staleness < 2^19 is enforced, so the low 20
// bits of the round id are unambiguous among the messages in flight; the full
// 64-bit round id travels inside every activation message and is checked.
constexpr int kObjectBits = 8;
constexpr int kRoundBits = 20;
constexpr uint64_t kMaxStaleness = (uint64_t{1} << (kRoundBits - 1)) - 1;
inline uint64_t round_seq(uint64_t object_id, uint64_t round) {
  return ((object_id & ((1u << kObjectBits) - 1)) << kRoundBits) |
         (round & ((uint64_t{1} << kRoundBits) - 1));
}
// Activations use one tag per object: the all-ones round field with step 4095
// (under CollKind::PartialControl), which the header allreduce of a round
// (recursive doubling, steps 0..log2 P + 1) never uses.
inline uint64_t activation_seq(uint64_t object_id) {
  return round_seq(object_id, (uint64_t{1} << kRoundBits) - 1);
}
constexpr int kActivationStep = 4095;

}  // namespace quorum::partial
