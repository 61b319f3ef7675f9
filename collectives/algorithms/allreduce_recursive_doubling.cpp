// allreduce_recursive_doubling.cpp: latency-optimal allreduce for small messages.
//
// Pattern: patterns/recursive_doubling.hpp (fold of the ranks beyond the
// largest power of two, log2(P') exchange steps, unfold). Per core rank:
// log2(P') messages of n bytes each way (+1 each way with a fold partner).
// Every core rank computes the same reduction tree (the ops are commutative
// bit for bit), so results are bitwise identical across ranks.
//
// With CollArgs::check_signature the messages also carry the ranks' call
// descriptions (signature.hpp: the same exchange, data after a 56 B header).
#include "collectives/algorithms/algorithms.hpp"
#include "collectives/patterns/recursive_doubling.hpp"
#include "collectives/reduce/reduce_kernels.hpp"
#include "collectives/signature.hpp"

namespace quorum {

namespace rd = patterns::recursive_doubling;

Status build_allreduce_recursive_doubling(Builder &b, const CollArgs &a, TaskId *last) {
  if (a.check_signature) return build_signature_exchange(b, a, b.seq(), true, last);
  const int p = b.size(), r = b.rank();
  const size_t bytes = a.count * dtype_size(a.dtype);
  const int steps = rd::steps(p);
  const int partner = rd::partner(r, p);
  const int unfold_step = steps + 1;

  void *acc = a.recv;
  TaskId prev = a.send != a.recv ? b.copy(a.recv, a.send, bytes) : b.nop();
  if (rd::role(r, p) == rd::Role::kExtra) {
    TaskId snd = b.send(partner, 0, acc, bytes, {prev});
    *last = b.recv(partner, unfold_step, acc, bytes, {snd});
    return kOk;
  }
  // One scratch slot per step, so every receive can be posted at once.
  uint8_t *tmp = b.scratch(bytes * (steps + 1) + 1);
  if (!tmp) return fail(QUORUM_ERR_NO_MEMORY, "allreduce", "scratch of {} B", bytes * (steps + 1));
  if (partner != patterns::kNoPeer) {
    TaskId rv = b.recv(partner, 0, tmp, bytes);
    prev = b.reduce(acc, acc, tmp, a.count, a.dtype, a.op, {prev, rv});
  }
  for (int s = 0; s < steps; ++s) {
    int peer = rd::peer(r, p, s);
    uint8_t *in = tmp + bytes * (s + 1);
    TaskId snd = b.send(peer, s + 1, acc, bytes, {prev});
    TaskId rcv = b.recv(peer, s + 1, in, bytes);
    prev = b.reduce(acc, acc, in, a.count, a.dtype, a.op, {snd, rcv});
  }
  if (a.op == QUORUM_AVG) prev = b.scale(acc, a.count, a.dtype, p, {prev});
  if (partner != patterns::kNoPeer) prev = b.send(partner, unfold_step, acc, bytes, {prev});
  *last = prev;
  return kOk;
}

}  // namespace quorum
