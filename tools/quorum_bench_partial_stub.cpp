// quorum_bench_partial_stub.cpp: `quorum-bench partial` in a build without the
// partial collective C API (quorum_partial_*): the subcommand says so clearly
// and exits non-zero instead of measuring anything.
#include "tools/quorum_bench_partial.hpp"

#include <fmt/format.h>

namespace quorum_bench {

bool partial_available() {
  return false;
}

int run_partial_bench(quorum_comm_t comm, const PartialOptions &) {
  if (quorum_comm_rank(comm) <= 0) {
    fmt::print(stderr,
               "quorum-bench: partial: not yet available: this build of quorum has no partial "
               "collectives (quorum_partial_*)\n");
  }
  return 2;
}

}  // namespace quorum_bench
