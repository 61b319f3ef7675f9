// pattern_math.hpp: small integer helpers shared by the communication patterns
// (logarithms, powers of two, the "no peer" value, block ranges).
//
// Patterns are pure functions of (rank, size, step, ...). They answer kNoPeer
// (or an empty range / list) both when a rank has nothing to do at a step and
// when an argument is out of range (size < 1, rank or root outside [0, size),
// step outside [0, steps)), so callers can use them without pre-checks.
#pragma once

#include <cstdint>

namespace quorum {
namespace patterns {

constexpr int kNoPeer = -1;

// A contiguous range of block indices [first, first + count).
struct BlockRange {
  int first = 0;
  int count = 0;
  constexpr bool contains(int b) const { return b >= first && b < first + count; }
  constexpr bool operator==(const BlockRange &o) const {
    return first == o.first && count == o.count;
  }
};

constexpr bool valid_rank(int rank, int size) {
  return size >= 1 && rank >= 0 && rank < size;
}

constexpr bool is_power_of_two(int64_t x) {
  return x > 0 && (x & (x - 1)) == 0;
}

// floor(log2 x) for x >= 1.
constexpr int floor_log2(int64_t x) {
  int l = 0;
  while (x > 1) {
    x >>= 1;
    ++l;
  }
  return l;
}

// ceil(log2 x) for x >= 1 (0 for x == 1).
constexpr int ceil_log2(int64_t x) {
  return x <= 1 ? 0 : floor_log2(x - 1) + 1;
}

// Smallest L with radix^L >= x, for x >= 1 and radix >= 2.
constexpr int ceil_log(int64_t x, int64_t radix) {
  int l = 0;
  for (int64_t p = 1; p < x; p *= radix) ++l;
  return l;
}

// radix^e as int64 (callers keep it below 2^62).
constexpr int64_t ipow(int64_t radix, int e) {
  int64_t p = 1;
  while (e-- > 0) p *= radix;
  return p;
}

// Non-negative a mod m (m >= 1).
constexpr int mod(int64_t a, int m) {
  return int(((a % m) + m) % m);
}

}  // namespace patterns
}  // namespace quorum
