// barrier_dissemination.cpp: dissemination barrier.
//
// Pattern: patterns/dissemination.hpp. ceil(log2 P) steps; at step s rank r
// sends an empty message to r + 2^s and waits for one from r - 2^s (mod P).
#include "collectives/algorithms/algorithms.hpp"
#include "collectives/patterns/dissemination.hpp"

namespace quorum {

namespace dis = patterns::dissemination;

Status build_barrier_dissemination(Builder &b, const CollArgs &, TaskId *last) {
  const int p = b.size(), r = b.rank();
  TaskId prev = b.nop();
  std::vector<TaskId> done;
  for (int s = 0; s < dis::steps(p); ++s) {
    done.push_back(b.send(dis::send_to(r, p, s), s, nullptr, 0, {prev}));
    prev = b.recv(dis::recv_from(r, p, s), s, nullptr, 0, {prev});
  }
  done.push_back(prev);
  *last = b.nop(done);
  return kOk;
}

}  // namespace quorum
