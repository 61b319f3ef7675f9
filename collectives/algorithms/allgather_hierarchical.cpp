// allgather_hierarchical.cpp: allgather for communicators spanning several
// hosts with the same number of ranks each (patterns/hierarchy.hpp), so that
// every block crosses into each other host once and every local rank drives
// the network at once.
//
// With H hosts of L ranks, n = bytes per rank, I am local rank i of host h:
//   1. ring allgather among the H ranks of local index i (my column, one per
//      host): H-1 steps of n bytes; I end with the blocks of my column.
//   2. ring allgather among the L ranks of my host over the L columns: at
//      step s I pass column i-s (its H blocks, one message each) to the next
//      local rank. L-1 steps of H messages of n bytes, in the host.
// On 2 hosts phase 1 takes the one-way pairing (patterns/hierarchy.hpp):
// host 0's rank i then holds host 1's block i-1 instead of i, which phase 2
// passes around the host all the same.
// A block moves on in phase 2 as soon as phase 1 delivered it (one task per
// block), so the host's ring starts with the first block across.
// Across hosts, per host: (H-1) L n bytes sent and received, each host's
// contribution (L n) once into each other host: the least any allgather
// moves, since every host must receive the (H-1) L n bytes it lacks. The flat
// ring sends (P-1) n per rank, across a host's link once per rank whose next
// rank is elsewhere (every rank where hosts interleave).
// Tag steps: phase 1 uses 0..H-2, phase 2 H-1 + s H + host: P-1 in all,
// so up to 4096 ranks (the table chooses it only there).
#include "collectives/algorithms/algorithms.hpp"
#include "collectives/patterns/hierarchy.hpp"
#include "collectives/patterns/ring.hpp"

namespace quorum {

namespace ring = patterns::ring;

Status build_allgather_hierarchical(Builder &b, const CollArgs &a, TaskId *last) {
  namespace hier = patterns::hierarchy;
  const HostLayout *layout = nullptr;
  QUORUM_CHECK(hierarchical_layout(b, &layout));
  if (b.size() > (1 << kTagStepBits)) {
    return fail(QUORUM_ERR_INTERNAL, "allgather", "hierarchical on {} ranks (at most {})", b.size(),
                1 << kTagStepBits);
  }
  const std::vector<std::vector<int>> &hosts = layout->hosts;
  const int nh = static_cast<int>(hosts.size()), nl = static_cast<int>(layout->local.size());
  const int h = layout->host_index, i = layout->local_rank;
  const size_t n = a.count;
  uint8_t *out = static_cast<uint8_t *>(a.recv);
  auto block = [&](int rank) { return out + n * static_cast<size_t>(rank); };
  // ready[r]: the task after which block r is in out.
  std::vector<TaskId> ready(static_cast<size_t>(b.size()), -1);
  std::vector<TaskId> done;
  ready[b.rank()] = b.copy(block(b.rank()), a.send, n);  // nothing to copy in place

  // held(c, k): the k-th block (of H) local rank c of my host has after phase 1.
  const bool one_way = nh == 2;
  auto held = [&](int c, int k) {
    if (one_way && h == 0 && k == 1) return hosts[1][(c + nl - 1) % nl];
    return hosts[k][c];
  };

  // 1. My column's blocks, around the hosts (on 2 hosts, one way).
  if (one_way) {
    const auto pair = hier::one_way_pair(hosts, h, i);
    done.push_back(b.send(pair.send_to, 0, block(b.rank()), n, {ready[b.rank()]}));
    ready[pair.recv_from] = b.recv(pair.recv_from, 0, block(pair.recv_from), n);
  } else {
    const std::vector<int> column = hier::column(hosts, i);
    const int next_host = column[ring::next(h, nh)], prev_host = column[ring::prev(h, nh)];
    for (int s = 0; s < ring::steps(nh); ++s) {
      const int sent = column[ring::allgather_send_block(h, nh, s)];
      const int got = column[ring::allgather_recv_block(h, nh, s)];
      done.push_back(b.send(next_host, s, block(sent), n, {ready[sent]}));
      ready[got] = b.recv(prev_host, s, block(got), n);
    }
  }

  // 2. The columns around my host, a message per block.
  const int next_local = layout->local[ring::next(i, nl)];
  const int prev_local = layout->local[ring::prev(i, nl)];
  for (int s = 0; s < ring::steps(nl); ++s) {
    const int send_col = ring::allgather_send_block(i, nl, s);
    const int recv_col = ring::allgather_recv_block(i, nl, s);
    for (int host = 0; host < nh; ++host) {
      const int step = nh - 1 + s * nh + host;
      const int sent = held(send_col, host), got = held(recv_col, host);
      done.push_back(b.send(next_local, step, block(sent), n, {ready[sent]}));
      ready[got] = b.recv(prev_local, step, block(got), n);
    }
  }
  done.insert(done.end(), ready.begin(), ready.end());
  *last = b.nop(done);
  return kOk;
}

}  // namespace quorum
