// blocks.hpp: splitting `count` elements into nearly equal blocks and chunks.
#pragma once

#include <cstddef>

namespace quorum {

struct Block {
  size_t offset;
  size_t count;
};

// Block `index` of `parts` nearly equal blocks (the first count % parts get one more).
inline Block block_of(size_t count, int parts, int index) {
  size_t base = count / parts, extra = count % parts, i = static_cast<size_t>(index);
  return Block{i * base + (i < extra ? i : extra), base + (i < extra ? 1 : 0)};
}

inline int mod(int a, int p) {
  return ((a % p) + p) % p;
}

}  // namespace quorum
