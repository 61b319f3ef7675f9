// rank_death_test.cpp: run by quorum-run --keep-going. The last rank kills
// itself (SIGKILL) in the middle of a stream of large allreduces; every
// survivor must see QUORUM_ERR_PEER_FAILED or QUORUM_ERR_TIMEOUT within the
// timeout, with a message naming the operation, and exit 3 ("failure seen").
// Any other outcome (a hang, a wrong success, a crash) exits differently.
// With --shared the buffer comes from quorum_mem_alloc (the shm allreduce's
// zero-copy path, whose survivors wait on flags the dead rank never sets).
#include <signal.h>
#include <unistd.h>

#include <cstdio>
#include <cstring>
#include <string>
#include <vector>

#include "quorum/quorum.h"

int main(int argc, char **argv) {
  const bool shared = argc > 1 && std::strcmp(argv[1], "--shared") == 0;
  quorum_comm_t comm;
  if (quorum_init(&comm) != QUORUM_OK) {
    fprintf(stderr, "init: %s\n", quorum_last_error());
    return 1;
  }
  const int rank = quorum_comm_rank(comm), size = quorum_comm_size(comm);
  const size_t count = 1 << 20;
  std::vector<float> plain;
  float *buf = nullptr;
  if (shared) {
    void *p = nullptr;
    if (quorum_mem_alloc(comm, count * sizeof(float), &p) != QUORUM_OK) {
      fprintf(stderr, "mem_alloc: %s\n", quorum_last_error());
      return 1;
    }
    buf = static_cast<float *>(p);
  } else {
    plain.resize(count);
    buf = plain.data();
  }
  for (size_t i = 0; i < count; ++i) buf[i] = 1.0f;
  for (int iter = 0; iter < 1000; ++iter) {
    if (rank == size - 1 && iter == 5) raise(SIGKILL);
    quorum_status_t s =
        quorum_allreduce(comm, QUORUM_IN_PLACE, buf, count, QUORUM_FLOAT32, QUORUM_MAX);
    if (s == QUORUM_OK) continue;
    std::string e = quorum_last_error();
    bool expected = (s == QUORUM_ERR_PEER_FAILED || s == QUORUM_ERR_TIMEOUT) &&
                    e.find("allreduce") != std::string::npos;
    printf("rank %d: iteration %d: %s: %s\n", rank, iter, quorum_strerror(s), e.c_str());
    fflush(stdout);
    _exit(expected ? 3 : 4);  // no finalize: the job is broken
  }
  printf("rank %d: no failure seen\n", rank);
  return 5;
}
