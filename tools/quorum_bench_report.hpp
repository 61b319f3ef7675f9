// quorum_bench_report.hpp: how quorum-bench prints what it measured: a table
// laid out like nccl-tests (out-of-place and in-place groups) and JSON lines,
// one object per size. Only rank 0 reports.
#pragma once

#include <cstdio>
#include <string>

#include "tools/quorum_bench_options.hpp"

namespace quorum_bench {

// One placement (out-of-place or in-place) at one size, over all ranks.
struct PlacementResult {
  bool ran = false;
  double time_us = 0;  // average over ranks of each rank's mean time per call
  double min_us = 0;   // fastest rank's mean
  double max_us = 0;   // slowest rank's mean
  double algbw = 0;    // GB/s (1e9)
  double busbw = 0;
  long long wrong = -1;  // wrong elements summed over ranks; -1: not checked
};

struct SizeResult {
  size_t bytes = 0;
  size_t count = 0;  // elements (the full buffer, as nccl-tests counts)
  int iters = 0;
  int warmup = 0;
  PlacementResult out_of_place, in_place;
};

struct RunInfo {
  std::string coll, dtype, op, transport, version;
  int nranks = 1;
  int root = 0;
  int check = 1;
};

// busbw = algbw * factor: allreduce 2(n-1)/n, allgather and reduce_scatter
// (n-1)/n, bcast 1, barrier 0.
double busbw_factor(Coll coll, int nranks);

class Reporter {
 public:
  Reporter(const CollOptions &options, RunInfo info);
  ~Reporter();
  // Opens the JSON file (if asked); false with a message on stderr if it cannot.
  bool open();
  void header();
  void row(const SizeResult &r);
  // Totals; returns the number of wrong elements over all sizes.
  long long footer();
  // Closes the --json-out file; false (said on stderr) if a write to it failed.
  bool json_written();

 private:
  const CollOptions &options_;
  RunInfo info_;
  FILE *json_file_ = nullptr;
  int json_errno_ = 0;  // the first failed write's errno (-1 when errno said nothing)
  long long total_wrong_ = 0;
  double busbw_sum_ = 0;
  int busbw_rows_ = 0;
};

}  // namespace quorum_bench
