// reduce_scatter_hierarchical.cpp: reduce-scatter for communicators spanning
// several hosts with the same number of ranks each (patterns/hierarchy.hpp):
// the mirror of allgather_hierarchical.cpp, reducing within the host first so
// that only partial sums over a whole host cross the hosts' links.
//
// With H hosts of L ranks, n = bytes of one rank's block, I am local rank i
// of host h; "column g" is the H blocks of the ranks of local index g:
//   1. ring reduce-scatter among the L ranks of my host over the L columns
//      (a message per block): L-1 steps of H messages of n bytes, in the
//      host; I end with my column's H blocks summed over my host.
//   2. ring reduce-scatter of those among the H ranks of my column (one per
//      host): H-1 steps of n bytes; I end with my own block summed over all.
// On 2 hosts phase 2 takes the one-way pairing (patterns/hierarchy.hpp):
// host 1's rank i then sums host 0's block i+1 instead of i in phase 1.
// Every block's partial sum moves on as soon as it is reduced (one task per
// block), so the column's ring starts with the first block summed.
// Across hosts, per host: (H-1) L n bytes sent and received, the host's
// partial sums of the other hosts' (H-1) L blocks once each: the least any
// reduce-scatter moves, since every host must hear from each other host about
// each of its L blocks. Tag steps: phase 1 uses s H + host, phase 2
// (L-1) H + s: P-1 in all, so up to 4096 ranks (the table chooses it only
// there).
#include "collectives/algorithms/algorithms.hpp"
#include "collectives/patterns/hierarchy.hpp"
#include "collectives/patterns/ring.hpp"
#include "collectives/reduce/reduce_kernels.hpp"

namespace quorum {

namespace ring = patterns::ring;

Status build_reduce_scatter_hierarchical(Builder &b, const CollArgs &a, TaskId *last) {
  namespace hier = patterns::hierarchy;
  const HostLayout *layout = nullptr;
  QUORUM_CHECK(hierarchical_layout(b, &layout));
  if (b.size() > (1 << kTagStepBits)) {
    return fail(QUORUM_ERR_INTERNAL, "reduce_scatter", "hierarchical on {} ranks (at most {})",
                b.size(), 1 << kTagStepBits);
  }
  const std::vector<std::vector<int>> &hosts = layout->hosts;
  const int nh = static_cast<int>(hosts.size()), nl = static_cast<int>(layout->local.size());
  const int h = layout->host_index, i = layout->local_rank;
  const size_t n = a.count, nb = n * dtype_size(a.dtype);
  const uint8_t *in = static_cast<const uint8_t *>(a.send);
  uint8_t *out = static_cast<uint8_t *>(a.recv);
  TaskId start = b.nop();
  if (a.send == a.recv) {
    // In place: the input blocks live in recv, whose first block is the output.
    uint8_t *copy = b.scratch(nb * b.size() + 1);
    if (!copy) return fail(QUORUM_ERR_NO_MEMORY, "reduce_scatter", "scratch");
    start = b.copy(copy, in, nb * b.size());
    in = copy;
  }
  auto input = [&](int rank) { return in + nb * static_cast<size_t>(rank); };
  // Phase 1 step s, block of host `host`: received in tmp1, reduced in acc1.
  const size_t slots1 = static_cast<size_t>(ring::steps(nl)) * nh;
  const size_t slots2 = static_cast<size_t>(ring::steps(nh));
  uint8_t *tmp1 = b.scratch(nb * slots1 + 1), *acc1 = b.scratch(nb * slots1 + 1);
  uint8_t *tmp2 = b.scratch(nb * slots2 + 1), *acc2 = b.scratch(nb * slots2 + 1);
  if (!tmp1 || !acc1 || !tmp2 || !acc2) {
    return fail(QUORUM_ERR_NO_MEMORY, "reduce_scatter", "hierarchical scratch");
  }
  std::vector<TaskId> done;
  // held(c, k): the k-th block (of H) local rank c of my host sums in phase 1.
  const bool one_way = nh == 2;
  auto held = [&](int c, int k) {
    if (one_way && h == 1 && k == 0) return hosts[0][(c + 1) % nl];
    return hosts[k][c];
  };

  // 1. Column by column around my host; reduced[host]: the latest partial
  // sum of that host's block of the column in flight, in acc1.
  const int next_local = layout->local[ring::next(i, nl)];
  const int prev_local = layout->local[ring::prev(i, nl)];
  std::vector<TaskId> reduced(static_cast<size_t>(nh), start);
  for (int s = 0; s < ring::steps(nl); ++s) {
    const int send_col = ring::reduce_scatter_send_block(i, nl, s);
    const int recv_col = ring::reduce_scatter_recv_block(i, nl, s);
    for (int host = 0; host < nh; ++host) {
      const int step = s * nh + host;
      const size_t slot = static_cast<size_t>(step);
      const uint8_t *src = s == 0 ? input(held(send_col, host)) : acc1 + nb * (slot - nh);
      done.push_back(b.send(next_local, step, src, nb, {reduced[host]}));
      TaskId rcv = b.recv(prev_local, step, tmp1 + nb * slot, nb);
      reduced[host] = b.reduce(acc1 + nb * slot, input(held(recv_col, host)), tmp1 + nb * slot, n,
                               a.dtype, a.op, {rcv, reduced[host]});
    }
  }
  // My column summed over my host (the last step's reduce ends on column i).
  auto host_sum = [&](int host) {
    return acc1 + nb * (static_cast<size_t>(ring::steps(nl) - 1) * nh + host);
  };

  // 2. My column around the hosts (on 2 hosts, one way: I send the other
  // host's block I summed and add what comes to my own).
  const int base = static_cast<int>(slots1);
  TaskId prev = start;
  if (one_way) {
    const auto pair = hier::one_way_pair(hosts, h, i);
    const int theirs = 1 - h;
    done.push_back(b.send(pair.send_to, base, host_sum(theirs), nb, {reduced[theirs]}));
    TaskId rcv = b.recv(pair.recv_from, base, tmp2, nb);
    prev = b.reduce(out, host_sum(h), tmp2, n, a.dtype, a.op, {rcv, reduced[h]});
  }
  const std::vector<int> column = hier::column(hosts, i);
  const int next_host = column[ring::next(h, nh)], prev_host = column[ring::prev(h, nh)];
  for (int s = 0; !one_way && s < ring::steps(nh); ++s) {
    const int sb = ring::reduce_scatter_send_block(h, nh, s);
    const int rb = ring::reduce_scatter_recv_block(h, nh, s);
    const uint8_t *src = s == 0 ? host_sum(sb) : acc2 + nb * (s - 1);
    done.push_back(b.send(next_host, base + s, src, nb, {s == 0 ? reduced[sb] : prev}));
    TaskId rcv = b.recv(prev_host, base + s, tmp2 + nb * s, nb);
    uint8_t *dst = s == ring::steps(nh) - 1 ? out : acc2 + nb * s;
    prev = b.reduce(dst, host_sum(rb), tmp2 + nb * s, n, a.dtype, a.op, {rcv, reduced[rb], prev});
  }
  if (a.op == QUORUM_AVG) prev = b.scale(out, n, a.dtype, b.size(), {prev});
  done.push_back(prev);
  *last = b.nop(done);
  return kOk;
}

}  // namespace quorum
