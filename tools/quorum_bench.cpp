// quorum-bench: collective benchmarks through quorum's public C API, with the
// flags and columns of nccl-tests, so their figures line up.
//
//   quorum-bench [allreduce|bcast|allgather|reduce_scatter|barrier] [-b 8] [-e 64M] [-f 2]
//                [-d float32] [-o sum] [-n iters] [-w warmup] [-c checks] [--json]
//   quorum-bench partial [--compute-ms C] [--delay-ms D]
//                        [--model paper|slow-rank|exponential|all]
//                        [--steps N] [--bytes 1M] [--max-staleness A] [--copy-result] [--json]
//
// It bootstraps with quorum_init, so it runs alone, under quorum-run, under
// mpirun (PMIx) and under srun. Exit status: 0 fine, 1 a quorum call failed,
// 2 bad usage, 3 wrong results (or, for partial, a lost contribution).
#include <fmt/format.h>

#include <CLI/CLI.hpp>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <functional>
#include <string>

#include "quorum/quorum.h"
#include "tools/cli_common.hpp"
#include "tools/quorum_bench_colls.hpp"
#include "tools/quorum_bench_options.hpp"
#include "tools/quorum_bench_partial.hpp"

namespace {

using namespace quorum_bench;

int usage_error(const std::string &text) {
  fmt::print(stderr, "quorum-bench: {}\n", text);
  return 2;
}

std::string joined(const std::vector<std::string> &v) {
  std::string s;
  for (const auto &x : v) s += (s.empty() ? "" : ", ") + x;
  return s;
}

// Bootstraps with quorum_init, runs `bench` and finalizes: its exit status,
// 1 where init or finalize failed (said on stderr).
int with_communicator(const std::function<int(quorum_comm_t)> &bench) {
  quorum_comm_t comm = nullptr;
  quorum_status_t s = quorum_init(&comm);
  if (s != QUORUM_OK) {
    fmt::print(stderr, "quorum-bench: quorum_init failed: {}: {}\n", quorum_strerror(s),
               quorum_last_error());
    return 1;
  }
  int rc = bench(comm);
  errno = 0;
  if (std::fflush(stdout) != 0 || std::ferror(stdout)) {  // e.g. a full disk: not a success
    fmt::print(stderr, "quorum-bench: cannot write stdout: {}\n",
               errno != 0 ? std::strerror(errno) : "write failed");
    if (rc == 0) rc = 1;
  }
  s = quorum_finalize(comm);
  if (s != QUORUM_OK) {
    fmt::print(stderr, "quorum-bench: quorum_finalize failed: {}: {}\n", quorum_strerror(s),
               quorum_last_error());
    if (rc == 0) rc = 1;
  }
  return rc;
}

// Turns the textual flags into CollOptions; "" when fine, else the complaint.
std::string resolve(CollOptions *o, const std::string &coll, const std::string &minb,
                    const std::string &maxb, const std::string &stepb, const std::string &dtype,
                    const std::string &op) {
  auto c = coll_from_name(coll);
  if (!c) return fmt::format("unknown collective '{}' (one of: {})", coll, joined(coll_names()));
  o->coll = *c;
  auto lo = parse_bytes(minb);
  if (!lo) return fmt::format("-b/--minbytes: '{}' is not a size (e.g. 8, 64K, 64M)", minb);
  auto hi = parse_bytes(maxb);
  if (!hi) return fmt::format("-e/--maxbytes: '{}' is not a size (e.g. 8, 64K, 64M)", maxb);
  if (*lo == 0) return "-b/--minbytes must be at least 1 byte";
  if (*lo > *hi) return fmt::format("-b/--minbytes {} is larger than -e/--maxbytes {}", *lo, *hi);
  o->min_bytes = *lo;
  o->max_bytes = *hi;
  if (!stepb.empty()) {
    auto step = parse_bytes(stepb);
    if (!step || *step == 0)
      return fmt::format("-i/--stepbytes: '{}' is not a positive size", stepb);
    o->step_bytes = *step;
  }
  if (o->step_bytes == 0 && o->step_factor < 2) {
    return fmt::format("-f/--stepfactor must be at least 2 (got {}); use -i for linear steps",
                       o->step_factor);
  }
  auto d = dtype_from_name(dtype);
  if (!d) return fmt::format("unknown dtype '{}' (one of: {})", dtype, joined(dtype_names()));
  o->dtype = *d;
  auto p = op_from_name(op);
  if (!p) return fmt::format("unknown op '{}' (one of: {})", op, joined(op_names()));
  o->op = *p;
  if (o->iters < 0) return "-n/--iters must be >= 0 (0: scaled per size)";
  if (o->check < 0) return "-c/--check must be >= 0";
  if (o->warmup < -1) return "-w/--warmup_iters must be >= 0";
  return "";
}

int run(int argc, char **argv) {
  CLI::App app{"quorum-bench: collective benchmarks (nccl-tests columns) over quorum's C API"};
  app.require_subcommand(0, 1);

  CollOptions o;
  std::string coll, minb = "8", maxb = "64M", stepb, dtype = "float32", op = "sum";
  app.add_option("--coll", coll, "collective: " + joined(coll_names()) + " (default allreduce)");
  app.add_option("-b,--minbytes", minb, "smallest message size (8, 64K, 64M, 1G)")
      ->capture_default_str();
  app.add_option("-e,--maxbytes", maxb, "largest message size")->capture_default_str();
  app.add_option("-f,--stepfactor", o.step_factor, "multiply the size by this between runs")
      ->capture_default_str();
  app.add_option("-i,--stepbytes", stepb, "add this many bytes between runs (instead of -f)");
  app.add_option("-d,--dtype,--datatype", dtype, "element type: " + joined(dtype_names()))
      ->capture_default_str();
  app.add_option("-o,--op", op, "reduction: " + joined(op_names()))->capture_default_str();
  app.add_option("-n,--iters", o.iters, "timed calls per size (0: scaled per size, 5..1000)")
      ->capture_default_str();
  app.add_option("-w,--warmup_iters,--warmup", o.warmup,
                 "untimed calls before timing (default: iters/10, 2..50)");
  app.add_option("-c,--check", o.check, "check passes per size with integer data (0: none)")
      ->capture_default_str();
  app.add_option("-r,--root", o.root, "bcast root")->capture_default_str();
  app.add_flag("--json", o.json, "print JSON lines (one per size) instead of the table");
  app.add_flag("--shared-buffers", o.shared_buffers,
               "allocate the buffers with quorum_mem_alloc (symmetric shared memory when every "
               "rank is on this host: the shm allreduce then copies nothing in or out)");
  app.add_option("--json-out", o.json_out, "also write the JSON lines to this file (rank 0)");

  std::vector<CLI::App *> coll_subs;
  for (const auto &name : coll_names()) {
    coll_subs.push_back(app.add_subcommand(name, "benchmark " + name)->fallthrough());
  }

  PartialOptions po;
  CLI::App *partial = app.add_subcommand(
      "partial", "partial collectives (solo, majority, quorum:K for every K) vs sync");
  partial->add_option("--compute-ms", po.compute_ms, "C: compute time per step (ms)")
      ->capture_default_str()
      ->check(CLI::NonNegativeNumber);
  partial->add_option("--delay-ms", po.delay_ms, "D: injected delay (ms)")
      ->capture_default_str()
      ->check(CLI::NonNegativeNumber);
  partial
      ->add_option("--model", po.model,
                   "imbalance: paper (1-2 ranks per step delayed by D), slow-rank, exponential, "
                   "or all (each in turn)")
      ->capture_default_str()
      ->check(CLI::IsMember({"paper", "slow-rank", "exponential", "all"}));
  partial->add_option("--steps", po.steps, "steps per variant")
      ->capture_default_str()
      ->check(CLI::PositiveNumber);
  std::string partial_bytes = "1M";
  partial->add_option("--bytes", partial_bytes, "gradient size (float32)")->capture_default_str();
  partial->add_option("--max-staleness", po.max_staleness, "synchronous round every A+1")
      ->capture_default_str();
  partial->add_option("--seed", po.seed, "shared seed")->capture_default_str();
  partial->add_flag("--json", po.json, "JSON output");
  partial->add_flag("--copy-result", po.copy_result,
                    "take each round's result with quorum_partial_wait (a copy) instead of "
                    "quorum_partial_wait_ref");
  partial
      ->add_option("--activation-delay-us", po.activation_delay_us,
                   "the activating post waits this long before it activates its round "
                   "(quorum_partial_opts_t.activation_delay_us; 0: at once)")
      ->capture_default_str()
      ->check(CLI::Range(0u, 10000000u));
  partial->add_flag("--copy-post", po.copy_post,
                    "post each gradient with quorum_partial_post (a copy) instead of "
                    "quorum_partial_post_ref");

  quorum_tools::add_version_flag(app, "quorum-bench");
  QUORUM_TOOL_PARSE(app, argc, argv);

  if (partial->parsed()) {
    auto bytes = parse_bytes(partial_bytes);
    if (!bytes || *bytes < 4) {
      return usage_error(
          fmt::format("partial --bytes: '{}' is not a size of at least 4 bytes", partial_bytes));
    }
    po.bytes = *bytes;
    return with_communicator([&](quorum_comm_t comm) { return run_partial_bench(comm, po); });
  }

  for (auto *sub : coll_subs) {
    if (!sub->parsed()) continue;
    if (!coll.empty() && coll_from_name(coll) != coll_from_name(sub->get_name())) {
      return usage_error(
          fmt::format("--coll {} contradicts the subcommand {}", coll, sub->get_name()));
    }
    coll = sub->get_name();
  }
  if (coll.empty()) coll = "allreduce";
  std::string complaint = resolve(&o, coll, minb, maxb, stepb, dtype, op);
  if (!complaint.empty()) return usage_error(complaint);

  return with_communicator([&](quorum_comm_t comm) { return run_collective_bench(comm, o); });
}

}  // namespace

int main(int argc, char **argv) {
  return run(argc, argv);
}
