// bootstrap_check: a rank program for the launcher tests. It bootstraps from
// its environment (quorum-run, mpirun, or nothing), allgathers through it and
// checks every value, then prints "rank R of N: bootstrap NAME ok".
//
//   bootstrap_check [--expect-size N] [--expect-bootstrap NAME]
//                   [--fail-rank R] [--sleep S]
// --fail-rank R: rank R exits 1 at once (the others wait in the allgather).
// --sleep S: sleep S seconds before doing anything (timeout tests).
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#include "runtime/bootstrap/bootstrap.hpp"
#include "runtime/topology.hpp"

namespace {

int check_failed(int rank, const std::string &what) {
  std::fprintf(stderr, "rank %d: FAILED: %s\n", rank, what.c_str());
  return 3;
}

}  // namespace

int main(int argc, char **argv) {
  int expect_size = -1, fail_rank = -1, sleep_s = 0;
  std::string expect_bootstrap;
  for (int i = 1; i + 1 < argc; i += 2) {
    std::string opt = argv[i];
    if (opt == "--expect-size") {
      expect_size = std::atoi(argv[i + 1]);
    } else if (opt == "--expect-bootstrap") {
      expect_bootstrap = argv[i + 1];
    } else if (opt == "--fail-rank") {
      fail_rank = std::atoi(argv[i + 1]);
    } else if (opt == "--sleep") {
      sleep_s = std::atoi(argv[i + 1]);
    } else {
      std::fprintf(stderr, "bootstrap_check: unknown option %s\n", opt.c_str());
      return 2;
    }
  }
  if (sleep_s > 0) {
    std::printf("sleeping %d s\n", sleep_s);
    std::fflush(stdout);
    sleep(static_cast<unsigned>(sleep_s));
  }

  std::unique_ptr<quorum::Bootstrap> b;
  if (quorum::bootstrap_from_environment(&b) != quorum::kOk) {
    std::fprintf(stderr, "bootstrap failed: %s\n", quorum::last_error());
    return 2;
  }
  const int rank = b->rank(), size = b->size();
  if (expect_size >= 0 && size != expect_size) {
    return check_failed(
        rank, "size " + std::to_string(size) + ", expected " + std::to_string(expect_size));
  }
  if (!expect_bootstrap.empty() && expect_bootstrap != b->name()) {
    return check_failed(rank,
                        std::string("bootstrap ") + b->name() + ", expected " + expect_bootstrap);
  }
  if (rank == fail_rank) {
    std::printf("rank %d failing on purpose\n", rank);
    std::fflush(stdout);
    return 1;
  }

  std::vector<int> ranks(static_cast<size_t>(size), -1);
  if (b->allgather(&rank, ranks.data(), sizeof(int)) != quorum::kOk) {
    return check_failed(rank, std::string("allgather: ") + quorum::last_error());
  }
  for (int r = 0; r < size; ++r) {
    if (ranks[r] != r)
      return check_failed(rank, "slot " + std::to_string(r) + " holds " + std::to_string(ranks[r]));
  }

  // A larger blob, several rounds, so the sequence numbering is exercised.
  const size_t bytes = 64 * 1024;
  for (int round = 0; round < 3; ++round) {
    std::vector<uint8_t> in(bytes), out(bytes * size);
    for (size_t i = 0; i < bytes; ++i) in[i] = static_cast<uint8_t>(rank * 7 + round * 3 + i);
    if (b->allgather(in.data(), out.data(), bytes) != quorum::kOk) {
      return check_failed(rank, std::string("allgather: ") + quorum::last_error());
    }
    for (int r = 0; r < size; ++r) {
      for (size_t i = 0; i < bytes; ++i) {
        if (out[r * bytes + i] != static_cast<uint8_t>(r * 7 + round * 3 + i)) {
          return check_failed(rank, "round " + std::to_string(round) + ": byte " +
                                        std::to_string(i) + " of rank " + std::to_string(r));
        }
      }
    }
  }

  // Zero bytes is legal and must still synchronize.
  if (b->allgather(nullptr, nullptr, 0) != quorum::kOk) {
    return check_failed(rank, std::string("empty allgather: ") + quorum::last_error());
  }

  // Every rank runs on this host, so all are local to each other.
  quorum::HostIdentity me = quorum::local_host_identity();
  std::vector<quorum::HostIdentity> ids(static_cast<size_t>(size));
  if (b->allgather(&me, ids.data(), sizeof(me)) != quorum::kOk) {
    return check_failed(rank, std::string("allgather: ") + quorum::last_error());
  }
  if (quorum::local_ranks(ids, rank).size() != static_cast<size_t>(size)) {
    return check_failed(rank, "not every rank is on this host");
  }
  // A second bootstrap in the same process (a second communicator) has its
  // own rounds: interleaved allgathers must not see each other's values.
  std::unique_ptr<quorum::Bootstrap> second;
  if (quorum::bootstrap_from_environment(&second) != quorum::kOk) {
    return check_failed(rank, std::string("second bootstrap: ") + quorum::last_error());
  }
  for (int round = 0; round < 2; ++round) {
    int mine[2] = {1000 + rank, 2000 + rank};
    std::vector<int> first_out(static_cast<size_t>(size)), second_out(static_cast<size_t>(size));
    if (b->allgather(&mine[0], first_out.data(), sizeof(int)) != quorum::kOk ||
        second->allgather(&mine[1], second_out.data(), sizeof(int)) != quorum::kOk) {
      return check_failed(rank, std::string("interleaved allgather: ") + quorum::last_error());
    }
    for (int r = 0; r < size; ++r) {
      if (first_out[r] != 1000 + r || second_out[r] != 2000 + r) {
        return check_failed(rank, "interleaved allgather mixed up the two bootstraps");
      }
    }
  }
  second.reset();
  if (b->barrier() != quorum::kOk) return check_failed(rank, quorum::last_error());
  std::printf("rank %d of %d: bootstrap %s ok\n", rank, size, b->name());
  return 0;
}
