// topology_devices.hpp: the network devices hwloc sees on this host, the NUMA
// node each one is attached to, and where a rank's progress thread goes: on a
// core of the NUMA node nearest the device its inter-host traffic uses.
//
// The device is the first of UCX_NET_DEVICES that hwloc knows ("mlx5_0:1"
// names the OpenFabrics device mlx5_0; entries hwloc does not list, such as
// "lo" or shared-memory devices, are skipped), else, when UCX_NET_DEVICES is
// unset or "all", the first network device hwloc lists. The core is one of
// the usable cores (this thread's binding) of that NUMA node, counted from its
// last one by local rank. Otherwise (no such device, one NUMA node, a device
// not attached below one NUMA node, no usable core there) the rule is the
// older one: one core counted from the machine's last by local rank.
#pragma once

#include <string>
#include <vector>

#include "runtime/status.hpp"

namespace quorum {

enum class NetDeviceKind { kNetwork, kOpenFabrics };
const char *net_device_kind_name(NetDeviceKind kind);

struct NetDevice {
  std::string name;  // "eth0", "ib0", "mlx5_0"
  NetDeviceKind kind = NetDeviceKind::kNetwork;
  // Logical indices of the NUMA nodes and cores local to the device (those
  // of its nearest non-I/O ancestor); the whole machine's when hwloc cannot
  // place it closer.
  std::vector<int> numa_nodes;
  std::vector<int> cores;
};

// What the machine looks like to the placement rule.
struct DeviceTopology {
  int numa_nodes = 0;
  int cores = 0;
  std::vector<NetDevice> devices;  // in hwloc's order
  std::vector<int> usable_cores;   // logical indices this thread may run on, ascending
};

enum class PlacementRule {
  kNearDevice,      // a core of the device's NUMA node
  kLastCoreByRank,  // one core counted from the last by local rank
  kNone,            // no core at all (hwloc saw none)
};

const char *placement_rule_name(PlacementRule rule);  // "near_device", "last_core_by_rank", "none"

// Why the near-device rule did not apply (kNone when it did).
enum class PlacementFallback {
  kNone,
  kNoNetDevice,         // hwloc lists no network device (not excluded by "^...")
  kNetDevicesNotFound,  // UCX_NET_DEVICES names none of hwloc's devices
  kOneNumaNode,         // nothing to choose between
  kDeviceNotNumaLocal,  // the device hangs below the whole machine, not one NUMA node
  kNoUsableCoreNearDevice,
};
const char *placement_fallback_text(PlacementFallback why);

struct ProgressPlacement {
  PlacementRule rule = PlacementRule::kNone;
  PlacementFallback fallback = PlacementFallback::kNone;
  std::string device;  // the device chosen ("" when none matched)
  int numa_node = -1;  // the device's NUMA node (logical index); -1 when not near-device
  int core = -1;       // hwloc logical core index; -1 when none
};

// The rule itself, on a given topology (pure, for tests).
ProgressPlacement choose_progress_placement(const DeviceTopology &topo, int local_rank,
                                            const std::string &ucx_net_devices);

// This process's topology as the rule sees it (QUORUM_TOPOLOGY_XML's when set).
Status query_device_topology(DeviceTopology *out);

// choose_progress_placement on this process's topology and UCX_NET_DEVICES.
Status plan_progress_placement(int local_rank, ProgressPlacement *out);

// "core 3 (NUMA node 1, near eth1)" or "core 1 (last core by local rank: one NUMA node)".
std::string describe_placement(const ProgressPlacement &p);

}  // namespace quorum
