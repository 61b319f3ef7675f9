// quorum-info: what quorum sees on this machine and in this job: version and
// build configuration, the bootstrap in use (rank/size), the transports
// available and the one chosen (with UCX's error mode per peer), the job's
// layout (the ranks of each host, their leaders, and the core and network
// device each rank's progress thread would be bound near), UCX's version and
// memory types, the topology with its network devices and their NUMA nodes,
// and every knob with its value, default, source and help. `--json` prints
// the same as one JSON object.
//
// Run alone it describes a single process; under quorum-run or mpirun it
// connects like any quorum program (rank 0 prints unless --all-ranks).
#include <fmt/format.h>
#include <ucp/api/ucp.h>
#include <ucs/memory/memory_type.h>

#include <CLI/CLI.hpp>
#include <memory>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "collectives/communicator.hpp"
#include "quorum/quorum.h"
#include "quorum_build_config.h"
#include "runtime/bootstrap/bootstrap.hpp"
#include "runtime/knobs.hpp"
#include "tools/cli_common.hpp"
#include "transports/transport.hpp"

#if __has_include("runtime/topology.hpp")
#include <cstring>

#include "runtime/topology.hpp"
#include "runtime/topology_devices.hpp"
#define QUORUM_INFO_HAVE_TOPOLOGY 1
#endif

namespace {

using nlohmann::json;

// How this quorum was built: meson's build type, the compiler, and the
// versions of the libraries it was built against (CUDA: "no" without it).
json build_facts() {
  return json{{"build_type", QUORUM_BUILD_TYPE},
              {"compiler", QUORUM_BUILD_COMPILER},
              {"cuda", QUORUM_BUILD_CUDA},
              {"pmix", QUORUM_BUILD_PMIX},
              {"ucx", QUORUM_BUILD_UCX},
              {"hwloc", QUORUM_BUILD_HWLOC},
              {"signature_check_default", QUORUM_SIGNATURE_CHECK_DEFAULT != 0}};
}

// UCX as loaded at run time: version and the memory types its context accepts.
json ucx_facts() {
  json j;
  j["version"] = ucp_get_version_string();
  ucp_config_t *config = nullptr;
  if (ucp_config_read(nullptr, nullptr, &config) != UCS_OK) {
    j["error"] = "ucp_config_read failed";
    return j;
  }
  ucp_params_t params{};
  params.field_mask = UCP_PARAM_FIELD_FEATURES;
  params.features = UCP_FEATURE_TAG;
  ucp_context_h context = nullptr;
  ucs_status_t s = ucp_init(&params, config, &context);
  ucp_config_release(config);
  if (s != UCS_OK) {
    j["error"] = fmt::format("ucp_init failed: {}", ucs_status_string(s));
    return j;
  }
  ucp_context_attr_t attr{};
  attr.field_mask = UCP_ATTR_FIELD_MEMORY_TYPES;
  if (ucp_context_query(context, &attr) == UCS_OK) {
    json types = json::array();
    for (int t = 0; t < UCS_MEMORY_TYPE_LAST; ++t) {
      if (attr.memory_types & (uint64_t{1} << t)) types.push_back(ucs_memory_type_names[t]);
    }
    j["memory_types"] = types;
    bool cuda = false;
    for (const auto &t : types) cuda = cuda || t.get<std::string>().rfind("cuda", 0) == 0;
    j["cuda_buffers"] = cuda;
  }
  ucp_cleanup(context);
  return j;
}

#ifdef QUORUM_INFO_HAVE_TOPOLOGY
json placement_json(const quorum::ProgressPlacement &p) {
  return json{{"core", p.core},
              {"numa_node", p.numa_node},
              {"device", p.device},
              {"rule", quorum::placement_rule_name(p.rule)},
              {"fallback", quorum::placement_fallback_text(p.fallback)},
              {"summary", quorum::describe_placement(p)}};
}

// One rank's placement as fixed-size bytes, for the allgather.
struct PlacementWire {
  int32_t core = -1;
  int32_t numa_node = -1;
  int32_t rule = 0;
  int32_t fallback = 0;
  char device[48] = {};
};

// The core and device each rank's progress thread would use, gathered on
// every rank (each rank plans for its own host and local rank).
json gather_placements(quorum::Communicator &comm, int local_rank) {
  quorum::ProgressPlacement mine;
  PlacementWire wire;
  if (quorum::plan_progress_placement(local_rank, &mine) == quorum::kOk) {
    wire.core = mine.core;
    wire.numa_node = mine.numa_node;
    wire.rule = static_cast<int32_t>(mine.rule);
    wire.fallback = static_cast<int32_t>(mine.fallback);
    std::strncpy(wire.device, mine.device.c_str(), sizeof(wire.device) - 1);
  } else {
    wire.rule = static_cast<int32_t>(quorum::PlacementRule::kNone);
  }
  std::vector<PlacementWire> all(comm.size());
  if (comm.allgather(&wire, all.data(), sizeof(wire)) != quorum::kOk) {
    return json{{"error", quorum::last_error()}};
  }
  json list = json::array();
  for (int r = 0; r < comm.size(); ++r) {
    quorum::ProgressPlacement p;
    p.core = all[r].core;
    p.numa_node = all[r].numa_node;
    p.rule = static_cast<quorum::PlacementRule>(all[r].rule);
    p.fallback = static_cast<quorum::PlacementFallback>(all[r].fallback);
    p.device = all[r].device;
    json j = placement_json(p);
    j["rank"] = r;
    list.push_back(j);
  }
  return list;
}
#endif

json topology_facts() {
#ifdef QUORUM_INFO_HAVE_TOPOLOGY
  json j;
  quorum::TopologyInfo t;
  if (quorum::query_topology(&t) == quorum::kOk) {
    j["packages"] = t.packages;
    j["numa_nodes"] = t.numa_nodes;
    j["cores"] = t.cores;
    j["pus"] = t.pus;
    j["last_level_cache_bytes"] = t.last_level_cache_bytes;
  } else {
    j["error"] = quorum::last_error();
  }
  j["summary"] = quorum::describe_topology();
  j["hostname"] = quorum::local_host_identity().hostname;
  quorum::DeviceTopology devices;
  if (quorum::query_device_topology(&devices) == quorum::kOk) {
    json list = json::array();
    for (const auto &d : devices.devices) {
      list.push_back({{"name", d.name},
                      {"kind", quorum::net_device_kind_name(d.kind)},
                      {"numa_nodes", d.numa_nodes},
                      {"cores", d.cores}});
    }
    j["net_devices"] = list;
  }
  return j;
#else
  return nullptr;
#endif
}

json knob_facts() {
  json list = json::array();
  for (quorum::KnobBase *k : quorum::all_knobs()) {
    json j;
    j["name"] = k->name();
    j["type"] = k->type();
    j["value"] = k->value_text();
    j["default"] = k->default_text();
    j["source"] = quorum::knob_source_name(k->source());
    j["help"] = k->help();
    if (!k->choices().empty()) j["choices"] = k->choices();
    std::string err = k->error();
    if (!err.empty()) j["error"] = err;
    list.push_back(j);
  }
  return list;
}

// Bootstraps and, unless told not to, connects a communicator the way
// quorum_init does, to show what a program would get.
json job_facts(bool connect, int *rank_out, bool *ok) {
  json j;
  std::unique_ptr<quorum::Bootstrap> bootstrap;
  if (quorum::bootstrap_from_environment(&bootstrap) != quorum::kOk) {
    j["bootstrap"] = {{"error", quorum::last_error()}};
    *ok = false;
    return j;
  }
  *rank_out = bootstrap->rank();
  j["bootstrap"] = {
      {"name", bootstrap->name()}, {"rank", bootstrap->rank()}, {"size", bootstrap->size()}};
  json transports = json::array();
  for (const auto &t : quorum::transport_table()) {
    transports.push_back(
        {{"name", t.name}, {"priority", t.priority}, {"multi_process", t.multi_process}});
  }
  j["transports"] = transports;
  if (!connect) {
    j["transport"] = nullptr;
    return j;
  }
  std::unique_ptr<quorum::Communicator> comm;
  if (quorum::Communicator::create(std::move(bootstrap), &comm) != quorum::kOk) {
    j["transport"] = {{"error", quorum::last_error()}};
    *ok = false;
    return j;
  }
  j["transport"] = {{"name", comm->transport_name()},
                    {"description", comm->transport_description()}};
  const quorum::HostLayout &layout = comm->layout();
  j["layout"] = {{"hosts", layout.hosts},
                 {"leaders", layout.leaders},
                 {"host_index", layout.host_index},
                 {"local_rank", layout.local_rank}};
#ifdef QUORUM_INFO_HAVE_TOPOLOGY
  j["progress_placement"] = gather_placements(*comm, layout.local_rank);
#endif
  if (comm->finalize() != quorum::kOk) {
    j["transport"]["finalize_error"] = quorum::last_error();
    *ok = false;
  }
  return j;
}

std::string text_or(const json &j, const char *key, const std::string &fallback) {
  return j.contains(key) && j[key].is_string() ? j[key].get<std::string>() : fallback;
}

// "2 hosts: [0,1] [2,3]; leaders 0,2; this rank: host 0, local rank 0".
void print_layout(const json &layout) {
  std::string hosts;
  for (const auto &h : layout["hosts"]) {
    hosts += fmt::format(" [{}]", fmt::join(h.get<std::vector<int>>(), ","));
  }
  fmt::print("layout         : {} host(s):{}; leaders {}; this rank: host {}, local rank {}\n",
             layout["hosts"].size(), hosts,
             fmt::join(layout["leaders"].get<std::vector<int>>(), ","),
             layout["host_index"].get<int>(), layout["local_rank"].get<int>());
}

// "net devices    : eth1 (network, NUMA node 1), mlx5_0 (openfabrics, NUMA node 0)".
void print_net_devices(const json &devices) {
  std::string list;
  for (const auto &d : devices) {
    auto nodes = d["numa_nodes"].get<std::vector<int>>();
    list += fmt::format("{}{} ({}, NUMA node{} {})", list.empty() ? "" : ", ",
                        d["name"].get<std::string>(), d["kind"].get<std::string>(),
                        nodes.size() == 1 ? "" : "s",
                        nodes.empty() ? "?" : fmt::format("{}", fmt::join(nodes, ",")));
  }
  fmt::print("net devices    : {}\n", list.empty() ? "none seen by hwloc" : list);
}

// One line per rank: where its progress thread would be bound.
void print_placements(const json &placements) {
  if (placements.is_object()) {
    fmt::print("progress cores : unknown: {}\n", text_or(placements, "error", "?"));
    return;
  }
  quorum::KnobBase *bind = quorum::find_knob("QUORUM_BIND_PROGRESS");
  const bool bound = bind != nullptr && bind->value_text() == "1";
  fmt::print("progress cores : where each rank's progress thread goes{}\n",
             bound ? "" : " (bound only with QUORUM_BIND_PROGRESS=1)");
  for (const auto &p : placements) {
    fmt::print("  rank {}: {}\n", p["rank"].get<int>(), p["summary"].get<std::string>());
  }
}

void print_text(const json &info) {
  fmt::print("quorum {}\n\n", info["version"].get<std::string>());
  const json &build = info["build"];
  fmt::print("build          : {}, {}; built against CUDA {}, PMIx {}, UCX {}, hwloc {}\n",
             build["build_type"].get<std::string>(), build["compiler"].get<std::string>(),
             build["cuda"].get<std::string>(), build["pmix"].get<std::string>(),
             build["ucx"].get<std::string>(), build["hwloc"].get<std::string>());

  const json &b = info["bootstrap"];
  if (b.contains("error")) {
    fmt::print("bootstrap      : failed: {}\n", b["error"].get<std::string>());
  } else {
    fmt::print("bootstrap      : {} (rank {} of {})\n", b["name"].get<std::string>(),
               b["rank"].get<int>(), b["size"].get<int>());
  }
  if (info.contains("transports")) {
    std::string avail;
    for (const auto &t : info["transports"]) {
      avail += fmt::format("{}{} (priority {}{})", avail.empty() ? "" : ", ",
                           t["name"].get<std::string>(), t["priority"].get<int>(),
                           t["multi_process"].get<bool>() ? "" : ", threads only");
    }
    fmt::print("transports     : {}\n", avail);
  }
  if (info.contains("transport")) {
    const json &t = info["transport"];
    if (t.is_null()) {
      fmt::print("transport      : (not connected: --no-connect)\n");
    } else if (t.contains("error")) {
      fmt::print("transport      : failed: {}\n", t["error"].get<std::string>());
    } else {
      fmt::print("transport      : {} - {}\n", t["name"].get<std::string>(),
                 t["description"].get<std::string>());
    }
  }
  if (info.contains("layout")) print_layout(info["layout"]);
  if (info.contains("progress_placement")) print_placements(info["progress_placement"]);

  const json &u = info["ucx"];
  std::string mem;
  if (u.contains("memory_types")) {
    for (const auto &m : u["memory_types"]) {
      mem += (mem.empty() ? "" : ", ") + m.get<std::string>();
    }
  }
  fmt::print("ucx            : {}{}{}\n", u["version"].get<std::string>(),
             mem.empty() ? "" : "; memory types: " + mem,
             u.contains("error") ? "; " + u["error"].get<std::string>() : "");
  if (u.contains("cuda_buffers")) {
    fmt::print("device buffers : {}\n", u["cuda_buffers"].get<bool>()
                                            ? "passed to UCX directly (UCX has CUDA)"
                                            : "staged through host memory (UCX without CUDA)");
  }
  const json &topo = info["topology"];
  if (topo.is_null()) {
    fmt::print("topology       : (not in this build)\n");
  } else {
    fmt::print("topology       : {}\n", text_or(topo, "summary", text_or(topo, "error", "?")));
    if (topo.contains("net_devices")) print_net_devices(topo["net_devices"]);
  }

  fmt::print("\nknobs ({}; set as environment variables):\n", info["knobs"].size());
  for (const auto &k : info["knobs"]) {
    fmt::print("  {} = {}   [{}, default {}, from {}]\n", k["name"].get<std::string>(),
               k["value"].get<std::string>(), k["type"].get<std::string>(),
               k["default"].get<std::string>(), k["source"].get<std::string>());
    std::string help = k["help"].get<std::string>();
    if (k.contains("choices")) {
      std::string c;
      for (const auto &x : k["choices"]) c += (c.empty() ? "" : "|") + x.get<std::string>();
      help += " (" + c + ")";
    }
    fmt::print("      {}\n", help);
    if (k.contains("error")) fmt::print("      INVALID: {}\n", k["error"].get<std::string>());
  }
}

}  // namespace

int main(int argc, char **argv) {
  CLI::App app{"quorum-info: quorum's version, bootstrap, transports, UCX, topology and knobs"};
  bool as_json = false, no_connect = false, all_ranks = false;
  app.add_flag("--json", as_json, "print one JSON object");
  app.add_flag("--no-connect", no_connect,
               "only bootstrap; do not connect a communicator (no transport chosen)");
  app.add_flag("--all-ranks", all_ranks, "every rank prints (default: rank 0 only)");
  quorum_tools::add_version_flag(app, "quorum-info");
  QUORUM_TOOL_PARSE(app, argc, argv);

  json info;
  info["version"] = quorum_version();
  info["build"] = build_facts();
  bool ok = true;
  int rank = 0;
  json job = job_facts(!no_connect, &rank, &ok);
  for (auto it = job.begin(); it != job.end(); ++it) info[it.key()] = it.value();
  info["ucx"] = ucx_facts();
  info["topology"] = topology_facts();
  info["knobs"] = knob_facts();
  if (quorum::validate_knobs() != quorum::kOk) ok = false;

  if (rank == 0 || all_ranks) {
    if (as_json) {
      fmt::print("{}\n", info.dump(2));
    } else {
      print_text(info);
    }
  }
  return ok ? 0 : 1;
}
