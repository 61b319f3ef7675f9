// allreduce_rabenseifner.cpp: reduce-scatter by recursive halving, then
// allgather by recursive doubling (Rabenseifner), for medium messages.
//
// Pattern: patterns/recursive_halving.hpp (with the recursive-doubling fold for
// P not a power of two). 2 log2(P') steps; a core rank sends and receives
// about 2 (P'-1)/P' n bytes and reduces (P'-1)/P' n elements: ring's bandwidth
// with logarithmic latency. Block b is reduced only by core rank b, then
// copied, so results are bitwise identical across ranks.
#include "collectives/algorithms/algorithms.hpp"
#include "collectives/patterns/blocks.hpp"
#include "collectives/patterns/recursive_halving.hpp"
#include "collectives/reduce/reduce_kernels.hpp"

namespace quorum {

namespace rh = patterns::recursive_halving;

Status build_allreduce_rabenseifner(Builder &b, const CollArgs &a, TaskId *last) {
  const int p = b.size(), r = b.rank();
  const size_t es = dtype_size(a.dtype), bytes = a.count * es;
  const int steps = rh::steps(p), nblocks = rh::block_count(p);
  const int partner = rh::partner(r, p);
  const int unfold_step = 2 * steps + 1;
  const size_t align = patterns::align_elements(64, es);
  auto span = [&](patterns::BlockRange range) {
    return patterns::block_span(a.count, nblocks, range, align);
  };

  uint8_t *acc = static_cast<uint8_t *>(a.recv);
  TaskId prev = a.send != a.recv ? b.copy(a.recv, a.send, bytes) : b.nop();
  if (rh::role(r, p) == rh::Role::kExtra) {
    TaskId snd = b.send(partner, 0, acc, bytes, {prev});
    *last = b.recv(partner, unfold_step, acc, bytes, {snd});
    return kOk;
  }
  // Received halves: n/2 + n/4 + ... < n, plus the fold partner's whole vector.
  uint8_t *tmp = b.scratch(2 * bytes + 64);
  if (!tmp) return fail(QUORUM_ERR_NO_MEMORY, "allreduce", "scratch of {} B", 2 * bytes);
  if (partner != patterns::kNoPeer) {
    TaskId rv = b.recv(partner, 0, tmp, bytes);
    prev = b.reduce(acc, acc, tmp, a.count, a.dtype, a.op, {prev, rv});
  }
  std::vector<TaskId> rs_sends(steps), done;
  size_t tmp_off = bytes;  // [0, bytes) holds the fold partner's vector
  for (int s = 0; s < steps; ++s) {
    int peer = rh::reduce_scatter_peer(r, p, s);
    auto give = span(rh::reduce_scatter_send(r, p, s));
    auto keep = span(rh::reduce_scatter_keep(r, p, s));
    rs_sends[s] = b.send(peer, s + 1, acc + give.offset * es, give.count * es, {prev});
    uint8_t *in = tmp + tmp_off;
    tmp_off += keep.count * es;
    TaskId rcv = b.recv(peer, s + 1, in, keep.count * es);
    prev = b.reduce(acc + keep.offset * es, acc + keep.offset * es, in, keep.count, a.dtype, a.op,
                    {prev, rcv});
  }
  if (a.op == QUORUM_AVG) {
    auto own = span({rh::owned_block(r, p), 1});
    prev = b.scale(acc + own.offset * es, own.count, a.dtype, p, {prev});
  }
  for (int s = 0; s < steps; ++s) {
    int peer = rh::allgather_peer(r, p, s);
    auto give = span(rh::allgather_send(r, p, s));
    auto take = span(rh::allgather_recv(r, p, s));
    done.push_back(b.send(peer, steps + s + 1, acc + give.offset * es, give.count * es, {prev}));
    // What we receive is what we gave away at reduce-scatter step steps-1-s.
    prev = b.recv(peer, steps + s + 1, acc + take.offset * es, take.count * es,
                  {prev, rs_sends[steps - 1 - s]});
  }
  if (partner != patterns::kNoPeer) prev = b.send(partner, unfold_step, acc, bytes, {prev});
  done.push_back(prev);
  *last = b.nop(done);
  return kOk;
}

}  // namespace quorum
