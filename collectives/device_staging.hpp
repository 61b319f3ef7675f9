// device_staging.hpp: collectives on CUDA device buffers when the transport
// cannot move device memory (Debian's UCX is built without CUDA): the input is
// copied to a host scratch buffer before the schedule runs, the collective runs
// on host memory, and a last task copies the result back to the device.
#pragma once

#include "collectives/algorithms/algorithm.hpp"

namespace quorum {

struct StagingPlan {
  bool active = false;
  void *device_recv = nullptr;  // where the result goes back to
  const void *host_result = nullptr;
  size_t result_bytes = 0;
};

// Rewrites args to host buffers if needed (copying the input now).
Status stage_device_buffers(Builder &b, CollArgs *args, const Transport *transport,
                            StagingPlan *plan);
// Adds the copy back to the device after `last` (no-op when the plan is inactive).
TaskId finish_device_staging(Builder &b, const StagingPlan &plan, TaskId last);

}  // namespace quorum
