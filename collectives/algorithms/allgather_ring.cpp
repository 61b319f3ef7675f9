// allgather_ring.cpp: ring allgather.
//
// P-1 steps; at step s rank r sends block r-s to r+1 and receives block r-s-1
// from r-1 straight into the output. Per rank: (P-1) x n bytes each way.
#include <cstring>

#include "collectives/algorithms/algorithms.hpp"
#include "collectives/algorithms/blocks.hpp"

namespace quorum {

Status build_allgather_ring(Builder &b, const CollArgs &a, TaskId *last) {
  const int p = b.size(), r = b.rank();
  const size_t n = a.count;
  uint8_t *out = static_cast<uint8_t *>(a.recv);
  TaskId prev = b.copy(out + n * r, a.send, n);
  std::vector<TaskId> done;
  for (int s = 0; s < p - 1; ++s) {
    int sb = mod(r - s, p), rb = mod(r - s - 1, p);
    done.push_back(b.send(mod(r + 1, p), s, out + n * sb, n, {prev}));
    prev = b.recv(mod(r - 1, p), s, out + n * rb, n, {prev});
  }
  done.push_back(prev);
  *last = b.nop(done);
  return kOk;
}

}  // namespace quorum
