// topology_hwloc.hpp: access to the process-wide hwloc topology for the
// runtime's own topology files (not for other layers, which use
// topology.hpp's plain structs).
#pragma once

#include <hwloc.h>

#include <functional>

#include "runtime/status.hpp"

namespace quorum {

// Runs fn on the process-wide topology (this machine's, or QUORUM_TOPOLOGY_XML's)
// with its I/O objects (network devices and their PCI path; loaded on the first
// such call) while holding its lock; fn must not call back into topology
// functions. Fails if hwloc could not load it.
Status with_io_topology(const std::function<Status(hwloc_topology_t)> &fn);

}  // namespace quorum
