// blocks.hpp: the split of a buffer of `count` elements into nblocks nearly
// equal contiguous blocks, optionally aligned, as used by ring and
// recursive-halving (Rabenseifner) reduce-scatter/allgather.
//
// Blocks are made of "units" of `align` elements (align = 1: plain elements;
// align = 64 / element size: every block starts on a 64-byte boundary relative
// to the buffer, which keeps vector loops and RDMA writes aligned). The first
// (units mod nblocks) blocks get one unit more; the last non-empty block may
// end with a partial unit; with fewer units than blocks the trailing blocks
// are empty. Blocks are disjoint, in order, and cover [0, count) exactly.
#pragma once

#include <algorithm>
#include <cstddef>

#include "collectives/patterns/pattern_math.hpp"

namespace quorum {
namespace patterns {

struct Block {
  size_t offset = 0;  // in elements
  size_t count = 0;   // in elements
  bool operator==(const Block &o) const { return offset == o.offset && count == o.count; }
};

// Elements per alignment unit for an alignment in bytes: align_bytes /
// elem_size when that divides evenly, else 1 (no alignment possible).
inline size_t align_elements(size_t align_bytes, size_t elem_size) {
  if (elem_size == 0 || align_bytes < elem_size || align_bytes % elem_size != 0) return 1;
  return align_bytes / elem_size;
}

// Block b of nblocks (0 <= b < nblocks); an empty block for invalid arguments.
inline Block block(size_t count, int nblocks, int b, size_t align = 1) {
  if (nblocks < 1 || b < 0 || b >= nblocks || align == 0) return {};
  const size_t units = count / align + (count % align != 0);
  const size_t base = units / size_t(nblocks), extra = units % size_t(nblocks);
  const size_t ub = size_t(b);
  const size_t first_unit = ub * base + std::min(ub, extra);
  const size_t nunits = base + (ub < extra ? 1 : 0);
  const size_t begin = std::min(first_unit * align, count);
  const size_t end = std::min((first_unit + nunits) * align, count);
  return {begin, end - begin};
}

// The elements of the contiguous blocks [range.first, range.first + range.count).
inline Block block_span(size_t count, int nblocks, BlockRange range, size_t align = 1) {
  if (range.count <= 0) return {};
  const Block first = block(count, nblocks, range.first, align);
  const Block last = block(count, nblocks, range.first + range.count - 1, align);
  return {first.offset, last.offset + last.count - first.offset};
}

}  // namespace patterns
}  // namespace quorum
