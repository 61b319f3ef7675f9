// reduce_scatter_ring.cpp: ring reduce-scatter (block r ends on rank r).
//
// P-1 steps; at step s rank r sends its partial sum of block r-s-1 to r+1 and
// receives the partial sum of block r-s-2 from r-1, adding its own input.
// Per rank: (P-1) x n bytes each way and (P-1) x n elements reduced.
#include "collectives/algorithms/algorithms.hpp"
#include "collectives/algorithms/blocks.hpp"
#include "collectives/reduce/reduce_kernels.hpp"

namespace quorum {

Status build_reduce_scatter_ring(Builder &b, const CollArgs &a, TaskId *last) {
  const int p = b.size(), r = b.rank();
  const size_t n = a.count, es = dtype_size(a.dtype), nb = n * es;
  const uint8_t *in = static_cast<const uint8_t *>(a.send);
  TaskId prev = -1;
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
  std::vector<TaskId> done;
  for (int s = 0; s < p - 1; ++s) {
    int sb = mod(r - s - 1, p), rb = mod(r - s - 2, p);
    const uint8_t *src = s == 0 ? in + nb * sb : acc + nb * (s - 1);
    std::vector<TaskId> deps;
    if (prev >= 0) deps.push_back(prev);
    done.push_back(b.send(mod(r + 1, p), s, src, nb, deps));
    TaskId rcv = b.recv(mod(r - 1, p), s, tmp + nb * s, nb);
    uint8_t *dst = s == p - 2 ? out : acc + nb * s;
    std::vector<TaskId> rdeps{rcv};
    if (prev >= 0) rdeps.push_back(prev);
    prev = b.reduce(dst, in + nb * rb, tmp + nb * s, n, a.dtype, a.op, rdeps);
  }
  if (a.op == QUORUM_AVG) prev = b.scale(out, n, a.dtype, p, {prev});
  done.push_back(prev);
  *last = b.nop(done);
  return kOk;
}

}  // namespace quorum
