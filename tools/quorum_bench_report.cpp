// quorum_bench_report.cpp: the nccl-tests style table and the JSON lines of
// quorum-bench.
#include "tools/quorum_bench_report.hpp"

#include <fmt/format.h>

#include <cerrno>
#include <cstring>
#include <nlohmann/json.hpp>

namespace quorum_bench {

double busbw_factor(Coll coll, int nranks) {
  double n = nranks;
  switch (coll) {
    case Coll::Allreduce:
      return 2.0 * (n - 1) / n;
    case Coll::Allgather:
    case Coll::ReduceScatter:
      return (n - 1) / n;
    case Coll::Bcast:
      return 1.0;
    case Coll::Barrier:
      return 0.0;
  }
  return 0.0;
}

Reporter::Reporter(const CollOptions &options, RunInfo info)
    : options_(options), info_(std::move(info)) {}

Reporter::~Reporter() {
  if (json_file_) std::fclose(json_file_);
}

bool Reporter::open() {
  if (options_.json_out.empty()) return true;
  json_file_ = std::fopen(options_.json_out.c_str(), "w");
  if (!json_file_) {
    fmt::print(stderr, "quorum-bench: cannot write --json-out file '{}': {}\n", options_.json_out,
               std::strerror(errno));
    return false;
  }
  return true;
}

void Reporter::header() {
  if (options_.json) return;
  fmt::print("# quorum-bench {} (quorum {}): {} rank{}, transport {}\n", info_.coll, info_.version,
             info_.nranks, info_.nranks == 1 ? "" : "s", info_.transport);
  fmt::print("#   dtype {}, op {}, iters {}, warmup {}, check passes {}\n", info_.dtype, info_.op,
             options_.iters ? std::to_string(options_.iters) : "auto",
             options_.warmup >= 0 ? std::to_string(options_.warmup) : "auto", info_.check);
  fmt::print("#   time: mean per call (us), avg/min/max over ranks; GB/s = 1e9 B/s\n");
  fmt::print(
      "#   size: the whole buffer (allgather: bytes received, reduce_scatter: bytes sent)\n#\n");
  std::string group = fmt::format("#{:>11} {:>12} {:>8} {:>6} {:>5} {:>6}  {:^52}  {:^52}", "", "",
                                  "", "", "", "", "out-of-place", "in-place");
  fmt::print("{}\n", group.substr(0, group.find_last_not_of(' ') + 1));
  const char *cols =
      "#{:>11} {:>12} {:>8} {:>6} {:>5} {:>6}  {:>9} {:>9} {:>9} {:>7} {:>7} {:>6}"
      "  {:>9} {:>9} {:>9} {:>7} {:>7} {:>6}\n";
  fmt::print(cols, "size", "count", "type", "redop", "root", "iters", "time", "min", "max", "algbw",
             "busbw", "#wrong", "time", "min", "max", "algbw", "busbw", "#wrong");
  fmt::print(cols, "(B)", "(elements)", "", "", "", "", "(us)", "(us)", "(us)", "(GB/s)", "(GB/s)",
             "", "(us)", "(us)", "(us)", "(GB/s)", "(GB/s)", "");
  std::fflush(stdout);
}

namespace {

std::string placement_cells(const PlacementResult &p) {
  if (!p.ran)
    return fmt::format("  {:>9} {:>9} {:>9} {:>7} {:>7} {:>6}", "-", "-", "-", "-", "-", "-");
  std::string wrong = p.wrong < 0 ? "N/A" : std::to_string(p.wrong);
  return fmt::format("  {:>9.2f} {:>9.2f} {:>9.2f} {:>7.2f} {:>7.2f} {:>6}", p.time_us, p.min_us,
                     p.max_us, p.algbw, p.busbw, wrong);
}

nlohmann::json placement_json(const PlacementResult &p) {
  if (!p.ran) return nullptr;
  nlohmann::json j;
  j["time_us"] = p.time_us;
  j["time_min_us"] = p.min_us;
  j["time_max_us"] = p.max_us;
  j["algbw_gbs"] = p.algbw;
  j["busbw_gbs"] = p.busbw;
  j["wrong"] = p.wrong < 0 ? nlohmann::json(nullptr) : nlohmann::json(p.wrong);
  return j;
}

}  // namespace

void Reporter::row(const SizeResult &r) {
  for (const PlacementResult *p : {&r.out_of_place, &r.in_place}) {
    if (!p->ran) continue;
    if (p->wrong > 0) total_wrong_ += p->wrong;
    busbw_sum_ += p->busbw;
    ++busbw_rows_;
  }
  nlohmann::json j;
  j["coll"] = info_.coll;
  j["nranks"] = info_.nranks;
  j["transport"] = info_.transport;
  j["size"] = r.bytes;
  j["count"] = r.count;
  j["type"] = info_.dtype;
  j["op"] = info_.op;
  j["root"] = info_.root;
  j["iters"] = r.iters;
  j["warmup"] = r.warmup;
  j["out_of_place"] = placement_json(r.out_of_place);
  j["in_place"] = placement_json(r.in_place);
  std::string line = j.dump();
  if (json_file_) {
    errno = 0;
    if ((std::fprintf(json_file_, "%s\n", line.c_str()) < 0 || std::fflush(json_file_) != 0) &&
        json_errno_ == 0) {
      json_errno_ = errno != 0 ? errno : -1;
    }
  }
  if (options_.json) {
    fmt::print("{}\n", line);
  } else {
    bool reduction = options_.coll == Coll::Allreduce || options_.coll == Coll::ReduceScatter;
    fmt::print(" {:>11} {:>12} {:>8} {:>6} {:>5} {:>6}{}{}\n", r.bytes, r.count, info_.dtype,
               reduction ? info_.op : "none", options_.coll == Coll::Bcast ? info_.root : -1,
               r.iters, placement_cells(r.out_of_place), placement_cells(r.in_place));
  }
  std::fflush(stdout);
}

bool Reporter::json_written() {
  if (json_file_) {
    errno = 0;
    if (std::fclose(json_file_) != 0 && json_errno_ == 0) json_errno_ = errno != 0 ? errno : -1;
    json_file_ = nullptr;
  }
  if (json_errno_ == 0) return true;
  fmt::print(stderr, "quorum-bench: cannot write --json-out file '{}': {}\n", options_.json_out,
             json_errno_ > 0 ? std::strerror(json_errno_) : "write failed");
  return false;
}

long long Reporter::footer() {
  if (!options_.json) {
    fmt::print("# Out of bounds values : {} {}\n", total_wrong_, total_wrong_ ? "FAILED" : "OK");
    fmt::print("# Avg bus bandwidth    : {:.4f}\n#\n",
               busbw_rows_ ? busbw_sum_ / busbw_rows_ : 0.0);
    std::fflush(stdout);
  }
  return total_wrong_;
}

}  // namespace quorum_bench
