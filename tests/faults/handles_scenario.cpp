// handles_scenario.cpp: misuse of handles and threads, and launches that
// cannot work, through the C API. Modes:
//   threads  - (under quorum-run -n 2) rank 0 calls an allreduce that waits
//              for rank 1 (which joins 0.5 s late) while a second thread
//              calls in on the same communicator: the second call is refused
//              with QUORUM_ERR_INVALID_ARG naming the rule, the first one
//              returns the right sum. Then released handles: a partial
//              object destroyed twice, a communicator used and finalized
//              after its finalize: all refused, no crash.
//   launch   - (alone, with SLURM_STEP_NUM_TASKS or OMPI_COMM_WORLD_SIZE set
//              by the test) quorum_init refuses with QUORUM_ERR_BOOTSTRAP and
//              says how to launch; "launch-single" (QUORUM_BOOTSTRAP=single
//              also set) runs as one rank.
// Prints "PASS <mode>" and exits 0 when every check held.
#include <unistd.h>

#include <atomic>
#include <cstdio>
#include <cstring>
#include <string>
#include <thread>

#include "quorum/quorum.h"

namespace {

int failures = 0;

void check(bool ok, const char *what, const std::string &detail = "") {
  if (!ok) {
    printf("FAILED: %s %s\n", what, detail.c_str());
    ++failures;
  }
}

bool refused(quorum_status_t s, const char *needle) {
  return s == QUORUM_ERR_INVALID_ARG && std::strstr(quorum_last_error(), needle) != nullptr;
}

int threads_mode() {
  quorum_comm_t comm;
  if (quorum_init(&comm) != QUORUM_OK) {
    fprintf(stderr, "init: %s\n", quorum_last_error());
    return 1;
  }
  const int rank = quorum_comm_rank(comm), size = quorum_comm_size(comm);
  // One caller at a time.
  int32_t v = rank + 1;
  if (rank == 1) usleep(500000);
  std::atomic<bool> started{false};
  quorum_status_t first = QUORUM_OK;
  std::thread caller([&] {
    started = true;
    first = quorum_allreduce(comm, QUORUM_IN_PLACE, &v, 1, QUORUM_INT32, QUORUM_SUM);
  });
  if (rank == 0) {
    while (!started) usleep(1000);
    usleep(100000);  // the caller waits for rank 1 now
    int32_t w = 7;
    check(refused(quorum_allreduce(comm, QUORUM_IN_PLACE, &w, 1, QUORUM_INT32, QUORUM_SUM),
                  "another thread"),
          "a concurrent allreduce is refused", quorum_last_error());
    check(refused(quorum_barrier(comm), "another thread"), "a concurrent barrier is refused",
          quorum_last_error());
    quorum_request_t req = nullptr;
    check(refused(quorum_iallreduce(comm, &w, &w, 1, QUORUM_INT32, QUORUM_MAX, &req),
                  "another thread"),
          "a concurrent iallreduce is refused", quorum_last_error());
    check(req == nullptr && w == 7, "the refused calls changed nothing");
  }
  caller.join();
  check(first == QUORUM_OK && v == size * (size + 1) / 2, "the first caller's allreduce",
        quorum_last_error());

  // Released partial objects.
  quorum_partial_opts_t opts{};
  quorum_partial_t partial = nullptr;
  check(quorum_partial_create(comm, 4, QUORUM_INT64, QUORUM_SUM, &opts, &partial) == QUORUM_OK,
        "partial_create", quorum_last_error());
  check(quorum_partial_destroy(partial) == QUORUM_OK, "partial_destroy", quorum_last_error());
  check(refused(quorum_partial_destroy(partial), "released"), "a second destroy is refused",
        quorum_last_error());
  check(refused(quorum_partial_free(partial), "released"), "free after destroy is refused",
        quorum_last_error());
  int64_t c[4] = {1, 2, 3, 4};
  check(refused(quorum_partial_post(partial, c), "released"), "post after destroy is refused",
        quorum_last_error());

  // Released communicators.
  check(quorum_finalize(comm) == QUORUM_OK, "finalize", quorum_last_error());
  check(refused(quorum_allreduce(comm, QUORUM_IN_PLACE, &v, 1, QUORUM_INT32, QUORUM_SUM),
                "finalized"),
        "an allreduce after finalize is refused", quorum_last_error());
  check(refused(quorum_barrier(comm), "finalized"), "a barrier after finalize is refused",
        quorum_last_error());
  check(refused(quorum_finalize(comm), "finalized"), "a second finalize is refused",
        quorum_last_error());
  check(quorum_comm_rank(comm) == -1 && quorum_comm_size(comm) == -1,
        "rank and size of a finalized communicator");
  check(refused(quorum_partial_create(comm, 4, QUORUM_INT64, QUORUM_SUM, &opts, &partial),
                "finalized"),
        "partial_create after finalize is refused", quorum_last_error());
  return 0;
}

int launch_mode(bool single) {
  quorum_comm_t comm = nullptr;
  const quorum_status_t s = quorum_init(&comm);
  if (single) {
    check(s == QUORUM_OK && quorum_comm_size(comm) == 1, "QUORUM_BOOTSTRAP=single runs alone",
          quorum_last_error());
    if (s == QUORUM_OK) quorum_finalize(comm);
  } else {
    printf("init: %s: %s\n", quorum_strerror(s), quorum_last_error());
    const std::string e = quorum_last_error();
    check(s == QUORUM_ERR_BOOTSTRAP, "refused as a bootstrap error");
    check(
        e.find("rank 0 of 1") != std::string::npos &&
            (e.find("srun --mpi=pmix") != std::string::npos || e.find("PMIx") != std::string::npos),
        "the message says why and how to launch", e);
  }
  return 0;
}

}  // namespace

int main(int argc, char **argv) {
  const std::string mode = argc > 1 ? argv[1] : "";
  int rc = 2;
  if (mode == "threads") rc = threads_mode();
  if (mode == "launch") rc = launch_mode(false);
  if (mode == "launch-single") rc = launch_mode(true);
  if (rc != 0) return rc;
  if (failures == 0) printf("PASS %s\n", mode.c_str());
  fflush(stdout);
  return failures == 0 ? 0 : 4;
}
