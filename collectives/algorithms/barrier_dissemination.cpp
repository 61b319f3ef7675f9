// barrier_dissemination.cpp: dissemination barrier.
//
// ceil(log2 P) steps; at step s rank r sends an empty message to r + 2^s and
// waits for one from r - 2^s (mod P). After the last step every rank has
// heard, transitively, from every other rank.
#include "collectives/algorithms/algorithms.hpp"
#include "collectives/algorithms/blocks.hpp"

namespace quorum {

Status build_barrier_dissemination(Builder &b, const CollArgs &, TaskId *last) {
  const int p = b.size(), r = b.rank();
  TaskId prev = -1;
  std::vector<TaskId> done;
  for (int s = 0, dist = 1; dist < p; ++s, dist <<= 1) {
    std::vector<TaskId> deps;
    if (prev >= 0) deps.push_back(prev);
    done.push_back(b.send(mod(r + dist, p), s, nullptr, 0, deps));
    prev = b.recv(mod(r - dist, p), s, nullptr, 0, deps);
  }
  done.push_back(prev);
  *last = b.nop(done);
  return kOk;
}

}  // namespace quorum
