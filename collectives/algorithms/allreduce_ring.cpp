// allreduce_ring.cpp: bandwidth-optimal allreduce for large messages.
//
// Ring reduce-scatter then ring allgather over P nearly equal blocks, each
// block cut into chunks that move independently, so receiving one chunk
// overlaps reducing the previous one. Steps: 2(P-1); per rank it sends and
// receives 2(P-1)/P * n bytes and reduces (P-1)/P * n bytes. Each block is
// reduced by exactly one chain of ranks and then copied around, so every rank
// ends with bitwise identical results.
#include <algorithm>

#include "collectives/algorithms/algorithms.hpp"
#include "collectives/algorithms/blocks.hpp"
#include "collectives/reduce/reduce_kernels.hpp"
#include "runtime/knobs.hpp"

namespace quorum {

Knob<int64_t> knob_ring_chunk_bytes("QUORUM_RING_CHUNK_BYTES", 512 * 1024,
                                    "Ring algorithms: size of the chunks a block is cut into so "
                                    "that communication of one chunk overlaps reduction of the "
                                    "previous one");

Status build_allreduce_ring(Builder &b, const CollArgs &a, TaskId *last) {
  const int p = b.size(), r = b.rank();
  const size_t es = dtype_size(a.dtype);
  const int next = mod(r + 1, p), prev_rank = mod(r - 1, p);
  const size_t max_block = block_of(a.count, p, 0).count;
  size_t chunk = std::max<size_t>(1, static_cast<size_t>(knob_ring_chunk_bytes.get()) / es);
  // Keep 2(P-1) x chunks under the 4096 tag steps (no wrap while in flight).
  size_t nchunks = (max_block + chunk - 1) / chunk;
  size_t max_chunks = std::max<size_t>(1, 4096 / (2 * static_cast<size_t>(p - 1)));
  if (nchunks > max_chunks) {
    nchunks = max_chunks;
    chunk = (max_block + nchunks - 1) / nchunks;
  }
  if (nchunks == 0) nchunks = 1;

  uint8_t *tmp = b.scratch(std::max<size_t>(1, max_block * es * (p - 1)));
  if (!tmp) return fail(QUORUM_ERR_NO_MEMORY, "allreduce", "ring scratch");
  const uint8_t *in = static_cast<const uint8_t *>(a.send);
  uint8_t *out = static_cast<uint8_t *>(a.recv);
  const int steps_per_phase = p - 1;
  auto step_id = [&](int phase, int s, size_t c) {
    return static_cast<int>((phase * steps_per_phase + s) * nchunks + c);
  };

  std::vector<TaskId> all_done;
  for (size_t c = 0; c < nchunks; ++c) {
    TaskId reduced = -1;
    std::vector<TaskId> rs_sends(p - 1);
    for (int s = 0; s < p - 1; ++s) {
      Block sb = block_of(a.count, p, mod(r - s, p));
      Block rb = block_of(a.count, p, mod(r - s - 1, p));
      size_t soff = std::min(sb.count, c * chunk), slen = std::min(chunk, sb.count - soff);
      size_t roff = std::min(rb.count, c * chunk), rlen = std::min(chunk, rb.count - roff);
      const uint8_t *src = (s == 0 ? in : out) + (sb.offset + soff) * es;
      std::vector<TaskId> deps;
      if (reduced >= 0) deps.push_back(reduced);
      rs_sends[s] = b.send(next, step_id(0, s, c), src, slen * es, deps);
      uint8_t *t = tmp + (static_cast<size_t>(s) * max_block + roff) * es;
      TaskId rcv = b.recv(prev_rank, step_id(0, s, c), t, rlen * es);
      uint8_t *dst = out + (rb.offset + roff) * es;
      reduced = b.reduce(dst, in + (rb.offset + roff) * es, t, rlen, a.dtype, a.op, {rcv});
    }
    // This rank now holds block r+1 fully reduced.
    Block own = block_of(a.count, p, mod(r + 1, p));
    size_t ooff = std::min(own.count, c * chunk), olen = std::min(chunk, own.count - ooff);
    if (a.op == QUORUM_AVG)
      reduced = b.scale(out + (own.offset + ooff) * es, olen, a.dtype, p, {reduced});
    TaskId got = reduced;
    for (int s = 0; s < p - 1; ++s) {
      Block sb = block_of(a.count, p, mod(r + 1 - s, p));
      Block rb = block_of(a.count, p, mod(r - s, p));
      size_t soff = std::min(sb.count, c * chunk), slen = std::min(chunk, sb.count - soff);
      size_t roff = std::min(rb.count, c * chunk), rlen = std::min(chunk, rb.count - roff);
      TaskId snd = b.send(next, step_id(1, s, c), out + (sb.offset + soff) * es, slen * es, {got});
      // Block r-s was sent (from out, for s > 0) in reduce-scatter step s: not before that.
      got = b.recv(prev_rank, step_id(1, s, c), out + (rb.offset + roff) * es, rlen * es,
                   {rs_sends[s]});
      all_done.push_back(snd);
    }
    all_done.push_back(got);
  }
  *last = b.nop(all_done);
  return kOk;
}

}  // namespace quorum
