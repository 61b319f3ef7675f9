// allreduce_hierarchical.cpp: allreduce for communicators spanning several
// hosts with the same number of ranks each (patterns/hierarchy.hpp), so that
// the data crosses the hosts' links once instead of the flat ring's
// 2(P-1)/P times per rank.
//
// With H hosts of L ranks, n = buffer bytes:
//   1. ring reduce-scatter among the L ranks of my host over L blocks: local
//      rank i ends with block i reduced over its host. L-1 steps, (L-1)/L n
//      sent per rank, inside the host.
//   2. ring allreduce of block i among the H ranks of local index i (one per
//      host): every local rank drives the network at once. 2(H-1) steps,
//      2(H-1)/H * n/L sent per rank across hosts, so 2(H-1)/H n per host
//      (n each way on 2 hosts, against the flat ring's 1.5 n on 2 x 2).
//   3. ring allgather of the blocks among the ranks of my host. L-1 steps.
// On 2 hosts phase 2 is an exchange instead (the ring of two would send
// data both ways over one connection, where UCX's rendezvous replies queue
// behind the peer's bulk data and stall the link for tens of ms): local rank
// i of host 0 sends its block to local rank i of host 1, which sends its own
// to local rank i+1 of host 0, which forwards it over shared memory to i.
// Every connection between the hosts then carries data one way only, the
// same n per host, and both owners add the two partial sums (a + b and
// b + a: the same bits for every op).
// Each phase cuts its blocks into chunks (QUORUM_RING_CHUNK_BYTES) that move
// independently, and a chunk of one phase waits only for the chunks of the
// previous phase it overlaps. Every element is reduced by exactly one chain
// (phase 1 on each host, then one chain of phase 2, or the exchange's one
// commutative sum on each side) and then copied, so all ranks end bitwise
// identical; AVG is scaled once, by the owners of phase 2.
#include <algorithm>

#include "collectives/algorithms/algorithms.hpp"
#include "collectives/patterns/hierarchy.hpp"
#include "collectives/patterns/ring.hpp"
#include "collectives/reduce/reduce_kernels.hpp"
#include "runtime/knobs.hpp"

namespace quorum {

extern Knob<int64_t> knob_ring_chunk_bytes;

namespace {

namespace ring = patterns::ring;

// A task and the elements it finished (written or made readable).
struct Ready {
  size_t offset, count;
  TaskId task;
};

// The tasks of `ready` that overlap [offset, offset + count).
TaskIds overlapping(const std::vector<Ready> &ready, size_t offset, size_t count) {
  TaskIds deps;
  for (const Ready &r : ready) {
    if (r.offset < offset + count && offset < r.offset + r.count) deps.push_back(r.task);
  }
  return deps;
}

// A ring among `group` (world ranks; I am group[me]) over the elements
// [base, base + count) of the buffers, cut into group.size() aligned blocks
// and each block into nchunks chunks.
struct GroupRing {
  Builder &b;
  const CollArgs &a;
  std::vector<int> group;
  int me;
  size_t base, count, chunk, nchunks, es, max_block;

  GroupRing(Builder &bld, const CollArgs &args, std::vector<int> g, int my_index, size_t off,
            size_t n, size_t step_budget)
      : b(bld), a(args), group(std::move(g)), me(my_index), base(off), count(n) {
    es = dtype_size(a.dtype);
    max_block = 0;
    for (int i = 0; i < size(); ++i) max_block = std::max(max_block, block(i).count);
    chunk = std::max<size_t>(1, static_cast<size_t>(knob_ring_chunk_bytes.get()) / es);
    nchunks = std::max<size_t>(1, (max_block + chunk - 1) / chunk);
    const size_t max_chunks = std::max<size_t>(1, step_budget / std::max(1, ring::steps(size())));
    if (nchunks > max_chunks) {
      nchunks = max_chunks;
      chunk = std::max<size_t>(1, (max_block + nchunks - 1) / nchunks);
    }
  }
  int size() const { return static_cast<int>(group.size()); }
  int next() const { return group[ring::next(me, size())]; }
  int prev() const { return group[ring::prev(me, size())]; }
  patterns::Block block(int i) const {
    auto blk = patterns::block(count, size(), i, patterns::align_elements(64, es));
    return {base + blk.offset, blk.count};
  }
  // Chunks block `blk_index` needs (at least one): nchunks for the largest.
  size_t chunks_in(int blk_index) const {
    return std::max<size_t>(1, (block(blk_index).count + chunk - 1) / chunk);
  }
  patterns::Block chunk_of(int blk_index, size_t c) const {
    auto blk = block(blk_index);
    size_t off = std::min(blk.count, c * chunk);
    return {blk.offset + off, std::min(chunk, blk.count - off)};
  }

  // Reduce-scatter from `in` (the step-0 sends) into `out`, my block ending
  // reduced; `before`: what out and in must hold first. Returns the chunks of
  // my block; sends[s * nchunks + c] read what allgather step s receives.
  // Chunks are added (and so sent) from chunk `first` on, wrapping around.
  std::vector<Ready> reduce_scatter(const uint8_t *in, uint8_t *out, uint8_t *tmp, int step0,
                                    const std::vector<Ready> &before, std::vector<TaskId> *sends,
                                    size_t first = 0) {
    const int r = me, p = size(), steps = ring::steps(p);
    sends->assign(static_cast<size_t>(steps) * nchunks, -1);
    std::vector<Ready> mine;
    for (size_t k = 0; k < nchunks; ++k) {
      const size_t c = (k + first) % nchunks;
      TaskId reduced = -1;
      for (int s = 0; s < steps; ++s) {
        const int step = step0 + s * static_cast<int>(nchunks) + static_cast<int>(c);
        auto sc = chunk_of(ring::reduce_scatter_send_block(r, p, s), c);
        auto rblk = block(ring::reduce_scatter_recv_block(r, p, s));
        auto rc = chunk_of(ring::reduce_scatter_recv_block(r, p, s), c);
        TaskIds deps = reduced >= 0 ? TaskIds{reduced} : overlapping(before, sc.offset, sc.count);
        (*sends)[s * nchunks + c] =
            b.send(next(), step, (s == 0 ? in : out) + sc.offset * es, sc.count * es, deps);
        uint8_t *t = tmp + (static_cast<size_t>(s) * max_block + rc.offset - rblk.offset) * es;
        TaskIds rdeps = overlapping(before, rc.offset, rc.count);
        rdeps.push_back(b.recv(prev(), step, t, rc.count * es));
        reduced =
            b.reduce(out + rc.offset * es, in + rc.offset * es, t, rc.count, a.dtype, a.op, rdeps);
      }
      auto own = chunk_of(ring::reduce_scatter_owned_block(r, p), c);
      mine.push_back({own.offset, own.count, reduced});
    }
    return mine;
  }

  // Allgather in `out` from my block (ready after `mine`); receives wait for
  // the reduce-scatter sends that read the same elements. Returns every
  // chunk of the range with the task that finished it.
  std::vector<Ready> allgather(uint8_t *out, int step0, const std::vector<Ready> &mine,
                               const std::vector<TaskId> &rs_sends, std::vector<TaskId> *done) {
    const int r = me, p = size(), steps = ring::steps(p);
    std::vector<Ready> ready = mine;
    for (size_t c = 0; c < nchunks; ++c) {
      auto own = chunk_of(ring::reduce_scatter_owned_block(r, p), c);
      TaskIds got = overlapping(mine, own.offset, own.count);
      for (int s = 0; s < steps; ++s) {
        const int step = step0 + s * static_cast<int>(nchunks) + static_cast<int>(c);
        auto sc = chunk_of(ring::allgather_send_block(r, p, s), c);
        auto rc = chunk_of(ring::allgather_recv_block(r, p, s), c);
        done->push_back(b.send(next(), step, out + sc.offset * es, sc.count * es, got));
        TaskIds rdeps;
        if (!rs_sends.empty()) rdeps.push_back(rs_sends[s * nchunks + c]);
        TaskId rcv = b.recv(prev(), step, out + rc.offset * es, rc.count * es, rdeps);
        got = {rcv};
        ready.push_back({rc.offset, rc.count, rcv});
      }
    }
    return ready;
  }
};

// Phase 2 on two hosts (see the top): my block `slice` (ready after `mine`)
// is summed with the other host's partial of it, received directly (host 1)
// or forwarded by my host's next local rank (host 0). Returns my block's
// chunks with the tasks that finished them; the forwarding sends go to done.
std::vector<Ready> exchange_two_hosts(Builder &b, const CollArgs &a, const HostLayout &layout,
                                      const GroupRing &host, const std::vector<Ready> &mine,
                                      uint8_t *out, uint8_t *tmp, int step_cross, int step_forward,
                                      std::vector<TaskId> *done) {
  const size_t es = dtype_size(a.dtype);
  const int local = layout.local_rank, L = host.size();
  const int next = (local + 1) % L, prev = (local + L - 1) % L;
  const auto pair = patterns::hierarchy::one_way_pair(layout.hosts, layout.host_index, local);
  const auto slice = host.block(local);
  std::vector<Ready> summed;
  for (size_t c = 0; c < host.chunks_in(local); ++c) {
    const auto ch = host.chunk_of(local, c);
    const int step = static_cast<int>(c);
    uint8_t *partial = tmp + (ch.offset - slice.offset) * es;
    TaskId sent = b.send(pair.send_to, step_cross + step, out + ch.offset * es, ch.count * es,
                         overlapping(mine, ch.offset, ch.count));
    TaskId got = layout.host_index == 1
                     ? b.recv(pair.recv_from, step_cross + step, partial, ch.count * es)
                     : b.recv(layout.local[next], step_forward + step, partial, ch.count * es);
    TaskIds deps = overlapping(mine, ch.offset, ch.count);
    deps.push_back(sent);
    deps.push_back(got);
    summed.push_back({ch.offset, ch.count,
                      b.reduce(out + ch.offset * es, out + ch.offset * es, partial, ch.count,
                               a.dtype, a.op, deps)});
  }
  if (layout.host_index == 0) {
    // Forward the partial of my previous local rank's block, sent to me by
    // host 1's rank of that index.
    const auto fwd = host.block(prev);
    uint8_t *relay = tmp + host.max_block * es;
    for (size_t c = 0; c < host.chunks_in(prev); ++c) {
      const auto ch = host.chunk_of(prev, c);
      uint8_t *p = relay + (ch.offset - fwd.offset) * es;
      TaskId got = b.recv(pair.recv_from, step_cross + static_cast<int>(c), p, ch.count * es);
      done->push_back(
          b.send(layout.local[prev], step_forward + static_cast<int>(c), p, ch.count * es, {got}));
    }
  }
  return summed;
}

}  // namespace

Status build_allreduce_hierarchical(Builder &b, const CollArgs &a, TaskId *last) {
  namespace hier = patterns::hierarchy;
  const HostLayout *layout = nullptr;
  QUORUM_CHECK(hierarchical_layout(b, &layout));
  const size_t es = dtype_size(a.dtype);
  const uint8_t *in = static_cast<const uint8_t *>(a.send);
  uint8_t *out = static_cast<uint8_t *>(a.recv);
  // Tag steps: a quarter of the 4096 for each ring phase (phase 2 has two).
  constexpr size_t kSteps = size_t{1} << kTagStepBits;
  GroupRing host(b, a, layout->local, layout->local_rank, 0, a.count, kSteps / 4);
  auto slice = host.block(layout->local_rank);
  GroupRing column(b, a, hier::column(layout->hosts, layout->local_rank), layout->host_index,
                   slice.offset, slice.count, kSteps / 4);
  // Fixed bases: the slices (so phase 2's chunk counts) differ between the
  // ranks of a host, whose phase 3 must still use the same steps.
  const int quarter = static_cast<int>(kSteps / 4);
  const int p1 = 0, p2rs = quarter, p2ag = 2 * quarter, p3 = 3 * quarter;

  uint8_t *tmp1 = b.scratch(std::max<size_t>(1, host.max_block * es * (host.size() - 1)));
  if (!tmp1) return fail(QUORUM_ERR_NO_MEMORY, "allreduce", "hierarchical scratch");

  std::vector<TaskId> host_sends, column_sends, done;
  const bool two_hosts = layout->hosts.size() == 2;
  // 1. My block reduced over my host, in out. First the part that phase 2
  // sends first (its first reduce-scatter block), so the network starts early.
  auto first_out = column.block(ring::reduce_scatter_send_block(column.me, column.size(), 0));
  auto reduced_here =
      host.reduce_scatter(in, out, tmp1, p1, {}, &host_sends,
                          two_hosts ? 0 : (first_out.offset - slice.offset) / host.chunk);
  // 2. ... and over the hosts: the exchange, or reduce-scatter and allgather
  // within out.
  std::vector<Ready> slice_ready;
  if (two_hosts) {
    uint8_t *tmpx = b.scratch(std::max<size_t>(1, 2 * host.max_block * es));
    if (!tmpx) return fail(QUORUM_ERR_NO_MEMORY, "allreduce", "hierarchical scratch");
    slice_ready =
        exchange_two_hosts(b, a, *layout, host, reduced_here, out, tmpx, p2rs, p2ag, &done);
    if (a.op == QUORUM_AVG) {
      for (Ready &m : slice_ready)
        m.task = b.scale(out + m.offset * es, m.count, a.dtype, b.size(), {m.task});
    }
  } else {
    uint8_t *tmp2 = b.scratch(std::max<size_t>(1, column.max_block * es * (column.size() - 1)));
    if (!tmp2) return fail(QUORUM_ERR_NO_MEMORY, "allreduce", "hierarchical scratch");
    auto mine = column.reduce_scatter(out, out, tmp2, p2rs, reduced_here, &column_sends);
    if (a.op == QUORUM_AVG) {
      for (Ready &m : mine)
        m.task = b.scale(out + m.offset * es, m.count, a.dtype, b.size(), {m.task});
    }
    slice_ready = column.allgather(out, p2ag, mine, column_sends, &done);
  }
  // 3. The slices around my host.
  auto all = host.allgather(out, p3, slice_ready, host_sends, &done);
  for (const Ready &r : all) done.push_back(r.task);
  *last = b.nop(done);
  return kOk;
}

}  // namespace quorum
