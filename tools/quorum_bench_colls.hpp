// quorum_bench_colls.hpp: the size sweep of one ordinary collective
// (allreduce, bcast, allgather, reduce_scatter, barrier) through the public C
// API, timed OSU style (an untimed barrier before every call) and checked on a
// separate pass with integer-valued data.
#pragma once

#include "quorum/quorum.h"
#include "tools/quorum_bench_options.hpp"

namespace quorum_bench {

// Runs the sweep on comm; rank 0 prints. Returns the process exit status:
// 0 fine, 1 a quorum call failed, 3 some results were wrong.
int run_collective_bench(quorum_comm_t comm, const CollOptions &options);

// Prints "quorum-bench: rank R: what failed: <status>: <detail>" and exits 1.
[[noreturn]] void die(quorum_comm_t comm, const char *what, quorum_status_t status);

}  // namespace quorum_bench
