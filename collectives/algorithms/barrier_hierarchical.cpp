// barrier_hierarchical.cpp: barrier for communicators spanning several hosts
// with the same number of ranks each (patterns/hierarchy.hpp), so that only
// one rank per host signals across hosts.
//
// With H hosts of L ranks, the leader of a host its lowest rank:
//   1. every other rank of the host signals its leader (L-1 empty messages).
//   2. dissemination barrier (patterns/dissemination.hpp) among the leaders:
//      ceil(log2 H) steps.
//   3. the leader releases the others of its host (L-1 empty messages).
// 2 + ceil(log2 H) steps, against ceil(log2 HL) steps for the flat one whose
// every step crosses the hosts' links.
#include "collectives/algorithms/algorithms.hpp"
#include "collectives/patterns/dissemination.hpp"
#include "collectives/patterns/hierarchy.hpp"

namespace quorum {

namespace dis = patterns::dissemination;

Status build_barrier_hierarchical(Builder &b, const CollArgs &, TaskId *last) {
  namespace hier = patterns::hierarchy;
  const HostLayout *layout = nullptr;
  QUORUM_CHECK(hierarchical_layout(b, &layout));
  const std::vector<int> &local = layout->local;
  const int leader = local.front();
  const std::vector<int> leaders = hier::column(layout->hosts, 0);
  const int h = static_cast<int>(leaders.size()), me = layout->host_index;
  const int release_step = 1 + dis::steps(h);
  if (b.rank() != leader) {
    TaskId arrived = b.send(leader, 0, nullptr, 0);
    *last = b.nop({arrived, b.recv(leader, release_step, nullptr, 0)});
    return kOk;
  }
  std::vector<TaskId> done, all_here;
  for (size_t i = 1; i < local.size(); ++i) all_here.push_back(b.recv(local[i], 0, nullptr, 0));
  TaskId prev = b.nop(all_here);
  for (int s = 0; s < dis::steps(h); ++s) {
    done.push_back(b.send(leaders[dis::send_to(me, h, s)], 1 + s, nullptr, 0, {prev}));
    prev = b.recv(leaders[dis::recv_from(me, h, s)], 1 + s, nullptr, 0, {prev});
  }
  for (size_t i = 1; i < local.size(); ++i) {
    done.push_back(b.send(local[i], release_step, nullptr, 0, {prev}));
  }
  done.push_back(prev);
  *last = b.nop(done);
  return kOk;
}

}  // namespace quorum
