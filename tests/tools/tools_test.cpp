// tools_test.cpp: quorum-bench and quorum-info as a user runs them. quorum-bench
// must exit 0 with #wrong = 0 at every size (read from its JSON lines) for
// every collective on one rank, and on 2-4 ranks under quorum-run (and mpirun
// when given); bad flags must fail clearly. quorum-info must list every knob
// the library declares, and its --json must parse.
//
// Paths come as arguments: --bench=, --info=, --quorum-run=, --mpirun= (may be
// empty), --topologies= (the hwloc XML files of tests/runtime/topologies).
#include <gtest/gtest.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <nlohmann/json.hpp>
#include <set>
#include <sstream>
#include <string>
#include <vector>

#include "runtime/knobs.hpp"

namespace {

std::string g_bench, g_info, g_run, g_mpirun, g_topologies;

struct Result {
  int status = -1;  // exit status, or -1 if it did not exit normally
  std::string out;  // stdout
  std::string err;  // stderr
};

std::string slurp(const std::string &path) {
  std::ifstream f(path);
  std::stringstream s;
  s << f.rdbuf();
  return s.str();
}

std::string quote(const std::string &s) {
  std::string q = "'";
  for (char c : s) q += c == '\'' ? std::string("'\\''") : std::string(1, c);
  return q + "'";
}

// Runs a command line (bounded by `timeout`) with stdout and stderr in files.
Result run(const std::string &command, int timeout_s = 240) {
  char dir_template[] = "/tmp/quorum_tools_test.XXXXXX";
  std::string dir = mkdtemp(dir_template);
  std::string line = "timeout -k 5 " + std::to_string(timeout_s) + " " + command + " >" + dir +
                     "/out 2>" + dir + "/err";
  int raw = std::system(line.c_str());
  Result r;
  r.status = WIFEXITED(raw) ? WEXITSTATUS(raw) : -1;
  r.out = slurp(dir + "/out");
  r.err = slurp(dir + "/err");
  std::system(("rm -rf " + quote(dir)).c_str());
  return r;
}

std::string temp_path(const std::string &name) {
  return "/tmp/quorum_tools_test_" + std::to_string(getpid()) + "_" + name;
}

std::vector<nlohmann::json> json_lines(const std::string &text) {
  std::vector<nlohmann::json> rows;
  std::istringstream in(text);
  std::string line;
  while (std::getline(in, line)) {
    if (line.empty()) continue;
    rows.push_back(nlohmann::json::parse(line));  // throws (fails the test) if malformed
  }
  return rows;
}

// Runs quorum-bench (under `launcher` if not empty) with --json-out and checks
// that every size ran, was checked and had no wrong element.
void expect_bench_correct(const std::string &launcher, const std::string &args,
                          size_t expected_rows, int nranks) {
  std::string json_path = temp_path("bench.jsonl");
  std::remove(json_path.c_str());
  std::string command = launcher + (launcher.empty() ? "" : " ") + quote(g_bench) + " " + args +
                        " --json-out " + json_path;
  Result r = run(command);
  ASSERT_EQ(r.status, 0) << command << "\nstdout:\n" << r.out << "\nstderr:\n" << r.err;
  auto rows = json_lines(slurp(json_path));
  std::remove(json_path.c_str());
  ASSERT_EQ(rows.size(), expected_rows) << command << "\n" << r.out;
  for (const auto &row : rows) {
    EXPECT_EQ(row["nranks"].get<int>(), nranks) << row.dump();
    bool any = false;
    for (const char *placement : {"out_of_place", "in_place"}) {
      const auto &p = row[placement];
      if (p.is_null()) continue;
      any = true;
      EXPECT_GT(p["time_us"].get<double>(), 0.0) << row.dump();
      EXPECT_LE(p["time_min_us"].get<double>(), p["time_us"].get<double>()) << row.dump();
      EXPECT_GE(p["time_max_us"].get<double>(), p["time_us"].get<double>()) << row.dump();
      if (row["coll"] == "barrier") {
        EXPECT_TRUE(p["wrong"].is_null()) << row.dump();
      } else {
        ASSERT_TRUE(p["wrong"].is_number()) << row.dump();
        EXPECT_EQ(p["wrong"].get<long long>(), 0) << command << ": " << row.dump();
      }
    }
    EXPECT_TRUE(any) << row.dump();
  }
}

// 8 B .. 256 KiB by factor 2: 16 sizes (fewer when the grid rounds sizes together).
constexpr const char *kSmallSweep = "-b 8 -e 256K -n 3 -w 1";

TEST(QuorumBench, EveryCollectiveOnOneRank) {
  expect_bench_correct("", std::string("allreduce ") + kSmallSweep, 16, 1);
  expect_bench_correct("", std::string("bcast ") + kSmallSweep, 16, 1);
  expect_bench_correct("", std::string("allgather ") + kSmallSweep, 16, 1);
  expect_bench_correct("", std::string("reduce_scatter ") + kSmallSweep, 16, 1);
  expect_bench_correct("", std::string("--coll barrier ") + kSmallSweep, 1, 1);
}

TEST(QuorumBench, EveryDtypeAndOpOnOneRank) {
  for (const char *dtype : {"float32", "float64", "float16", "bfloat16", "int32", "int64"}) {
    for (const char *op : {"sum", "prod", "min", "max", "avg"}) {
      expect_bench_correct(
          "", std::string("allreduce -b 64 -e 4K -f 4 -n 2 -w 0 -d ") + dtype + " -o " + op, 4, 1);
    }
  }
}

TEST(QuorumBench, DefaultSweepReachesSixtyFourMiB) {
  // The documented default range (8 B .. 64 MiB, x2) on one rank, few iterations.
  expect_bench_correct("", "-n 1 -w 0", 24, 1);
}

TEST(QuorumBench, JsonOnStdout) {
  Result r = run(quote(g_bench) + " -b 1K -e 4K -n 2 --json");
  ASSERT_EQ(r.status, 0) << r.err;
  auto rows = json_lines(r.out);
  ASSERT_EQ(rows.size(), 3u) << r.out;
  EXPECT_EQ(rows[0]["size"].get<size_t>(), 1024u);
  EXPECT_EQ(rows[0]["count"].get<size_t>(), 256u);
  EXPECT_EQ(rows[0]["type"], "float32");
  EXPECT_EQ(rows[0]["op"], "sum");
}

TEST(QuorumBench, TableHasNcclTestsColumns) {
  Result r = run(quote(g_bench) + " -b 8 -e 64 -n 2");
  ASSERT_EQ(r.status, 0) << r.err;
  for (const char *word : {"out-of-place", "in-place", "algbw", "busbw", "#wrong", "(GB/s)",
                           "Out of bounds values : 0 OK", "Avg bus bandwidth"}) {
    EXPECT_NE(r.out.find(word), std::string::npos) << word << "\n" << r.out;
  }
}

TEST(QuorumBench, BadFlagsFailClearly) {
  struct Case {
    std::string args, says;
  };
  std::vector<Case> cases = {
      {"--no-such-flag", "--no-such-flag"},
      {"-d float8", "unknown dtype 'float8'"},
      {"-o median", "unknown op 'median'"},
      {"-b 12Q", "'12Q' is not a size"},
      {"-b 1M -e 1K", "larger than"},
      {"-f 1", "stepfactor must be at least 2"},
      {"--coll alltoall", "unknown collective 'alltoall'"},
      {"bcast --coll allreduce", "contradicts"},
      {"-n -3", "iters must be >= 0"},
      {"bcast -r 5 -e 64", "root 5 is outside"},
      {"reduce_scatter -b 1 -e 2", "no message size"},
      {"partial --model lazy", "--model"},
      {"partial --bytes 2", "at least 4 bytes"},
      {"partial --activation-delay-us 20000000", "--activation-delay-us"},
  };
  for (const auto &c : cases) {
    Result r = run(quote(g_bench) + " " + c.args);
    EXPECT_NE(r.status, 0) << c.args;
    EXPECT_NE(r.err.find(c.says), std::string::npos)
        << "quorum-bench " << c.args << " should say '" << c.says << "'; stderr:\n"
        << r.err;
  }
  Result bad_json = run(quote(g_bench) + " -e 64 --json-out /nonexistent-dir/x.jsonl");
  EXPECT_NE(bad_json.status, 0);
  EXPECT_NE(bad_json.err.find("cannot write --json-out"), std::string::npos) << bad_json.err;
}

TEST(QuorumBench, HelpExitsZero) {
  Result r = run(quote(g_bench) + " --help");
  EXPECT_EQ(r.status, 0);
  EXPECT_NE(r.out.find("--maxbytes"), std::string::npos) << r.out;
}

std::string quorum_run(int n) {
  return quote(g_run) + " -n " + std::to_string(n) + " --timeout 200 --";
}

// `quorum-bench partial`: every variant (quorum:K for every K too) runs every
// step, and the sum of what came back equals the sum of what was posted.
void expect_partial_bench(const std::string &launcher, int nranks, const std::string &model,
                          unsigned activation_delay_us = 0) {
  std::string command = launcher + (launcher.empty() ? "" : " ") + quote(g_bench) +
                        " partial --steps 12 --compute-ms 1 --delay-ms 2 --bytes 4K --json "
                        "--max-staleness 4 --model " +
                        model + " --activation-delay-us " + std::to_string(activation_delay_us);
  Result r = run(command);
  ASSERT_EQ(r.status, 0) << command << "\nstdout:\n" << r.out << "\nstderr:\n" << r.err;
  std::string body;
  std::istringstream in(r.out);
  std::string line;
  while (std::getline(in, line)) {
    if (line.rfind("[0] ", 0) == 0) line = line.substr(4);
    if (!line.empty() && line[0] == '{') body += line + "\n";
  }
  auto rows = json_lines(body);
  // sync, solo, majority and quorum:1..P, under each model with "all".
  const size_t models = model == "all" ? 3 : 1;
  ASSERT_EQ(rows.size(), models * (3u + static_cast<size_t>(nranks))) << r.out;
  std::set<std::string> variants, seen_models;
  for (const auto &row : rows) {
    variants.insert(row["variant"].get<std::string>());
    seen_models.insert(row["model"].get<std::string>());
    // quorum:K: no round with fewer than K fresh posts (every rank posts
    // every step, so only in-time posts arrive).
    const int k = row["k"].get<int>();
    for (int f = 0; f < k; ++f)
      EXPECT_EQ(row["fresh_histogram"][f].get<long long>(), 0) << row.dump();
    EXPECT_EQ(row["nranks"].get<int>(), nranks) << row.dump();
    EXPECT_EQ(row["activation_delay_us"].get<unsigned>(), activation_delay_us) << row.dump();
    EXPECT_TRUE(row["conserved"].get<bool>()) << row.dump();
    EXPECT_GT(row["steps_per_s"].get<double>(), 0.0) << row.dump();
    long long rounds = 0;
    for (const auto &c : row["fresh_histogram"]) rounds += c.get<long long>();
    EXPECT_EQ(rounds, 12) << row.dump();
    EXPECT_EQ(row["fresh_histogram"].size(), static_cast<size_t>(nranks) + 1) << row.dump();
    // Activation latency of the activated rounds: median <= 90th percentile;
    // none for sync; on several ranks a peer always joins after the first post.
    const double median = row["activation_latency_us"].get<double>();
    const double p90 = row["activation_latency_p90_us"].get<double>();
    EXPECT_GE(median, 0.0) << row.dump();
    EXPECT_GE(p90, median) << row.dump();
    EXPECT_GE(row["activation_latency_mean_us"].get<double>(), 0.0) << row.dump();
    if (row["variant"] == "sync") {
      EXPECT_EQ(p90, 0.0) << row.dump();
    } else if (nranks > 1) {
      EXPECT_GT(p90, 0.0) << row.dump();
    }
  }
  std::set<std::string> want{"sync", "solo", "majority"};
  for (int k = 1; k <= nranks; ++k) want.insert("quorum:" + std::to_string(k));
  EXPECT_EQ(variants, want);
  EXPECT_EQ(seen_models.size(), models) << r.out;
}

TEST(QuorumBench, PartialOnOneRank) {
  expect_partial_bench("", 1, "paper");
}

TEST(QuorumBench, PartialUnderQuorumRun) {
  if (g_run.empty() || access(g_run.c_str(), X_OK) != 0) GTEST_SKIP() << "no quorum-run";
  expect_partial_bench(quorum_run(2), 2, "paper");
  expect_partial_bench(quorum_run(3), 3, "exponential");
  expect_partial_bench(quorum_run(3), 3, "paper", 500);
  expect_partial_bench(quorum_run(2), 2, "all");
}

TEST(QuorumBench, TwoToFourRanksUnderQuorumRun) {
  if (g_run.empty() || access(g_run.c_str(), X_OK) != 0) GTEST_SKIP() << "no quorum-run";
  expect_bench_correct(quorum_run(2), std::string("allreduce -b 8 -e 1M -n 3 -w 1"), 18, 2);
  expect_bench_correct(quorum_run(2), std::string("reduce_scatter ") + kSmallSweep, 16, 2);
  expect_bench_correct(quorum_run(3), "allreduce -b 8 -e 64K -f 4 -n 2 -w 1 -d int32", 7, 3);
  // 8 B holds two float32, fewer than one per rank: that size is skipped.
  expect_bench_correct(quorum_run(3), "allgather -b 8 -e 64K -f 4 -n 2 -w 1", 6, 3);
  expect_bench_correct(quorum_run(3), "bcast -r 2 -b 8 -e 64K -f 4 -n 2 -w 1", 7, 3);
  expect_bench_correct(quorum_run(4), "reduce_scatter -b 8 -e 64K -f 4 -n 2 -w 1 -d bf16", 7, 4);
  expect_bench_correct(quorum_run(4), "barrier -n 5", 1, 4);
}

TEST(QuorumBench, TwoRanksUnderMpirun) {
  if (g_mpirun.empty()) GTEST_SKIP() << "no mpirun";
  std::string launcher = "env OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 " +
                         quote(g_mpirun) +
                         " --oversubscribe --mca btl_tcp_if_include lo --mca oob_tcp_if_include "
                         "lo -n 2";
  expect_bench_correct(launcher, "allreduce -b 8 -e 64K -f 4 -n 2 -w 1", 7, 2);
}

std::vector<std::string> library_knob_names() {
  std::vector<std::string> names;
  for (auto *k : quorum::all_knobs()) names.emplace_back(k->name());
  return names;
}

TEST(QuorumInfo, PrintsEveryKnob) {
  auto names = library_knob_names();
  ASSERT_FALSE(names.empty());
  Result r = run(quote(g_info));
  ASSERT_EQ(r.status, 0) << r.err;
  for (const auto &name : names) {
    EXPECT_NE(r.out.find(name + " = "), std::string::npos) << name << " missing:\n" << r.out;
  }
  for (const char *word : {"quorum ", "bootstrap", "transports", "ucx", "topology"}) {
    EXPECT_NE(r.out.find(word), std::string::npos) << word << "\n" << r.out;
  }
}

TEST(QuorumInfo, JsonParsesAndMatchesTheLibrary) {
  Result r = run("env QUORUM_RING_CHUNK_BYTES=12345 " + quote(g_info) + " --json");
  ASSERT_EQ(r.status, 0) << r.err;
  auto info = nlohmann::json::parse(r.out);
  EXPECT_FALSE(info["version"].get<std::string>().empty());
  EXPECT_EQ(info["bootstrap"]["size"].get<int>(), 1);
  EXPECT_EQ(info["bootstrap"]["rank"].get<int>(), 0);
  EXPECT_FALSE(info["transports"].empty());
  EXPECT_FALSE(info["ucx"]["version"].get<std::string>().empty());
  std::set<std::string> listed;
  for (const auto &k : info["knobs"]) {
    listed.insert(k["name"].get<std::string>());
    for (const char *field : {"type", "value", "default", "source", "help"}) {
      EXPECT_TRUE(k.contains(field)) << k.dump();
    }
    if (k["name"] == "QUORUM_RING_CHUNK_BYTES") {
      EXPECT_EQ(k["value"], "12345");
      EXPECT_EQ(k["source"], "environment");
    }
  }
  auto names = library_knob_names();
  EXPECT_EQ(listed, std::set<std::string>(names.begin(), names.end()));
}

TEST(QuorumInfo, ReportsAnInvalidKnob) {
  Result r = run("env QUORUM_TIMEOUT_MS=soon " + quote(g_info) + " --no-connect");
  EXPECT_NE(r.status, 0);
  EXPECT_NE(r.out.find("INVALID"), std::string::npos) << r.out;
}

TEST(QuorumInfo, TwoRanksUnderQuorumRun) {
  if (g_run.empty() || access(g_run.c_str(), X_OK) != 0) GTEST_SKIP() << "no quorum-run";
  Result r = run(quorum_run(2) + " " + quote(g_info) + " --json");
  ASSERT_EQ(r.status, 0) << r.out << r.err;
  // quorum-run prefixes each line with "[rank] "; only rank 0 prints.
  std::string body;
  std::istringstream in(r.out);
  std::string line;
  while (std::getline(in, line)) {
    ASSERT_EQ(line.rfind("[0] ", 0), 0u) << line;
    body += line.substr(4) + "\n";
  }
  auto info = nlohmann::json::parse(body);
  EXPECT_EQ(info["bootstrap"]["size"].get<int>(), 2);
  EXPECT_NE(info["bootstrap"]["name"].get<std::string>(), "single");
  ASSERT_TRUE(info["transport"].is_object()) << info.dump();
  EXPECT_FALSE(info["transport"].contains("error")) << info.dump();
  // Both ranks on this host: one host of ranks 0 and 1, led by rank 0.
  ASSERT_TRUE(info["layout"].is_object()) << info.dump();
  EXPECT_EQ(info["layout"]["hosts"], nlohmann::json::parse("[[0,1]]")) << info.dump();
  EXPECT_EQ(info["layout"]["leaders"], nlohmann::json::parse("[0]")) << info.dump();
  EXPECT_EQ(info["layout"]["local_rank"].get<int>(), 0);
  // Each rank's progress core, gathered from both, on this machine's cores.
  ASSERT_TRUE(info["progress_placement"].is_array()) << info.dump();
  ASSERT_EQ(info["progress_placement"].size(), 2u) << info.dump();
  for (int r = 0; r < 2; ++r) {
    const auto &p = info["progress_placement"][r];
    EXPECT_EQ(p["rank"].get<int>(), r);
    EXPECT_GE(p["core"].get<int>(), 0) << p.dump();
    EXPECT_LT(p["core"].get<int>(), info["topology"]["cores"].get<int>()) << p.dump();
  }
  EXPECT_TRUE(info["topology"]["net_devices"].is_array()) << info.dump();
}

// rank 0's JSON from quorum-run's "[0] "-prefixed output.
nlohmann::json rank0_json(const std::string &out) {
  std::string body;
  std::istringstream in(out);
  std::string line;
  while (std::getline(in, line)) {
    if (line.rfind("[0] ", 0) == 0) body += line.substr(4) + "\n";
  }
  return nlohmann::json::parse(body);
}

// Three ranks on a host whose only NIC (eth1, from an hwloc XML file) hangs
// below NUMA node 1: each rank's progress thread goes to a core of node 1.
TEST(QuorumInfo, ProgressCoresNearTheNicUnderQuorumRun) {
  if (g_run.empty() || access(g_run.c_str(), X_OK) != 0) GTEST_SKIP() << "no quorum-run";
  ASSERT_FALSE(g_topologies.empty()) << "needs --topologies=";
  std::string xml = g_topologies + "/two-numa-nic-on-node1.xml";
  // lo carries the traffic here; UCX's warning that eth1 does not exist would
  // come through quorum-run's prefixed stdout, hence UCX_LOG_LEVEL.
  Result r = run("env QUORUM_TOPOLOGY_XML=" + quote(xml) +
                 " UCX_NET_DEVICES=lo,eth1 UCX_LOG_LEVEL=error " + quorum_run(3) + " " +
                 quote(g_info) + " --json");
  ASSERT_EQ(r.status, 0) << r.out << r.err;
  auto info = rank0_json(r.out);
  EXPECT_EQ(info["topology"]["numa_nodes"].get<int>(), 2) << info["topology"].dump();
  EXPECT_EQ(info["topology"]["net_devices"],
            nlohmann::json::parse(R"([{"name":"eth1","kind":"network","numa_nodes":[1],)"
                                  R"("cores":[2,3]}])"));
  ASSERT_EQ(info["progress_placement"].size(), 3u) << info.dump();
  const int expected_core[] = {3, 2, 3};  // node 1's cores from its last, by local rank
  for (int rank = 0; rank < 3; ++rank) {
    const auto &p = info["progress_placement"][rank];
    EXPECT_EQ(p["rule"], "near_device") << p.dump();
    EXPECT_EQ(p["device"], "eth1") << p.dump();
    EXPECT_EQ(p["numa_node"].get<int>(), 1) << p.dump();
    EXPECT_EQ(p["core"].get<int>(), expected_core[rank]) << p.dump();
  }
  // Text output: the device with its NUMA node, one line per rank.
  Result text =
      run("env QUORUM_TOPOLOGY_XML=" + quote(xml) +
          " UCX_NET_DEVICES=lo,eth1 UCX_LOG_LEVEL=error " + quorum_run(2) + " " + quote(g_info));
  ASSERT_EQ(text.status, 0) << text.out << text.err;
  EXPECT_NE(text.out.find("eth1 (network, NUMA node 1)"), std::string::npos) << text.out;
  EXPECT_NE(text.out.find("rank 1: core 2 (NUMA node 1, near eth1)"), std::string::npos)
      << text.out;
}

TEST(QuorumInfo, ProgressCoreFallsBackWithoutNetDevices) {
  ASSERT_FALSE(g_topologies.empty()) << "needs --topologies=";
  Result r = run("env QUORUM_TOPOLOGY_XML=" + quote(g_topologies + "/two-numa-no-devices.xml") +
                 " " + quote(g_info) + " --json");
  ASSERT_EQ(r.status, 0) << r.err;
  auto info = nlohmann::json::parse(r.out);
  EXPECT_TRUE(info["topology"]["net_devices"].empty()) << info["topology"].dump();
  ASSERT_EQ(info["progress_placement"].size(), 1u) << info.dump();
  EXPECT_EQ(info["progress_placement"][0]["rule"], "last_core_by_rank");
  EXPECT_EQ(info["progress_placement"][0]["core"].get<int>(), 3);
  // An unreadable file: the topology reports the error instead of numbers.
  Result bad = run("env QUORUM_TOPOLOGY_XML=/nonexistent.xml " + quote(g_info) + " --json");
  auto broken = nlohmann::json::parse(bad.out);
  EXPECT_NE(broken["topology"]["error"].get<std::string>().find("/nonexistent.xml"),
            std::string::npos)
      << broken["topology"].dump();
}

}  // namespace

int main(int argc, char **argv) {
  ::testing::InitGoogleTest(&argc, argv);
  for (int i = 1; i < argc; ++i) {
    std::string a = argv[i];
    auto value = [&](const char *key) {
      std::string k = std::string(key) + "=";
      return a.rfind(k, 0) == 0 ? a.substr(k.size()) : std::string();
    };
    if (a.rfind("--bench=", 0) == 0) g_bench = value("--bench");
    if (a.rfind("--info=", 0) == 0) g_info = value("--info");
    if (a.rfind("--quorum-run=", 0) == 0) g_run = value("--quorum-run");
    if (a.rfind("--mpirun=", 0) == 0) g_mpirun = value("--mpirun");
    if (a.rfind("--topologies=", 0) == 0) g_topologies = value("--topologies");
  }
  if (g_bench.empty() || g_info.empty()) {
    std::fprintf(stderr, "usage: %s --bench=PATH --info=PATH [--quorum-run=PATH] [--mpirun=PATH]\n",
                 argv[0]);
    return 2;
  }
  return RUN_ALL_TESTS();
}
