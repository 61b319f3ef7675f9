// allreduce_recursive_doubling.cpp: latency-optimal allreduce for small messages.
//
// Steps: with pof2 the largest power of two <= P and rem = P - pof2, the first
// 2*rem ranks fold pairwise (odd ranks send their vector to the even rank
// below: 1 message of n bytes), then the pof2 remaining ranks run log2(pof2)
// exchange steps (each rank sends and receives n bytes and reduces), then the
// even ranks send the result back to their odd partner. Per rank: up to
// log2(pof2)+2 messages of n bytes. Every rank computes the same reduction
// tree, so results are bitwise identical across ranks.
#include "collectives/algorithms/algorithms.hpp"
#include "collectives/reduce/reduce_kernels.hpp"

namespace quorum {

Status build_allreduce_recursive_doubling(Builder &b, const CollArgs &a, TaskId *last) {
  const int p = b.size(), r = b.rank();
  const size_t bytes = a.count * dtype_size(a.dtype);
  int pof2 = 1;
  while (pof2 * 2 <= p) pof2 *= 2;
  const int rem = p - pof2;
  int steps = 0;
  while ((1 << steps) < pof2) ++steps;

  uint8_t *tmp = b.scratch(bytes * (steps + 1) + 1);
  if (!tmp) return fail(QUORUM_ERR_NO_MEMORY, "allreduce", "scratch of {} B", bytes * (steps + 1));
  void *acc = a.recv;
  TaskId prev = a.send != a.recv ? b.copy(a.recv, a.send, bytes) : b.nop();

  int newrank;
  if (r < 2 * rem) {
    if (r % 2 == 1) {
      // Fold: hand our vector to r-1 and wait for the final result.
      TaskId snd = b.send(r - 1, 0, acc, bytes, {prev});
      *last = b.recv(r - 1, steps + 1, acc, bytes, {snd});
      return kOk;
    }
    TaskId rv = b.recv(r + 1, 0, tmp, bytes);
    prev = b.reduce(acc, acc, tmp, a.count, a.dtype, a.op, {prev, rv});
    newrank = r / 2;
  } else {
    newrank = r - rem;
  }
  for (int s = 0; s < steps; ++s) {
    int newpeer = newrank ^ (1 << s);
    int peer = newpeer < rem ? newpeer * 2 : newpeer + rem;
    uint8_t *in = tmp + bytes * (s + 1);
    TaskId snd = b.send(peer, s + 1, acc, bytes, {prev});
    TaskId rcv = b.recv(peer, s + 1, in, bytes);
    prev = b.reduce(acc, acc, in, a.count, a.dtype, a.op, {snd, rcv});
  }
  if (a.op == QUORUM_AVG) prev = b.scale(acc, a.count, a.dtype, p, {prev});
  if (r < 2 * rem) prev = b.send(r + 1, steps + 1, acc, bytes, {prev});
  *last = prev;
  return kOk;
}

}  // namespace quorum
