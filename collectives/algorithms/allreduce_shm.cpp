// allreduce_shm.cpp: the "shm" allreduce, for communicators whose ranks are
// all processes of this host: one task that runs the allreduce through the
// communicator's shared-memory channel (collectives/shm/shm.hpp), no messages.
#include "collectives/algorithms/algorithms.hpp"
#include "collectives/shm/shm.hpp"
#include "runtime/log.hpp"

namespace quorum {

Status build_allreduce_shm(Builder &b, const CollArgs &a, TaskId *last) {
  ShmChannel *ch = b.shm();
  if (ch == nullptr || ch->size() != b.size()) {
    return fail(QUORUM_ERR_UNSUPPORTED, "allreduce",
                "shm allreduce needs every rank on this host over ucx (no shared-memory segment)");
  }
  // On a partial object's channel (rounds numbered on their own) nobody notes
  // message calls, so its ops never join an exchange.
  *last = b.add(shm_allreduce_task(ch, b.transport(), a, b.seq(), &b.scratch_pool()));
  return kOk;
}

}  // namespace quorum
