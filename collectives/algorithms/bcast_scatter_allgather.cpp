// bcast_scatter_allgather.cpp: broadcast of large messages as a scatter from
// the root followed by a ring allgather (van de Geijn).
//
// The root sends block b of P nearly equal blocks to rank b (P-1 messages of
// about n/P bytes), then the blocks circulate on the ring (patterns/ring.hpp
// allgather, P-1 steps). Per rank about 2 n (P-1)/P bytes move instead of the
// tree's n log2(P) at the root, which wins once n is large.
#include "collectives/algorithms/algorithms.hpp"
#include "collectives/patterns/ring.hpp"

namespace quorum {

namespace ring = patterns::ring;

Status build_bcast_scatter_allgather(Builder &b, const CollArgs &a, TaskId *last) {
  const int p = b.size(), r = b.rank();
  uint8_t *buf = static_cast<uint8_t *>(a.recv);
  auto blk = [&](int index) { return patterns::block(a.count, p, index, 64); };
  std::vector<TaskId> done;
  TaskId have_own;
  if (r == a.root) {
    for (int q = 0; q < p; ++q) {
      if (q != r) done.push_back(b.send(q, 0, buf + blk(q).offset, blk(q).count));
    }
    have_own = b.nop();
  } else {
    have_own = b.recv(a.root, 0, buf + blk(r).offset, blk(r).count);
  }
  TaskId got = have_own;
  for (int s = 0; s < ring::steps(p); ++s) {
    auto sb = blk(ring::allgather_send_block(r, p, s));
    auto rb = blk(ring::allgather_recv_block(r, p, s));
    done.push_back(b.send(ring::next(r, p), s + 1, buf + sb.offset, sb.count, {got}));
    // The root already holds every block: it receives into a scratch sink.
    if (r == a.root) {
      uint8_t *sink = b.scratch(rb.count + 1);
      got = b.recv(ring::prev(r, p), s + 1, sink, rb.count, {got});
    } else {
      got = b.recv(ring::prev(r, p), s + 1, buf + rb.offset, rb.count, {got});
    }
  }
  done.push_back(got);
  *last = b.nop(done);
  return kOk;
}

}  // namespace quorum
