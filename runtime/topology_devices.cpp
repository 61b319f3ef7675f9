// topology_devices.cpp: network devices from hwloc's I/O objects, their NUMA
// locality, and the progress thread's core near the device in use.
#include "runtime/topology_devices.hpp"

#include <hwloc.h>

#include <algorithm>
#include <cstdlib>

#include "runtime/log.hpp"
#include "runtime/topology.hpp"
#include "runtime/topology_hwloc.hpp"

namespace quorum {

namespace {

std::vector<std::string> split_list(const std::string &text) {
  std::vector<std::string> out;
  size_t start = 0;
  while (start <= text.size()) {
    size_t comma = text.find(',', start);
    if (comma == std::string::npos) comma = text.size();
    std::string item = text.substr(start, comma - start);
    item.erase(0, item.find_first_not_of(" \t"));
    item.erase(item.find_last_not_of(" \t") + 1);
    if (!item.empty()) out.push_back(item);
    start = comma + 1;
  }
  return out;
}

// "mlx5_0:1" names device mlx5_0, port 1; hwloc lists the device.
std::string device_of(const std::string &ucx_entry) {
  return ucx_entry.substr(0, ucx_entry.find(':'));
}

bool is_loopback(const NetDevice &d) {
  return d.name == "lo";
}

// The device this rank's inter-host traffic uses, or nullptr. *named_list is
// set when UCX_NET_DEVICES names the devices to use (not "all", not "^a,b").
const NetDevice *device_in_use(const std::vector<NetDevice> &devices, const std::string &ucx,
                               bool *named_list) {
  std::vector<std::string> entries = split_list(ucx);
  const bool exclusions = !entries.empty() && entries[0][0] == '^';
  *named_list = !entries.empty() && !exclusions && !(entries.size() == 1 && entries[0] == "all");
  if (*named_list) {
    for (const std::string &e : entries) {
      for (const NetDevice &d : devices) {
        if (d.name == device_of(e)) return &d;
      }
    }
    return nullptr;
  }
  // Unset, "all", or "^a,b" (every device but those).
  std::vector<std::string> excluded;
  if (exclusions) {
    for (std::string e : entries) excluded.push_back(device_of(e[0] == '^' ? e.substr(1) : e));
  }
  for (const NetDevice &d : devices) {
    if (is_loopback(d)) continue;
    if (std::find(excluded.begin(), excluded.end(), d.name) != excluded.end()) continue;
    return &d;
  }
  return nullptr;
}

}  // namespace

const char *net_device_kind_name(NetDeviceKind kind) {
  switch (kind) {
    case NetDeviceKind::kNetwork:
      return "network";
    case NetDeviceKind::kOpenFabrics:
      return "openfabrics";
  }
  return "?";
}

const char *placement_rule_name(PlacementRule rule) {
  switch (rule) {
    case PlacementRule::kNearDevice:
      return "near_device";
    case PlacementRule::kLastCoreByRank:
      return "last_core_by_rank";
    case PlacementRule::kNone:
      return "none";
  }
  return "?";
}

const char *placement_fallback_text(PlacementFallback why) {
  switch (why) {
    case PlacementFallback::kNone:
      return "";
    case PlacementFallback::kNoNetDevice:
      return "no network device to use in hwloc's list";
    case PlacementFallback::kNetDevicesNotFound:
      return "UCX_NET_DEVICES names no device hwloc sees";
    case PlacementFallback::kOneNumaNode:
      return "one NUMA node";
    case PlacementFallback::kDeviceNotNumaLocal:
      return "the device is not attached below one NUMA node";
    case PlacementFallback::kNoUsableCoreNearDevice:
      return "no usable core in the device's NUMA node";
  }
  return "?";
}

ProgressPlacement choose_progress_placement(const DeviceTopology &topo, int local_rank,
                                            const std::string &ucx_net_devices) {
  ProgressPlacement p;
  if (topo.cores < 1) return p;
  const int rank = std::max(local_rank, 0);
  auto last_core_by_rank = [&](PlacementFallback why) {
    p.rule = PlacementRule::kLastCoreByRank;
    p.fallback = why;
    p.numa_node = -1;
    p.core = topo.cores - 1 - rank % topo.cores;
    return p;
  };
  bool named_list = false;
  const NetDevice *dev = device_in_use(topo.devices, ucx_net_devices, &named_list);
  if (dev == nullptr) {
    return last_core_by_rank(named_list ? PlacementFallback::kNetDevicesNotFound
                                        : PlacementFallback::kNoNetDevice);
  }
  p.device = dev->name;
  if (topo.numa_nodes <= 1) return last_core_by_rank(PlacementFallback::kOneNumaNode);
  if (dev->numa_nodes.empty() || static_cast<int>(dev->numa_nodes.size()) >= topo.numa_nodes) {
    return last_core_by_rank(PlacementFallback::kDeviceNotNumaLocal);
  }
  std::vector<int> candidates;
  for (int c : dev->cores) {
    if (std::binary_search(topo.usable_cores.begin(), topo.usable_cores.end(), c)) {
      candidates.push_back(c);
    }
  }
  if (candidates.empty()) return last_core_by_rank(PlacementFallback::kNoUsableCoreNearDevice);
  std::sort(candidates.begin(), candidates.end());
  p.rule = PlacementRule::kNearDevice;
  p.numa_node = dev->numa_nodes.front();
  p.core = candidates[candidates.size() - 1 - rank % candidates.size()];
  return p;
}

Status query_device_topology(DeviceTopology *out) {
  *out = DeviceTopology{};
  return with_io_topology([out](hwloc_topology_t t) {
    out->numa_nodes = hwloc_get_nbobjs_by_type(t, HWLOC_OBJ_NUMANODE);
    out->cores = hwloc_get_nbobjs_by_type(t, HWLOC_OBJ_CORE);
    for (hwloc_obj_t os = hwloc_get_next_osdev(t, nullptr); os != nullptr;
         os = hwloc_get_next_osdev(t, os)) {
      const hwloc_obj_osdev_type_t type = os->attr->osdev.type;
      if (type != HWLOC_OBJ_OSDEV_NETWORK && type != HWLOC_OBJ_OSDEV_OPENFABRICS) continue;
      NetDevice d;
      d.name = os->name != nullptr ? os->name : "";
      d.kind = type == HWLOC_OBJ_OSDEV_OPENFABRICS ? NetDeviceKind::kOpenFabrics
                                                   : NetDeviceKind::kNetwork;
      hwloc_obj_t near = hwloc_get_non_io_ancestor_obj(t, os);
      if (near != nullptr) {
        for (int i = 0; i < out->numa_nodes; ++i) {
          hwloc_obj_t node = hwloc_get_obj_by_type(t, HWLOC_OBJ_NUMANODE, i);
          if (hwloc_bitmap_isincluded(node->nodeset, near->nodeset)) d.numa_nodes.push_back(i);
        }
        for (int i = 0; i < out->cores; ++i) {
          hwloc_obj_t core = hwloc_get_obj_by_type(t, HWLOC_OBJ_CORE, i);
          if (hwloc_bitmap_isincluded(core->cpuset, near->cpuset)) d.cores.push_back(i);
        }
      }
      out->devices.push_back(std::move(d));
    }
    // This thread's binding on this machine; the whole allowed set of an XML topology.
    hwloc_bitmap_t usable = hwloc_bitmap_alloc();
    if (!hwloc_topology_is_thissystem(t) ||
        hwloc_get_cpubind(t, usable, HWLOC_CPUBIND_THREAD) != 0 || hwloc_bitmap_iszero(usable)) {
      hwloc_bitmap_copy(usable, hwloc_topology_get_allowed_cpuset(t));
    }
    for (int i = 0; i < out->cores; ++i) {
      hwloc_obj_t core = hwloc_get_obj_by_type(t, HWLOC_OBJ_CORE, i);
      if (hwloc_bitmap_intersects(core->cpuset, usable)) out->usable_cores.push_back(i);
    }
    hwloc_bitmap_free(usable);
    return kOk;
  });
}

Status plan_progress_placement(int local_rank, ProgressPlacement *out) {
  DeviceTopology topo;
  QUORUM_CHECK(query_device_topology(&topo));
  const char *ucx = std::getenv("UCX_NET_DEVICES");
  *out = choose_progress_placement(topo, local_rank, ucx != nullptr ? ucx : "");
  return kOk;
}

std::string describe_placement(const ProgressPlacement &p) {
  switch (p.rule) {
    case PlacementRule::kNearDevice:
      return fmt::format("core {} (NUMA node {}, near {})", p.core, p.numa_node, p.device);
    case PlacementRule::kLastCoreByRank:
      return fmt::format("core {} (last core by local rank: {}{})", p.core,
                         p.device.empty() ? "" : p.device + ": ",
                         placement_fallback_text(p.fallback));
    case PlacementRule::kNone:
      break;
  }
  return "no core (hwloc sees none)";
}

Status bind_progress_thread(int local_rank) {
  if (!knob_bind_progress.get()) return kOk;
  ProgressPlacement p;
  if (plan_progress_placement(local_rank, &p) != kOk || p.core < 0) return kOk;
  if (bind_thread_to_cores({p.core}) != kOk) {
    QLOG_WARN("topology", "QUORUM_BIND_PROGRESS: could not bind the progress thread to {}",
              describe_placement(p));
    return kOk;
  }
  QLOG_INFO("topology", "progress thread bound to {}", describe_placement(p));
  return kOk;
}

}  // namespace quorum
