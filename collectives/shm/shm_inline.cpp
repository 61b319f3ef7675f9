// shm_inline.cpp: a shm allreduce (or barrier) run by the calling thread
// without a schedule: the blocking small-message fast path, and the path
// probe's timed ops.
#include <chrono>
#include <optional>
#include <string>
#include <thread>

#include "collectives/shm/shm.hpp"
#include "collectives/shm/shm_allreduce_task.hpp"
#include "runtime/clock.hpp"
#include "runtime/log.hpp"
#include "runtime/progress/engine.hpp"

namespace quorum {

Status shm_allreduce_inline(ShmChannel *ch, Transport *t, const CollArgs &a, ProgressEngine &engine,
                            int64_t timeout_ms, uint64_t spin_ns, int64_t nap_us, uint64_t seq,
                            ScratchPool *scratch) {
  ShmAllreduceTask task(ch, t, a, seq, scratch);
  Status status = kOk;
  // Clocks are read only after polls that moved nothing (in a VM a clock read
  // costs as much as a flag round trip); the deadline starts at the first.
  uint64_t stalled_since = 0;
  int64_t nap_max_us = -1;  // read at the first nap (not on the fast path)
  std::optional<Deadline> deadline;
  for (unsigned polls = 0;; ++polls) {
    TaskResult r = task.progress(&status);
    if (r == TaskResult::Done) return kOk;
    if (r == TaskResult::Failed) return status;
    // Now and then: the transport (it notices dead peers) and other requests
    // (an earlier non-blocking shm allreduce must finish before this one can).
    bool moved = task.moved() || ((polls & 63) == 63 && engine.progress_once());
    if (moved) {
      stalled_since = 0;
      continue;
    }
    if ((polls & 15) != 15) continue;
    const uint64_t now = now_ns();
    if (stalled_since == 0) stalled_since = now;
    if (!deadline) deadline = Deadline::after_ms(timeout_ms);
    if (deadline->expired()) {
      const int lagging = task.lagging_rank();
      task.time_out(lagging);
      // The signature exchange's receives must be settled before its scratch
      // goes back to the pool (bounded: a transport that never cancels them
      // is stuck anyway).
      const Deadline settle = Deadline::after_ms(1000);
      while (!task.quiescent() && !settle.expired()) engine.progress_once();
      if (!task.quiescent()) task.leak_crossing();
      return fail(QUORUM_ERR_TIMEOUT, "progress",
                  "{} on rank {} timed out after {} ms; waiting for rank {}: {}",
                  a.kind == CollKind::Barrier ? std::string("barrier (shm)")
                                              : fmt::format("allreduce (shm, count {})", a.count),
                  ch->rank(), timeout_ms, lagging, task.describe());
    }
    if (now - stalled_since > spin_ns) {
      if (nap_max_us < 0) nap_max_us = knob_memory_nap_max_us.get();
      const int64_t us = memory_nap_us(now - stalled_since, nap_us, nap_max_us);
      std::this_thread::sleep_for(std::chrono::microseconds(us));
    }
  }
}

}  // namespace quorum
