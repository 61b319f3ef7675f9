// mismatch_scenario.cpp: mismatched collective calls with the default settings
// (the signature check on), under quorum-run. The last rank calls differently
// from the others; every rank must fail with QUORUM_ERR_MISMATCH within the
// timeout plus 2 s and print "PASS rank R <case>" per case. Arguments: the
// cases to run in order (the communicator must still work after a mismatch
// on messages, which each case checks with a correct allreduce):
//   bcast_root - broadcasts from different roots
//   dtype      - allreduce of int32 against float32 (the same bytes)
//   op         - allreduce with sum against max
//   count      - allreduce of 4 elements against 5
//   kind       - reduce-scatter against allgather
//   barrier_vs_bcast - barrier against a bcast on the last rank (on messages
//                the barrier is the signature exchange, on shared memory a
//                flag round trip through the segment)
// Shared memory against messages (QUORUM_SHM unset; the allreduce and the
// barrier go through the segment, the other collectives over messages):
//   shm_vs_bcast      - allreduce against a bcast on the last rank
//   bcast_vs_shm      - bcast against an allreduce on the last rank
//   ishm_vs_bcast     - iallreduce (a schedule, not the inline fast path)
//                       against a bcast on the last rank
//   shm_vs_allgather  - allreduce against an allgather on the last rank
//   shm_vs_msg        - allreduce (shm) against the same allreduce on the last
//                       rank, which takes the ring over messages
//                       (QUORUM_ALLREDUCE_ALGO=ring there only)
//   shm_vs_rd         - the same with recursive doubling, which carries the
//                       check in its own messages with the data
//   bcast_vs_barrier  - bcast against a barrier on the last rank
// On shared memory a mismatch breaks the channel, so run one case there; a
// later allreduce must fail at once as a mismatch on every rank, and a
// barrier and a bcast (over messages) must still work. The meson test counts
// the PASS lines.
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#include "quorum/quorum.h"

namespace {

double seconds_since(std::chrono::steady_clock::time_point t0) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
}

quorum_status_t run_case(quorum_comm_t comm, const std::string &name, bool odd) {
  std::vector<int32_t> buf(64, 1);
  if (name == "bcast_root") return quorum_bcast(comm, buf.data(), 32, odd ? 1 : 0);
  if (name == "dtype") {
    return quorum_allreduce(comm, QUORUM_IN_PLACE, buf.data(), 4,
                            odd ? QUORUM_FLOAT32 : QUORUM_INT32, QUORUM_SUM);
  }
  if (name == "op") {
    return quorum_allreduce(comm, QUORUM_IN_PLACE, buf.data(), 4, QUORUM_INT32,
                            odd ? QUORUM_MAX : QUORUM_SUM);
  }
  if (name == "count") {
    return quorum_allreduce(comm, QUORUM_IN_PLACE, buf.data(), odd ? 5 : 4, QUORUM_INT32,
                            QUORUM_SUM);
  }
  if (name == "kind") {
    const int size = quorum_comm_size(comm);
    std::vector<int32_t> out(64 * static_cast<size_t>(size));
    if (odd) return quorum_allgather(comm, buf.data(), out.data(), 16);
    return quorum_reduce_scatter(comm, out.data(), buf.data(), 4, QUORUM_INT32, QUORUM_SUM);
  }
  if (name == "shm_vs_bcast" || name == "bcast_vs_shm") {
    if (odd == (name == "shm_vs_bcast")) return quorum_bcast(comm, buf.data(), 32, 0);
    return quorum_allreduce(comm, QUORUM_IN_PLACE, buf.data(), 4, QUORUM_INT32, QUORUM_SUM);
  }
  if (name == "ishm_vs_bcast") {
    if (odd) return quorum_bcast(comm, buf.data(), 32, 0);
    quorum_request_t req;
    const quorum_status_t s =
        quorum_iallreduce(comm, buf.data(), buf.data(), 4, QUORUM_INT32, QUORUM_SUM, &req);
    return s == QUORUM_OK ? quorum_wait(req) : s;
  }
  if (name == "shm_vs_allgather") {
    const int size = quorum_comm_size(comm);
    std::vector<int32_t> out(16 * static_cast<size_t>(size));
    if (odd) return quorum_allgather(comm, buf.data(), out.data(), 16);
    return quorum_allreduce(comm, QUORUM_IN_PLACE, buf.data(), 4, QUORUM_INT32, QUORUM_SUM);
  }
  if (name == "shm_vs_msg" || name == "shm_vs_rd") {
    return quorum_allreduce(comm, QUORUM_IN_PLACE, buf.data(), 4, QUORUM_INT32, QUORUM_SUM);
  }
  if (name == "barrier_vs_bcast" || name == "bcast_vs_barrier") {
    if (odd == (name == "barrier_vs_bcast")) return quorum_bcast(comm, buf.data(), 32, 0);
    return quorum_barrier(comm);
  }
  fprintf(stderr, "unknown case %s\n", name.c_str());
  exit(2);
}

bool after_broken_channel(quorum_comm_t comm, const std::string &name, double timeout_s) {
  const int rank = quorum_comm_rank(comm);
  int32_t one = 1;
  const auto t0 = std::chrono::steady_clock::now();
  const quorum_status_t s =
      quorum_allreduce(comm, QUORUM_IN_PLACE, &one, 1, QUORUM_INT32, QUORUM_SUM);
  const double took = seconds_since(t0);
  const std::string e = s == QUORUM_OK ? "" : quorum_last_error();
  printf("rank %d: %s: the allreduce after it: %s after %.2f s: %s\n", rank, name.c_str(),
         quorum_strerror(s), took, e.c_str());
  if (s != QUORUM_ERR_MISMATCH || took > timeout_s + 2) return false;
  const quorum_status_t b = quorum_barrier(comm);
  std::vector<int32_t> data(8, rank == 0 ? 7 : 0);
  const quorum_status_t c = quorum_bcast(comm, data.data(), data.size() * 4, 0);
  if (b != QUORUM_OK || c != QUORUM_OK || data[7] != 7) {
    printf("rank %d: %s: the barrier after it gave %s, the bcast %s (%d)\n", rank, name.c_str(),
           quorum_strerror(b), quorum_strerror(c), data[7]);
    return false;
  }
  return true;
}

}  // namespace

int main(int argc, char **argv) {
  // shm_vs_msg, shm_vs_rd: the last rank's allreduce takes the ring or
  // recursive doubling (the knob is read at its first use, after init).
  const char *rank_env = getenv("QUORUM_RANK");
  const char *size_env = getenv("QUORUM_SIZE");
  for (int i = 1; i < argc; ++i) {
    const std::string name = argv[i];
    if ((name == "shm_vs_msg" || name == "shm_vs_rd") && rank_env && size_env &&
        atoi(rank_env) == atoi(size_env) - 1) {
      setenv("QUORUM_ALLREDUCE_ALGO", name == "shm_vs_msg" ? "ring" : "recursive_doubling", 1);
    }
  }
  quorum_comm_t comm;
  if (quorum_init(&comm) != QUORUM_OK) {
    fprintf(stderr, "init: %s\n", quorum_last_error());
    return 1;
  }
  const int rank = quorum_comm_rank(comm), size = quorum_comm_size(comm);
  const char *timeout_env = getenv("QUORUM_TIMEOUT_MS");
  const double timeout_s = (timeout_env ? atof(timeout_env) : 60000.0) / 1000.0;
  bool all_ok = true;
  for (int i = 1; i < argc; ++i) {
    const std::string name = argv[i];
    const auto t0 = std::chrono::steady_clock::now();
    const quorum_status_t s = run_case(comm, name, rank == size - 1);
    const double took = seconds_since(t0);
    const std::string e = quorum_last_error();
    printf("rank %d: %s: %s after %.2f s: %s\n", rank, name.c_str(), quorum_strerror(s), took,
           s == QUORUM_OK ? "" : e.c_str());
    bool ok = s == QUORUM_ERR_MISMATCH && took <= timeout_s + 2 &&
              e.find("mismatch") != std::string::npos;
    // On messages the communicator goes on working after a mismatch.
    if (ok && getenv("QUORUM_SHM") != nullptr) {
      int32_t one = 1;
      const quorum_status_t after =
          quorum_allreduce(comm, QUORUM_IN_PLACE, &one, 1, QUORUM_INT32, QUORUM_SUM);
      if (after != QUORUM_OK || one != size) {
        printf("rank %d: %s: the allreduce after it gave %s, %d\n", rank, name.c_str(),
               quorum_strerror(after), one);
        ok = false;
      }
    }
    // On shared memory the channel is broken: a later allreduce fails at once
    // on every rank, the collectives over messages go on.
    if (ok && getenv("QUORUM_SHM") == nullptr) ok = after_broken_channel(comm, name, timeout_s);
    if (ok) printf("PASS rank %d %s\n", rank, name.c_str());
    all_ok = all_ok && ok;
    fflush(stdout);
  }
  const auto t1 = std::chrono::steady_clock::now();
  const quorum_status_t fs = quorum_finalize(comm);
  printf("rank %d: finalize: %s after %.2f s\n", rank, quorum_strerror(fs), seconds_since(t1));
  fflush(stdout);
  return all_ok ? 0 : 4;
}
