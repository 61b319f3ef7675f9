// allgather_ring.cpp: ring allgather.
//
// Pattern: patterns/ring.hpp allgather. P-1 steps; at step s rank r sends
// block r-s to r+1 and receives block r-s-1 from r-1 straight into the
// output. Per rank: (P-1) x n bytes each way.
#include "collectives/algorithms/algorithms.hpp"
#include "collectives/patterns/ring.hpp"

namespace quorum {

namespace ring = patterns::ring;

Status build_allgather_ring(Builder &b, const CollArgs &a, TaskId *last) {
  const int p = b.size(), r = b.rank();
  const size_t n = a.count;
  uint8_t *out = static_cast<uint8_t *>(a.recv);
  TaskId prev = b.copy(out + n * r, a.send, n);
  std::vector<TaskId> done;
  for (int s = 0; s < ring::steps(p); ++s) {
    done.push_back(
        b.send(ring::next(r, p), s, out + n * ring::allgather_send_block(r, p, s), n, {prev}));
    prev = b.recv(ring::prev(r, p), s, out + n * ring::allgather_recv_block(r, p, s), n, {prev});
  }
  done.push_back(prev);
  *last = b.nop(done);
  return kOk;
}

}  // namespace quorum
