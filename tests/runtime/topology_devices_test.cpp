// topology_devices_test.cpp: network devices and the progress thread's core,
// on real hwloc loading the XML topologies of tests/runtime/topologies (two
// packages, a NUMA node each, two cores each; no device, one NIC on node 1,
// or three NICs) through QUORUM_TOPOLOGY_XML, and on this machine.
#include "runtime/topology_devices.hpp"

#include <gtest/gtest.h>
#include <unistd.h>

#include <cstdlib>
#include <optional>
#include <string>
#include <thread>

#include "runtime/topology.hpp"

#ifndef QUORUM_TOPOLOGY_XML_DIR
#error "the build passes QUORUM_TOPOLOGY_XML_DIR"
#endif

namespace quorum {
namespace {

// Loads one of the test topologies for the scope's lifetime.
class XmlTopology {
 public:
  explicit XmlTopology(const std::string &file) {
    knob_topology_xml.set_override(std::string(QUORUM_TOPOLOGY_XML_DIR) + "/" + file);
  }
  ~XmlTopology() { knob_topology_xml.set_override(std::nullopt); }
};

// Sets (or unsets, with nullopt) UCX_NET_DEVICES for the scope's lifetime.
class NetDevicesEnv {
 public:
  explicit NetDevicesEnv(std::optional<std::string> value) {
    if (const char *old = std::getenv("UCX_NET_DEVICES")) old_ = old;
    if (value) {
      setenv("UCX_NET_DEVICES", value->c_str(), 1);
    } else {
      unsetenv("UCX_NET_DEVICES");
    }
  }
  ~NetDevicesEnv() {
    if (old_) {
      setenv("UCX_NET_DEVICES", old_->c_str(), 1);
    } else {
      unsetenv("UCX_NET_DEVICES");
    }
  }

 private:
  std::optional<std::string> old_;
};

ProgressPlacement plan(int local_rank) {
  ProgressPlacement p;
  EXPECT_EQ(plan_progress_placement(local_rank, &p), kOk);
  return p;
}

void expect_near(const ProgressPlacement &p, const std::string &device, int numa, int core) {
  EXPECT_EQ(p.rule, PlacementRule::kNearDevice) << describe_placement(p);
  EXPECT_EQ(p.fallback, PlacementFallback::kNone) << describe_placement(p);
  EXPECT_EQ(p.device, device) << describe_placement(p);
  EXPECT_EQ(p.numa_node, numa) << describe_placement(p);
  EXPECT_EQ(p.core, core) << describe_placement(p);
}

void expect_last_core(const ProgressPlacement &p, PlacementFallback why, int core) {
  EXPECT_EQ(p.rule, PlacementRule::kLastCoreByRank) << describe_placement(p);
  EXPECT_EQ(p.fallback, why) << describe_placement(p);
  EXPECT_EQ(p.numa_node, -1) << describe_placement(p);
  EXPECT_EQ(p.core, core) << describe_placement(p);
}

TEST(TopologyDevices, NicOnNodeOneIsFoundWithItsNumaNode) {
  XmlTopology xml("two-numa-nic-on-node1.xml");
  TopologyInfo info;
  ASSERT_EQ(query_topology(&info), kOk);
  EXPECT_EQ(info.packages, 2);
  EXPECT_EQ(info.numa_nodes, 2);
  EXPECT_EQ(info.cores, 4);
  DeviceTopology topo;
  ASSERT_EQ(query_device_topology(&topo), kOk);
  EXPECT_EQ(topo.numa_nodes, 2);
  EXPECT_EQ(topo.cores, 4);
  EXPECT_EQ(topo.usable_cores, (std::vector<int>{0, 1, 2, 3}));
  ASSERT_EQ(topo.devices.size(), 1u);
  EXPECT_EQ(topo.devices[0].name, "eth1");
  EXPECT_EQ(topo.devices[0].kind, NetDeviceKind::kNetwork);
  EXPECT_EQ(topo.devices[0].numa_nodes, (std::vector<int>{1}));
  EXPECT_EQ(topo.devices[0].cores, (std::vector<int>{2, 3}));
}

TEST(TopologyDevices, ProgressCoreNearTheNicSpreadByLocalRank) {
  XmlTopology xml("two-numa-nic-on-node1.xml");
  for (std::optional<std::string> env :
       {std::optional<std::string>(), std::optional<std::string>("all"),
        std::optional<std::string>("eth1"), std::optional<std::string>("lo,eth1:1")}) {
    NetDevicesEnv net(env);
    SCOPED_TRACE(env.value_or("(unset)"));
    // Four ranks on this host: NUMA node 1's cores 3, 2, 3, 2 (from its last).
    expect_near(plan(0), "eth1", 1, 3);
    expect_near(plan(1), "eth1", 1, 2);
    expect_near(plan(2), "eth1", 1, 3);
    expect_near(plan(3), "eth1", 1, 2);
  }
}

TEST(TopologyDevices, NetDevicesNamingNoHwlocDeviceFallsBack) {
  XmlTopology xml("two-numa-nic-on-node1.xml");
  for (const char *env : {"lo", "memory,lo", "eth7:1", "^eth1"}) {
    NetDevicesEnv net(std::string{env});
    SCOPED_TRACE(env);
    PlacementFallback why =
        env[0] == '^' ? PlacementFallback::kNoNetDevice : PlacementFallback::kNetDevicesNotFound;
    // The machine's cores from the last: 3, 2, 1 (not NUMA node 1's 3, 2, 3).
    expect_last_core(plan(0), why, 3);
    expect_last_core(plan(1), why, 2);
    expect_last_core(plan(2), why, 1);
    EXPECT_TRUE(plan(0).device.empty());
  }
}

TEST(TopologyDevices, NoDevicesFallsBackToTheLastCoreRule) {
  XmlTopology xml("two-numa-no-devices.xml");
  NetDevicesEnv net(std::nullopt);
  DeviceTopology topo;
  ASSERT_EQ(query_device_topology(&topo), kOk);
  EXPECT_EQ(topo.numa_nodes, 2);
  EXPECT_TRUE(topo.devices.empty());
  for (int r = 0; r < 6; ++r) expect_last_core(plan(r), PlacementFallback::kNoNetDevice, 3 - r % 4);
  EXPECT_NE(describe_placement(plan(0)).find("no network device"), std::string::npos)
      << describe_placement(plan(0));
}

TEST(TopologyDevices, ThreeNicsUcxNetDevicesPicksTheOne) {
  XmlTopology xml("two-numa-three-nics.xml");
  DeviceTopology topo;
  ASSERT_EQ(query_device_topology(&topo), kOk);
  ASSERT_EQ(topo.devices.size(), 4u);
  const std::vector<std::string> names = {"ib0", "mlx5_0", "eth1", "eth2"};
  const std::vector<std::vector<int>> numa = {{0}, {0}, {1}, {0, 1}};
  for (size_t i = 0; i < names.size(); ++i) {
    EXPECT_EQ(topo.devices[i].name, names[i]);
    EXPECT_EQ(topo.devices[i].numa_nodes, numa[i]) << names[i];
  }
  EXPECT_EQ(topo.devices[1].kind, NetDeviceKind::kOpenFabrics);
  EXPECT_EQ(topo.devices[3].cores, (std::vector<int>{0, 1, 2, 3}));
  {
    NetDevicesEnv net(std::nullopt);  // the first device hwloc lists
    expect_near(plan(0), "ib0", 0, 1);
    expect_near(plan(1), "ib0", 0, 0);
  }
  {
    NetDevicesEnv net(std::string("mlx5_0:1"));
    expect_near(plan(0), "mlx5_0", 0, 1);
  }
  {
    NetDevicesEnv net(std::string("lo, eth1 ,mlx5_0:1"));  // the first hwloc knows
    expect_near(plan(0), "eth1", 1, 3);
  }
  {
    NetDevicesEnv net(std::string("^ib0,mlx5_0"));  // every device but those
    expect_near(plan(1), "eth1", 1, 2);
  }
  {
    NetDevicesEnv net(std::string("eth2"));  // below the host bridge of the whole machine
    ProgressPlacement p = plan(0);
    expect_last_core(p, PlacementFallback::kDeviceNotNumaLocal, 3);
    EXPECT_EQ(p.device, "eth2");
  }
}

TEST(TopologyDevices, OnlyUsableCoresAreChosen) {
  XmlTopology xml("two-numa-nic-on-node1.xml");
  DeviceTopology topo;
  ASSERT_EQ(query_device_topology(&topo), kOk);
  // A rank bound (by mpirun or srun) to cores 0-2 keeps to core 2 of node 1.
  topo.usable_cores = {0, 1, 2};
  for (int r = 0; r < 3; ++r) expect_near(choose_progress_placement(topo, r, ""), "eth1", 1, 2);
  // Bound to node 0 only: nothing near the NIC, so the older rule.
  topo.usable_cores = {0, 1};
  expect_last_core(choose_progress_placement(topo, 1, ""),
                   PlacementFallback::kNoUsableCoreNearDevice, 2);
  // One NUMA node: nothing to choose between.
  topo.numa_nodes = 1;
  expect_last_core(choose_progress_placement(topo, 0, "eth1"), PlacementFallback::kOneNumaNode, 3);
  // No core at all: no placement.
  EXPECT_EQ(choose_progress_placement(DeviceTopology{}, 0, "").rule, PlacementRule::kNone);
  EXPECT_EQ(choose_progress_placement(DeviceTopology{}, 0, "").core, -1);
}

TEST(TopologyDevices, UnreadableXmlFailsAndClearingItRecovers) {
  {
    XmlTopology xml("no-such-topology.xml");
    DeviceTopology topo;
    EXPECT_EQ(query_device_topology(&topo), QUORUM_ERR_INTERNAL);
    EXPECT_NE(std::string(last_error()).find("no-such-topology.xml"), std::string::npos)
        << last_error();
    TopologyInfo info;
    EXPECT_EQ(query_topology(&info), QUORUM_ERR_INTERNAL);
    ProgressPlacement p;
    EXPECT_EQ(plan_progress_placement(0, &p), QUORUM_ERR_INTERNAL);
    // The progress thread still starts: binding is best effort.
    knob_bind_progress.set_override("1");
    EXPECT_EQ(bind_progress_thread(0), kOk);
    knob_bind_progress.set_override(std::nullopt);
  }
  DeviceTopology topo;
  ASSERT_EQ(query_device_topology(&topo), kOk);
  EXPECT_GE(topo.cores, 1);
}

TEST(TopologyDevices, BindingOnAnXmlTopologyIsRefusedNotFatal) {
  XmlTopology xml("two-numa-nic-on-node1.xml");
  knob_bind_progress.set_override("1");
  Status s = QUORUM_ERR_INTERNAL;
  std::thread t([&] { s = bind_progress_thread(0); });
  t.join();
  knob_bind_progress.set_override(std::nullopt);
  EXPECT_EQ(s, kOk);
  EXPECT_EQ(bind_thread_to_cores({3}), QUORUM_ERR_UNSUPPORTED);  // not this system's cores
}

TEST(TopologyDevices, ThisMachine) {
  NetDevicesEnv net(std::nullopt);
  DeviceTopology topo;
  ASSERT_EQ(query_device_topology(&topo), kOk);
  ASSERT_GE(topo.cores, 1);
  EXPECT_FALSE(topo.usable_cores.empty());
  for (const NetDevice &d : topo.devices) {
    // Every device hwloc reports is one the kernel lists.
    std::string dir =
        d.kind == NetDeviceKind::kNetwork ? "/sys/class/net/" : "/sys/class/infiniband/";
    EXPECT_EQ(access((dir + d.name).c_str(), F_OK), 0) << dir << d.name;
    EXPECT_FALSE(d.numa_nodes.empty()) << d.name;
    EXPECT_FALSE(d.cores.empty()) << d.name;
  }
  ProgressPlacement p = plan(1);
  EXPECT_GE(p.core, 0);
  EXPECT_LT(p.core, topo.cores);
  if (topo.numa_nodes == 1) {
    EXPECT_EQ(p.rule, PlacementRule::kLastCoreByRank) << describe_placement(p);
    EXPECT_EQ(p.core, topo.cores - 1 - 1 % topo.cores);
  }
  // And the thread binds there: to that one core's hardware threads (best
  // effort; a restricted container may refuse any binding).
  TopologyInfo info;
  ASSERT_EQ(query_topology(&info), kOk);
  Status can_bind = QUORUM_ERR_INTERNAL;
  std::thread probe([&] { can_bind = bind_thread_to_cores({p.core}); });
  probe.join();
  knob_bind_progress.set_override("1");
  Status s = QUORUM_ERR_INTERNAL;
  int cpus_after = -1;
  std::thread t([&] {
    s = bind_progress_thread(1);
    cpus_after = allowed_cpu_count();
  });
  t.join();
  knob_bind_progress.set_override(std::nullopt);
  EXPECT_EQ(s, kOk);
  if (can_bind != kOk) GTEST_SKIP() << "this machine refuses thread binding";
  EXPECT_EQ(cpus_after, info.pus / info.cores);
}

}  // namespace
}  // namespace quorum
