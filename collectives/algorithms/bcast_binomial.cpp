// bcast_binomial.cpp: binomial-tree broadcast, pipelined in chunks.
//
// Ranks are renumbered relative to the root (v = r - root mod P). Rank v
// receives from v - lowbit(v) and sends to v + 2^k for every 2^k below its
// lowest set bit (any P: children >= P are skipped). Steps: ceil(log2 P);
// every non-root rank receives n bytes once, an inner rank sends n bytes to
// each child. Large buffers move in chunks, so a child forwards chunk i while
// chunk i+1 is still arriving.
#include <algorithm>

#include "collectives/algorithms/algorithms.hpp"
#include "runtime/knobs.hpp"

namespace quorum {

extern Knob<int64_t> knob_ring_chunk_bytes;

Status build_bcast_binomial(Builder &b, const CollArgs &a, TaskId *last) {
  const int p = b.size();
  const int v = (b.rank() - a.root + p) % p;
  uint8_t *buf = a.recv != nullptr ? static_cast<uint8_t *>(a.recv) : nullptr;
  const size_t bytes = a.count;
  size_t chunk = std::max<int64_t>(1, knob_ring_chunk_bytes.get());
  size_t nchunks = bytes == 0 ? 1 : (bytes + chunk - 1) / chunk;
  if (nchunks > 4096) {
    nchunks = 4096;
    chunk = (bytes + nchunks - 1) / nchunks;
  }
  int mask = 1;
  int parent = -1;
  while (mask < p) {
    if (v & mask) {
      parent = (v - mask + a.root) % p;
      break;
    }
    mask <<= 1;
  }
  std::vector<TaskId> done;
  for (size_t c = 0; c < nchunks; ++c) {
    size_t off = std::min(bytes, c * chunk), len = std::min(chunk, bytes - off);
    std::vector<TaskId> deps;
    if (parent >= 0) {
      TaskId got = b.recv(parent, static_cast<int>(c), buf + off, len);
      deps.push_back(got);
      done.push_back(got);
    }
    for (int m = mask >> 1; m > 0; m >>= 1) {
      if (v + m < p) {
        done.push_back(b.send((v + m + a.root) % p, static_cast<int>(c), buf + off, len, deps));
      }
    }
  }
  *last = b.nop(done);
  return kOk;
}

}  // namespace quorum
