// topology.hpp: what the runtime knows about the machine (from hwloc) and
// which ranks share a host. Each rank's HostIdentity is exchanged through the
// bootstrap; ranks with equal identities share memory and are "local".
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "runtime/knobs.hpp"
#include "runtime/status.hpp"

namespace quorum {

struct TopologyInfo {
  int packages = 0;
  int numa_nodes = 0;
  int cores = 0;
  int pus = 0;  // hardware threads
  // Size of one last-level cache (L3, else L2) in bytes; 0 when unknown.
  uint64_t last_level_cache_bytes = 0;
};

// Counts from hwloc (loaded once per process).
Status query_topology(TopologyInfo *info);

// How many CPUs this process may run on (its affinity mask; a launcher such
// as srun may bind it to fewer than the machine has). 0 when unknown.
int allowed_cpu_count();

// The cores this process can use: hwloc's core count, capped by
// allowed_cpu_count() (a rank bound to fewer CPUs by srun or
// mpirun --bind-to shares them). 0 when unknown.
int usable_core_count();

// The CPUs a process may run on (its affinity mask, as sched_getaffinity
// numbers them), fixed-size so that the ranks of a host can allgather them.
// Empty (known() false) when the mask could not be read, e.g. on a host with
// more CPUs than it holds.
struct CpuMask {
  static constexpr int kCpus = 1024;
  uint64_t bits[kCpus / 64] = {};
  bool known() const;
  int count() const;
};
static_assert(sizeof(CpuMask) == 128, "CpuMask travels as 128 bytes");

// This process's affinity mask (its calling thread's).
CpuMask allowed_cpus();

// How many cores of this host the union of `masks` touches (hwloc's cores, a
// core counted once however many of its PUs the masks name): the cores that
// ranks bound to these masks can use together. 0 when a mask is unknown or
// the topology cannot be read. Ranks with a core each (e.g. bound core per
// rank by mpirun or srun, or unbound on a host with enough cores) have
// `cores_covered(their masks) >= ranks`; ranks bound to fewer cores than
// there are ranks share them.
int cores_covered(const std::vector<CpuMask> &masks);

// Fixed-size and trivially copyable, so it can be allgathered as bytes.
struct HostIdentity {
  uint64_t hash = 0;       // of hostname + kernel boot id, or of QUORUM_HOST_ID
  char hostname[56] = {};  // for messages; NUL-terminated, truncated
};
static_assert(sizeof(HostIdentity) == 64, "HostIdentity travels as 64 bytes");

HostIdentity local_host_identity();
// The identity QUORUM_HOST_ID=host_id gives (equal ids: one host).
HostIdentity host_identity_for(const std::string &host_id);
bool same_host(const HostIdentity &a, const HostIdentity &b);

// The ranks on `rank`'s host (including it), ascending.
std::vector<int> local_ranks(const std::vector<HostIdentity> &ids, int rank);

// The full picture hierarchical algorithms need.
struct HostLayout {
  std::vector<int> local;               // ranks on my host, ascending
  int local_rank = 0;                   // my index in `local`
  int host_index = 0;                   // hosts numbered by their lowest rank
  std::vector<int> leaders;             // lowest rank of every host, ascending (one per host)
  std::vector<std::vector<int>> hosts;  // the ranks of every host, ascending, in leaders' order
};
HostLayout host_layout(const std::vector<HostIdentity> &ids, int rank);

// Binds the calling thread to the union of the given cores (hwloc logical
// indices). Best effort: an error is returned, never fatal.
Status bind_thread_to_cores(const std::vector<int> &cores);

// For the progress thread: if QUORUM_BIND_PROGRESS is on, binds the calling
// thread to the core plan_progress_placement() chooses (topology_devices.hpp):
// near this rank's network device, else counted from the last by local rank.
// Logs the choice at info level; logs a warning and returns kOk when binding fails.
Status bind_progress_thread(int local_rank);

// One line for quorum-info: "host h: 1 package, 1 NUMA node, 2 cores, 2 PUs (hwloc 2.9.0)".
std::string describe_topology();

extern Knob<bool> knob_bind_progress;
extern Knob<std::string> knob_host_id;
extern Knob<std::string> knob_topology_xml;

}  // namespace quorum
