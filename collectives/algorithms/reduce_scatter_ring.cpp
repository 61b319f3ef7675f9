// reduce_scatter_ring.cpp: ring reduce-scatter (block r ends on rank r).
//
// Pattern: patterns/ring.hpp reduce-scatter. P-1 steps; at step s rank r
// sends its partial sum of block r-s-1 to r+1 and receives the partial sum of
// block r-s-2 from r-1, adding its own input. Per rank: (P-1) x n bytes each
// way and (P-1) x n elements reduced.
#include "collectives/algorithms/algorithms.hpp"
#include "collectives/patterns/ring.hpp"
#include "collectives/reduce/reduce_kernels.hpp"

namespace quorum {

namespace ring = patterns::ring;

Status build_reduce_scatter_ring(Builder &b, const CollArgs &a, TaskId *last) {
  const int p = b.size(), r = b.rank();
  const size_t n = a.count, es = dtype_size(a.dtype), nb = n * es;
  const uint8_t *in = static_cast<const uint8_t *>(a.send);
  TaskId prev = b.nop();
  if (a.send == a.recv) {
    // In place: the input blocks live in recv, whose first block is the output.
    uint8_t *copy = b.scratch(nb * p + 1);
    if (!copy) return fail(QUORUM_ERR_NO_MEMORY, "reduce_scatter", "scratch");
    prev = b.copy(copy, in, nb * p);
    in = copy;
  }
  uint8_t *tmp = b.scratch(nb * (p - 1) + 1);
  uint8_t *acc = b.scratch(nb * (p - 1) + 1);
  if (!tmp || !acc) return fail(QUORUM_ERR_NO_MEMORY, "reduce_scatter", "scratch");
  uint8_t *out = static_cast<uint8_t *>(a.recv);
  const int steps = ring::steps(p);
  std::vector<TaskId> done;
  for (int s = 0; s < steps; ++s) {
    int sb = ring::reduce_scatter_send_block(r, p, s),
        rb = ring::reduce_scatter_recv_block(r, p, s);
    const uint8_t *src = s == 0 ? in + nb * sb : acc + nb * (s - 1);
    done.push_back(b.send(ring::next(r, p), s, src, nb, {prev}));
    TaskId rcv = b.recv(ring::prev(r, p), s, tmp + nb * s, nb);
    uint8_t *dst = s == steps - 1 ? out : acc + nb * s;
    prev = b.reduce(dst, in + nb * rb, tmp + nb * s, n, a.dtype, a.op, {rcv, prev});
  }
  if (a.op == QUORUM_AVG) prev = b.scale(out, n, a.dtype, p, {prev});
  done.push_back(prev);
  *last = b.nop(done);
  return kOk;
}

}  // namespace quorum
