// topology_test.cpp: hwloc counts, host identities, local ranks and binding.
#include "runtime/topology.hpp"

#include <gtest/gtest.h>

#include <cstring>
#include <fstream>
#include <string>
#include <thread>

namespace quorum {
namespace {

HostIdentity host(const char *name, uint64_t hash) {
  HostIdentity id;
  id.hash = hash;
  std::strncpy(id.hostname, name, sizeof(id.hostname) - 1);
  return id;
}

TEST(Topology, CountsFromHwloc) {
  TopologyInfo info;
  ASSERT_EQ(query_topology(&info), kOk);
  EXPECT_GE(info.packages, 1);
  EXPECT_GE(info.numa_nodes, 1);
  EXPECT_GE(info.cores, 1);
  EXPECT_GE(info.pus, info.cores);
  // The last-level cache against the kernel's own report, where it gives one.
  std::ifstream l3("/sys/devices/system/cpu/cpu0/cache/index3/size");
  std::string size;
  if (l3 >> size && size.size() > 1 && size.back() == 'K') {
    EXPECT_EQ(info.last_level_cache_bytes, std::stoull(size) * 1024) << size;
  }
  std::string d = describe_topology();
  EXPECT_NE(d.find("core"), std::string::npos) << d;
  EXPECT_NE(d.find("hwloc"), std::string::npos) << d;
  EXPECT_EQ(d.find('\n'), std::string::npos) << d;
}

TEST(Topology, LocalIdentityIsStable) {
  HostIdentity a = local_host_identity(), b = local_host_identity();
  EXPECT_TRUE(same_host(a, b));
  EXPECT_NE(a.hash, 0u);
  EXPECT_NE(a.hostname[0], '\0');
}

TEST(Topology, HostIdOverride) {
  HostIdentity real = local_host_identity();
  knob_host_id.set_override("fake-node-7");
  HostIdentity fake = local_host_identity();
  knob_host_id.set_override(std::nullopt);
  EXPECT_STREQ(fake.hostname, "fake-node-7");
  EXPECT_FALSE(same_host(real, fake));
  // CommOptions::host_id gives the same identity as the knob.
  EXPECT_TRUE(same_host(host_identity_for("fake-node-7"), fake));
  EXPECT_EQ(host_identity_for("fake-node-7").hash, fake.hash);
  EXPECT_FALSE(same_host(host_identity_for("fake-node-8"), fake));
}

TEST(Topology, LocalRanksAndLayout) {
  // Ranks 0,2,4 on host a; 1,3 on host b; 5 alone on c.
  std::vector<HostIdentity> ids = {host("a", 1), host("b", 2), host("a", 1),
                                   host("b", 2), host("a", 1), host("c", 3)};
  EXPECT_EQ(local_ranks(ids, 0), (std::vector<int>{0, 2, 4}));
  EXPECT_EQ(local_ranks(ids, 3), (std::vector<int>{1, 3}));
  EXPECT_EQ(local_ranks(ids, 5), (std::vector<int>{5}));
  EXPECT_TRUE(local_ranks(ids, 6).empty());
  HostLayout l = host_layout(ids, 4);
  EXPECT_EQ(l.local, (std::vector<int>{0, 2, 4}));
  EXPECT_EQ(l.local_rank, 2);
  EXPECT_EQ(l.host_index, 0);
  EXPECT_EQ(l.leaders, (std::vector<int>{0, 1, 5}));
  HostLayout m = host_layout(ids, 3);
  EXPECT_EQ(m.local_rank, 1);
  EXPECT_EQ(m.host_index, 1);
  EXPECT_EQ(host_layout(ids, 5).host_index, 2);
  // Same hash but another name is another host (no silent collision).
  std::vector<HostIdentity> clash = {host("x", 9), host("y", 9)};
  EXPECT_EQ(local_ranks(clash, 0), (std::vector<int>{0}));
}

TEST(Topology, BindThread) {
  TopologyInfo info;
  ASSERT_EQ(query_topology(&info), kOk);
  EXPECT_EQ(bind_thread_to_cores({info.cores + 5}), QUORUM_ERR_INVALID_ARG);
  EXPECT_EQ(bind_thread_to_cores({}), QUORUM_ERR_INVALID_ARG);
  Status s = QUORUM_ERR_INTERNAL;
  std::thread t([&] { s = bind_thread_to_cores({info.cores - 1}); });
  t.join();
  // Best effort: allowed to be unsupported in a restricted container.
  EXPECT_TRUE(s == kOk || s == QUORUM_ERR_UNSUPPORTED) << status_name(s);
  knob_bind_progress.set_override("1");
  std::thread u([&] { s = bind_progress_thread(3); });
  u.join();
  knob_bind_progress.set_override(std::nullopt);
  EXPECT_EQ(s, kOk);
}

TEST(Topology, UsableCoresFollowTheAffinityMask) {
  TopologyInfo info;
  ASSERT_EQ(query_topology(&info), kOk);
  EXPECT_GE(usable_core_count(), 1);
  EXPECT_LE(usable_core_count(), info.cores);
  EXPECT_LE(usable_core_count(), allowed_cpu_count());
  // A thread bound to one CPU (as srun would bind a rank) has one core to use.
  int bound_usable = -1;
  std::thread t([&] {
    if (bind_thread_to_cores({0}) != kOk) return;
    if (allowed_cpu_count() == 1) bound_usable = usable_core_count();
  });
  t.join();
  if (bound_usable == -1) GTEST_SKIP() << "cannot bind a thread to one CPU here";
  EXPECT_EQ(bound_usable, 1);
}

// Ranks bound core per rank (mpirun's and srun's default) see one CPU each;
// the union of their masks says whether they share cores.
TEST(Topology, CoresCoveredCountTheUnionOfTheMasks) {
  TopologyInfo info;
  ASSERT_EQ(query_topology(&info), kOk);
  const CpuMask mine = allowed_cpus();
  ASSERT_TRUE(mine.known());
  EXPECT_EQ(mine.count(), allowed_cpu_count());
  EXPECT_EQ(cores_covered({}), 0);
  EXPECT_EQ(cores_covered({CpuMask{}}), 0);  // unknown: no answer
  EXPECT_EQ(cores_covered({mine, CpuMask{}}), 0);
  const int all = cores_covered({mine});
  EXPECT_GE(all, 1);
  EXPECT_LE(all, info.cores);
  if (info.pus == info.cores) {
    EXPECT_EQ(all, usable_core_count());
  }
  // Single CPUs of the mask: one core each, counted once when repeated.
  std::vector<CpuMask> singles;
  for (int cpu = 0; cpu < CpuMask::kCpus && singles.size() < 2; ++cpu) {
    if (!(mine.bits[cpu / 64] >> (cpu % 64) & 1)) continue;
    CpuMask one;
    one.bits[cpu / 64] = uint64_t{1} << (cpu % 64);
    singles.push_back(one);
  }
  ASSERT_FALSE(singles.empty());
  EXPECT_EQ(cores_covered({singles[0]}), 1);
  EXPECT_EQ(cores_covered({singles[0], singles[0]}), 1);
  if (singles.size() == 2 && info.pus == info.cores) {
    EXPECT_EQ(cores_covered({singles[0], singles[1]}), 2);
  }
}

}  // namespace
}  // namespace quorum
