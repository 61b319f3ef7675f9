// allreduce_ring.cpp: bandwidth-optimal allreduce for large messages.
//
// Pattern: patterns/ring.hpp (ring reduce-scatter, then ring allgather, over P
// nearly equal blocks aligned to 64 bytes). Each block is cut into chunks that
// move independently, so receiving one chunk overlaps reducing the previous
// one. Steps: 2(P-1); per rank it sends and receives 2(P-1)/P * n bytes and
// reduces (P-1)/P * n elements. Each block is reduced by exactly one chain of
// ranks and then copied around, so all ranks end with bitwise identical results.
#include <algorithm>

#include "collectives/algorithms/algorithms.hpp"
#include "collectives/patterns/ring.hpp"
#include "collectives/reduce/reduce_kernels.hpp"
#include "runtime/knobs.hpp"

namespace quorum {

namespace ring = patterns::ring;

Knob<int64_t> knob_ring_chunk_bytes("QUORUM_RING_CHUNK_BYTES", 512 * 1024,
                                    "Ring algorithms and large broadcasts: size of the chunks a "
                                    "block is cut into so that moving one chunk overlaps reducing "
                                    "or forwarding the previous one");

namespace {
// Element range [offset, offset + count) of chunk c of a block.
patterns::Block chunk_of(const patterns::Block &blk, size_t chunk, size_t c) {
  size_t off = std::min(blk.count, c * chunk);
  return {blk.offset + off, std::min(chunk, blk.count - off)};
}
}  // namespace

Status build_allreduce_ring(Builder &b, const CollArgs &a, TaskId *last) {
  const int p = b.size(), r = b.rank();
  const size_t es = dtype_size(a.dtype);
  const int next = ring::next(r, p), prev_rank = ring::prev(r, p);
  const size_t align = patterns::align_elements(64, es);
  auto blk = [&](int index) { return patterns::block(a.count, p, index, align); };
  size_t max_block = 0;
  for (int i = 0; i < p; ++i) max_block = std::max(max_block, blk(i).count);
  size_t chunk = std::max<size_t>(1, static_cast<size_t>(knob_ring_chunk_bytes.get()) / es);
  // Keep 2(P-1) x chunks within the 4096 tag steps, so no tag repeats in flight.
  size_t nchunks = std::max<size_t>(1, (max_block + chunk - 1) / chunk);
  size_t max_chunks = std::max<size_t>(1, 4096 / (2 * static_cast<size_t>(p - 1)));
  if (nchunks > max_chunks) {
    nchunks = max_chunks;
    chunk = (max_block + nchunks - 1) / nchunks;
  }

  uint8_t *tmp = b.scratch(std::max<size_t>(1, max_block * es * (p - 1)));
  if (!tmp) return fail(QUORUM_ERR_NO_MEMORY, "allreduce", "ring scratch");
  const uint8_t *in = static_cast<const uint8_t *>(a.send);
  uint8_t *out = static_cast<uint8_t *>(a.recv);
  const int steps = ring::steps(p);
  auto step_id = [&](int phase, int s, size_t c) {
    return static_cast<int>((phase * steps + s) * nchunks + c);
  };

  std::vector<TaskId> all_done;
  std::vector<TaskId> rs_sends(steps);
  for (size_t c = 0; c < nchunks; ++c) {
    TaskId reduced = -1;
    for (int s = 0; s < steps; ++s) {
      auto sc = chunk_of(blk(ring::reduce_scatter_send_block(r, p, s)), chunk, c);
      auto rblk = blk(ring::reduce_scatter_recv_block(r, p, s));
      auto rc = chunk_of(rblk, chunk, c);
      std::vector<TaskId> deps;
      if (reduced >= 0) deps.push_back(reduced);
      // Step 0 sends our own input; later steps forward what we just reduced.
      rs_sends[s] =
          b.send(next, step_id(0, s, c), (s == 0 ? in : out) + sc.offset * es, sc.count * es, deps);
      uint8_t *t = tmp + (static_cast<size_t>(s) * max_block + rc.offset - rblk.offset) * es;
      TaskId rcv = b.recv(prev_rank, step_id(0, s, c), t, rc.count * es);
      reduced =
          b.reduce(out + rc.offset * es, in + rc.offset * es, t, rc.count, a.dtype, a.op, {rcv});
    }
    auto own = chunk_of(blk(ring::reduce_scatter_owned_block(r, p)), chunk, c);
    if (a.op == QUORUM_AVG)
      reduced = b.scale(out + own.offset * es, own.count, a.dtype, p, {reduced});
    TaskId got = reduced;
    for (int s = 0; s < steps; ++s) {
      auto sc = chunk_of(blk(ring::allgather_send_block(r, p, s)), chunk, c);
      auto rc = chunk_of(blk(ring::allgather_recv_block(r, p, s)), chunk, c);
      all_done.push_back(
          b.send(next, step_id(1, s, c), out + sc.offset * es, sc.count * es, {got}));
      // The block received here was read by reduce-scatter send s: not before it is done.
      got = b.recv(prev_rank, step_id(1, s, c), out + rc.offset * es, rc.count * es, {rs_sends[s]});
    }
    all_done.push_back(got);
  }
  *last = b.nop(all_done);
  return kOk;
}

}  // namespace quorum
