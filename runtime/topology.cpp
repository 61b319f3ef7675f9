// topology.cpp: hwloc queries, host identities and thread binding.
#include "runtime/topology.hpp"

#include "runtime/topology_hwloc.hpp"

#include <sched.h>

#include <hwloc.h>
#include <unistd.h>

#include <algorithm>
#include <cstring>
#include <fstream>
#include <functional>
#include <iterator>
#include <mutex>

#include "runtime/log.hpp"

namespace quorum {

Knob<bool> knob_bind_progress("QUORUM_BIND_PROGRESS", false,
                              "Bind each progress thread to one core (best effort): a core of "
                              "the NUMA node nearest the network device this rank uses "
                              "(UCX_NET_DEVICES, else the first one hwloc sees), spread by "
                              "local rank; with no such device or one NUMA node, one core "
                              "counted from the last by local rank");
Knob<std::string> knob_topology_xml("QUORUM_TOPOLOGY_XML", "",
                                    "Read the topology from this hwloc XML file (as written by "
                                    "lstopo --of xml) instead of this machine; for tests and for "
                                    "planning another machine's layout. Binding then fails "
                                    "(logged) since the topology is not this system's");
Knob<std::string> knob_host_id("QUORUM_HOST_ID", "",
                               "Overrides this process's host identity (default: hostname and "
                               "boot id); ranks with equal ids are treated as sharing a host");

namespace {

std::mutex g_topology_mutex;
hwloc_topology_t g_topology = nullptr;
std::string g_topology_error;
std::string g_topology_xml;  // the QUORUM_TOPOLOGY_XML the loaded topology came from
bool g_topology_io = false;  // loaded with the I/O objects (PCI, network devices)

// Loads this machine's topology (or the XML file's when `xml` is not empty);
// with `io`, keeps the network and OpenFabrics devices and the PCI path to
// them, which costs some milliseconds, so only callers that need devices ask.
hwloc_topology_t load_topology(const std::string &xml, bool io, std::string *why) {
  hwloc_topology_t t;
  if (hwloc_topology_init(&t) != 0) {
    *why = "hwloc_topology_init failed";
    return nullptr;
  }
  if (io) hwloc_topology_set_io_types_filter(t, HWLOC_TYPE_FILTER_KEEP_IMPORTANT);
  if (!xml.empty() && hwloc_topology_set_xml(t, xml.c_str()) != 0) {
    *why =
        fmt::format("QUORUM_TOPOLOGY_XML={}: hwloc cannot read it: {}", xml, std::strerror(errno));
    hwloc_topology_destroy(t);
    return nullptr;
  }
  if (hwloc_topology_load(t) != 0) {
    *why = fmt::format("hwloc_topology_load{}: {}", xml.empty() ? "" : " of " + xml,
                       std::strerror(errno));
    hwloc_topology_destroy(t);
    return nullptr;
  }
  return t;
}

// The process-wide topology, loaded on first use, and again when
// QUORUM_TOPOLOGY_XML changes or the I/O objects are first needed; nullptr
// with *why on failure.
hwloc_topology_t topology_locked(std::string *why, bool need_io = false) {
  const std::string xml = knob_topology_xml.get();
  if (xml != g_topology_xml || (need_io && !g_topology_io)) {
    if (g_topology != nullptr) hwloc_topology_destroy(g_topology);
    g_topology = nullptr;
    g_topology_error.clear();
    g_topology_xml = xml;
    g_topology_io = false;
  }
  if (g_topology == nullptr && g_topology_error.empty()) {
    g_topology = load_topology(xml, need_io, &g_topology_error);
    g_topology_io = need_io && g_topology != nullptr;
  }
  *why = g_topology_error;
  return g_topology;
}

uint64_t fnv1a(const std::string &s, uint64_t h = 1469598103934665603ull) {
  for (unsigned char c : s) {
    h ^= c;
    h *= 1099511628211ull;
  }
  return h;
}

std::string hostname() {
  char host[256] = {0};
  gethostname(host, sizeof(host) - 1);
  return host;
}

std::string boot_id() {
  std::ifstream f("/proc/sys/kernel/random/boot_id");
  std::string id;
  std::getline(f, id);
  return id;
}

std::string plural(int n, const char *word) {
  return fmt::format("{} {}{}", n, word, n == 1 ? "" : "s");
}

}  // namespace

Status with_io_topology(const std::function<Status(hwloc_topology_t)> &fn) {
  std::lock_guard<std::mutex> lock(g_topology_mutex);
  std::string why;
  hwloc_topology_t t = topology_locked(&why, true);
  if (t == nullptr) return fail(QUORUM_ERR_INTERNAL, "topology", "{}", why);
  return fn(t);
}

Status query_topology(TopologyInfo *info) {
  std::lock_guard<std::mutex> lock(g_topology_mutex);
  std::string why;
  hwloc_topology_t t = topology_locked(&why);
  if (t == nullptr) return fail(QUORUM_ERR_INTERNAL, "topology", "{}", why);
  info->packages = hwloc_get_nbobjs_by_type(t, HWLOC_OBJ_PACKAGE);
  info->numa_nodes = hwloc_get_nbobjs_by_type(t, HWLOC_OBJ_NUMANODE);
  info->cores = hwloc_get_nbobjs_by_type(t, HWLOC_OBJ_CORE);
  info->pus = hwloc_get_nbobjs_by_type(t, HWLOC_OBJ_PU);
  info->last_level_cache_bytes = 0;
  for (hwloc_obj_type_t type : {HWLOC_OBJ_L3CACHE, HWLOC_OBJ_L2CACHE}) {
    hwloc_obj_t cache = hwloc_get_obj_by_type(t, type, 0);
    if (cache != nullptr && cache->attr != nullptr && cache->attr->cache.size > 0) {
      info->last_level_cache_bytes = cache->attr->cache.size;
      break;
    }
  }
  return kOk;
}

HostIdentity local_host_identity() {
  const std::string override_id = knob_host_id.get();
  if (!override_id.empty()) return host_identity_for(override_id);
  HostIdentity id;
  std::string name = hostname();
  id.hash = fnv1a(boot_id(), fnv1a(name));
  std::strncpy(id.hostname, name.c_str(), sizeof(id.hostname) - 1);
  return id;
}

HostIdentity host_identity_for(const std::string &host_id) {
  HostIdentity id;
  id.hash = fnv1a("id:" + host_id);
  std::strncpy(id.hostname, host_id.c_str(), sizeof(id.hostname) - 1);
  return id;
}

bool same_host(const HostIdentity &a, const HostIdentity &b) {
  return a.hash == b.hash && std::strncmp(a.hostname, b.hostname, sizeof(a.hostname)) == 0;
}

std::vector<int> local_ranks(const std::vector<HostIdentity> &ids, int rank) {
  std::vector<int> out;
  if (rank < 0 || rank >= static_cast<int>(ids.size())) return out;
  for (int r = 0; r < static_cast<int>(ids.size()); ++r) {
    if (same_host(ids[r], ids[rank])) out.push_back(r);
  }
  return out;
}

HostLayout host_layout(const std::vector<HostIdentity> &ids, int rank) {
  HostLayout layout;
  layout.local = local_ranks(ids, rank);
  auto it = std::find(layout.local.begin(), layout.local.end(), rank);
  layout.local_rank = it == layout.local.end() ? 0 : static_cast<int>(it - layout.local.begin());
  for (int r = 0; r < static_cast<int>(ids.size()); ++r) {
    bool first_on_host = true;
    for (int q = 0; q < r && first_on_host; ++q) first_on_host = !same_host(ids[q], ids[r]);
    if (!first_on_host) continue;
    if (!layout.local.empty() && r == layout.local.front()) {
      layout.host_index = static_cast<int>(layout.leaders.size());
    }
    layout.leaders.push_back(r);
    layout.hosts.push_back(local_ranks(ids, r));
  }
  return layout;
}

int allowed_cpu_count() {
  cpu_set_t set;
  CPU_ZERO(&set);
  if (sched_getaffinity(0, sizeof(set), &set) != 0) return 0;
  return CPU_COUNT(&set);
}

int usable_core_count() {
  TopologyInfo topo;
  int cores = query_topology(&topo) == kOk ? topo.cores : 0;
  if (int allowed = allowed_cpu_count(); allowed > 0 && cores > 0) cores = std::min(cores, allowed);
  return cores;
}

bool CpuMask::known() const {
  return count() > 0;
}

int CpuMask::count() const {
  int n = 0;
  for (uint64_t word : bits) n += __builtin_popcountll(word);
  return n;
}

CpuMask allowed_cpus() {
  CpuMask mask;
  cpu_set_t set;
  CPU_ZERO(&set);
  static_assert(CpuMask::kCpus <= CPU_SETSIZE);
  if (sched_getaffinity(0, sizeof(set), &set) != 0) return mask;
  for (int cpu = 0; cpu < CpuMask::kCpus; ++cpu) {
    if (CPU_ISSET(cpu, &set)) mask.bits[cpu / 64] |= uint64_t{1} << (cpu % 64);
  }
  return mask;
}

int cores_covered(const std::vector<CpuMask> &masks) {
  if (masks.empty()) return 0;
  CpuMask all;
  for (const CpuMask &m : masks) {
    if (!m.known()) return 0;
    for (size_t w = 0; w < std::size(all.bits); ++w) all.bits[w] |= m.bits[w];
  }
  std::lock_guard<std::mutex> lock(g_topology_mutex);
  std::string why;
  hwloc_topology_t t = topology_locked(&why);
  if (t == nullptr) return 0;
  hwloc_bitmap_t set = hwloc_bitmap_alloc();
  for (int cpu = 0; cpu < CpuMask::kCpus; ++cpu) {
    if (all.bits[cpu / 64] >> (cpu % 64) & 1) hwloc_bitmap_set(set, static_cast<unsigned>(cpu));
  }
  int cores = 0;
  const int total = hwloc_get_nbobjs_by_type(t, HWLOC_OBJ_CORE);
  for (int c = 0; c < total; ++c) {
    hwloc_obj_t core = hwloc_get_obj_by_type(t, HWLOC_OBJ_CORE, static_cast<unsigned>(c));
    if (core != nullptr && hwloc_bitmap_intersects(core->cpuset, set)) ++cores;
  }
  hwloc_bitmap_free(set);
  return cores;
}

Status bind_thread_to_cores(const std::vector<int> &cores) {
  std::lock_guard<std::mutex> lock(g_topology_mutex);
  std::string why;
  hwloc_topology_t t = topology_locked(&why);
  if (t == nullptr) return fail(QUORUM_ERR_INTERNAL, "topology", "{}", why);
  if (cores.empty()) return fail(QUORUM_ERR_INVALID_ARG, "topology", "bind: no cores given");
  // hwloc's binding calls do nothing (and succeed) on a topology from elsewhere.
  if (!hwloc_topology_is_thissystem(t)) {
    return fail(QUORUM_ERR_UNSUPPORTED, "topology", "bind: the topology ({}) is not this machine's",
                g_topology_xml.empty() ? "hwloc's environment, e.g. HWLOC_XMLFILE"
                                       : "QUORUM_TOPOLOGY_XML=" + g_topology_xml);
  }
  hwloc_bitmap_t set = hwloc_bitmap_alloc();
  for (int c : cores) {
    hwloc_obj_t core = hwloc_get_obj_by_type(t, HWLOC_OBJ_CORE, static_cast<unsigned>(c));
    if (core == nullptr) {
      hwloc_bitmap_free(set);
      return fail(QUORUM_ERR_INVALID_ARG, "topology", "bind: no core {} (this host has {})", c,
                  hwloc_get_nbobjs_by_type(t, HWLOC_OBJ_CORE));
    }
    hwloc_bitmap_or(set, set, core->cpuset);
  }
  int rc = hwloc_set_cpubind(t, set, HWLOC_CPUBIND_THREAD);
  int err = errno;
  hwloc_bitmap_free(set);
  if (rc != 0) {
    return fail(QUORUM_ERR_UNSUPPORTED, "topology", "binding the thread to cores failed: {}",
                std::strerror(err));
  }
  return kOk;
}

std::string describe_topology() {
  TopologyInfo info;
  std::string host = hostname();
  const std::string version = std::string("hwloc ") + HWLOC_VERSION;
  if (query_topology(&info) != kOk)
    return fmt::format("host {}: topology unknown ({})", host, version);
  return fmt::format("host {}: {}, {}, {}, {}, last-level cache {} KiB ({})", host,
                     plural(info.packages, "package"), plural(info.numa_nodes, "NUMA node"),
                     plural(info.cores, "core"), plural(info.pus, "PU"),
                     info.last_level_cache_bytes / 1024, version);
}

}  // namespace quorum
