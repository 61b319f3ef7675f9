// bcast_binomial.cpp: binomial-tree broadcast, pipelined in chunks.
//
// Pattern: patterns/binomial_tree.hpp (any root, any P). ceil(log2 P) steps;
// every non-root rank receives n bytes once and sends n bytes to each child.
// Large buffers move in chunks, so a rank forwards chunk i while chunk i+1 is
// still arriving.
#include <algorithm>

#include "collectives/algorithms/algorithms.hpp"
#include "collectives/patterns/binomial_tree.hpp"
#include "runtime/knobs.hpp"

namespace quorum {

namespace tree = patterns::binomial_tree;
extern Knob<int64_t> knob_ring_chunk_bytes;

Status build_bcast_binomial(Builder &b, const CollArgs &a, TaskId *last) {
  const int p = b.size(), r = b.rank();
  uint8_t *buf = static_cast<uint8_t *>(a.recv);
  const size_t bytes = a.count;
  size_t chunk = static_cast<size_t>(std::max<int64_t>(1, knob_ring_chunk_bytes.get()));
  size_t nchunks = std::max<size_t>(1, (bytes + chunk - 1) / chunk);
  if (nchunks > 4096) {
    nchunks = 4096;
    chunk = (bytes + nchunks - 1) / nchunks;
  }
  const int parent = tree::parent(r, p, a.root);
  const std::vector<int> children = tree::children(r, p, a.root);
  std::vector<TaskId> done;
  for (size_t c = 0; c < nchunks; ++c) {
    size_t off = std::min(bytes, c * chunk), len = std::min(chunk, bytes - off);
    std::vector<TaskId> deps;
    if (parent != patterns::kNoPeer) {
      deps.push_back(b.recv(parent, static_cast<int>(c), buf + off, len));
      done.push_back(deps.back());
    }
    for (int child : children) {
      done.push_back(b.send(child, static_cast<int>(c), buf + off, len, deps));
    }
  }
  *last = b.nop(done);
  return kOk;
}

}  // namespace quorum
