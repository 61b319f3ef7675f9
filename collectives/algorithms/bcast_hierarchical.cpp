// bcast_hierarchical.cpp: broadcast for communicators spanning several hosts
// with the same number of ranks each (patterns/hierarchy.hpp), so that the
// data crosses each host's link once.
//
// With H hosts of L ranks and the root at local index i of its host:
//   1. binomial tree (patterns/binomial_tree.hpp) among the ranks of local
//      index i, one per host, rooted at the root: ceil(log2 H) steps, every
//      host receives n bytes once across its link.
//   2. binomial tree within every host from its rank of index i:
//      ceil(log2 L) steps, in the host.
// Both move in chunks (QUORUM_RING_CHUNK_BYTES): a rank forwards chunk c to
// its children, across hosts or in its host, as soon as chunk c arrived.
#include <algorithm>

#include "collectives/algorithms/algorithms.hpp"
#include "collectives/patterns/binomial_tree.hpp"
#include "collectives/patterns/hierarchy.hpp"
#include "runtime/knobs.hpp"

namespace quorum {

extern Knob<int64_t> knob_ring_chunk_bytes;

namespace {

namespace tree = patterns::binomial_tree;

// My parent (kNoPeer for the root) and children (send order) as world ranks,
// in the binomial tree over `group` (I am group[me]) rooted at group[root].
struct GroupTree {
  int parent = patterns::kNoPeer;
  std::vector<int> children;
  GroupTree(const std::vector<int> &group, int me, int root) {
    const int n = static_cast<int>(group.size());
    const int p = tree::parent(me, n, root);
    if (p != patterns::kNoPeer) parent = group[p];
    for (int c : tree::children(me, n, root)) children.push_back(group[c]);
  }
};

}  // namespace

Status build_bcast_hierarchical(Builder &b, const CollArgs &a, TaskId *last) {
  namespace hier = patterns::hierarchy;
  const HostLayout *layout = nullptr;
  QUORUM_CHECK(hierarchical_layout(b, &layout));
  const hier::Place root = hier::locate(layout->hosts, a.root);
  if (root.host < 0) return fail(QUORUM_ERR_INVALID_ARG, "bcast", "root {} on no host", a.root);
  // Tag steps: half of the 4096 for each phase, one step per chunk.
  constexpr size_t kHalf = size_t{1} << (kTagStepBits - 1);
  uint8_t *buf = static_cast<uint8_t *>(a.recv);
  const size_t bytes = a.count;
  size_t chunk = static_cast<size_t>(std::max<int64_t>(1, knob_ring_chunk_bytes.get()));
  size_t nchunks = std::max<size_t>(1, (bytes + chunk - 1) / chunk);
  if (nchunks > kHalf) {
    nchunks = kHalf;
    chunk = (bytes + nchunks - 1) / nchunks;
  }
  const bool across_hosts = layout->local_rank == root.local;
  const GroupTree across(hier::column(layout->hosts, root.local), layout->host_index, root.host);
  const GroupTree within(layout->local, layout->local_rank, root.local);
  std::vector<TaskId> done;
  for (size_t c = 0; c < nchunks; ++c) {
    const size_t off = std::min(bytes, c * chunk), len = std::min(chunk, bytes - off);
    const int step = static_cast<int>(c);
    TaskIds have;  // what chunk c waits for on this rank (nothing on the root)
    const int parent = across_hosts ? across.parent : within.parent;
    const int parent_step = across_hosts ? step : static_cast<int>(kHalf) + step;
    if (parent != patterns::kNoPeer) {
      have.push_back(b.recv(parent, parent_step, buf + off, len));
      done.push_back(have.back());
    }
    if (across_hosts) {
      for (int child : across.children) done.push_back(b.send(child, step, buf + off, len, have));
    }
    for (int child : within.children) {
      done.push_back(b.send(child, static_cast<int>(kHalf) + step, buf + off, len, have));
    }
  }
  *last = b.nop(done);
  return kOk;
}

}  // namespace quorum
