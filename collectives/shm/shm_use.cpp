// shm_use.cpp: the one place that decides whether shared memory carries a
// call: whether a communicator makes a channel, whether the knobs choose it,
// and whether a given call may use it.
#include <cstring>
#include <string>

#include "collectives/shm/shm.hpp"

namespace quorum {

Knob<bool> knob_shm("QUORUM_SHM", true,
                    "Map a shared-memory segment for communicators whose ranks are all "
                    "processes of this host (ucx), used by the shm allreduce");
Knob<bool> knob_allreduce_shm_auto(
    "QUORUM_ALLREDUCE_SHM_AUTO", true,
    "Allreduce (and partial allreduce rounds) under auto: use shm whenever every rank is a "
    "process of this host");

bool shm_channel_wanted(const char *transport, size_t local_ranks, int size) {
  return knob_shm.get() && std::strcmp(transport, "ucx") == 0 &&
         local_ranks == static_cast<size_t>(size);
}

bool allreduce_uses_shm() {
  const std::string forced = knob_allreduce_algo.get();
  // A channel means one host, where hierarchical falls back to the default rule.
  return forced == "shm" ||
         ((forced == "auto" || forced == "hierarchical") && knob_allreduce_shm_auto.get());
}

bool shm_after_mismatch(const ShmChannel *ch, const CollArgs &a, bool signature_check) {
  return a.kind == CollKind::Allreduce && ch && signature_check && ch->broken() &&
         ch->broken_status() == QUORUM_ERR_MISMATCH;
}

bool shm_usable(const ShmChannel *ch, const CollArgs &a, const ShmCallFacts &facts) {
  if (ch == nullptr) return false;
  switch (a.kind) {
    case CollKind::Allreduce:
      return !shm_after_mismatch(ch, a, facts.signature_check) &&
             !(facts.device_buffers && facts.device_buffers(a.send, a.recv));
    case CollKind::Barrier:
      return !ch->broken();
    default:
      return false;
  }
}

}  // namespace quorum
