/* link_down_probe.c [DIR [LINGER_MS [DIE_RANK]]]: allreduces (1 MiB float32
 * sum, in place) in a loop for up to 60 s while a host's link is taken down,
 * or while rank DIE_RANK kills itself (SIGKILL, no cleanup) after 1 s of
 * looping; each rank prints what the failing call returned and how long it
 * blocked, then how long quorum_finalize took and what it returned. With DIR,
 * each rank also writes these lines to DIR/rank.N (the output of ranks behind
 * a dead link never reaches mpirun); LINGER_MS: how long a rank waits before
 * it exits (so that a launcher aborting the job on the first non-zero exit
 * does not kill the others before they report). Exit 3: the call failed with
 * PEER_FAILED or TIMEOUT; 4: another error; 5: no failure seen. */
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>
#include <unistd.h>

#include "quorum/quorum.h"

static double now_ms(void) {
  struct timespec t;
  clock_gettime(CLOCK_MONOTONIC, &t);
  return (double)t.tv_sec * 1e3 + (double)t.tv_nsec / 1e6;
}

static FILE *g_report = NULL;

/* One line to stdout and, when asked, to this rank's report file. */
static void report(const char *line) {
  fputs(line, stdout);
  fflush(stdout);
  if (g_report != NULL) {
    fputs(line, g_report);
    fflush(g_report);
  }
}

int main(int argc, char **argv) {
  quorum_comm_t comm;
  if (quorum_init(&comm) != QUORUM_OK) {
    fprintf(stderr, "init: %s\n", quorum_last_error());
    return 1;
  }
  const int rank = quorum_comm_rank(comm);
  char line[4096];
  if (argc > 1) {
    snprintf(line, sizeof(line), "%s/rank.%d", argv[1], rank);
    g_report = fopen(line, "w");
    if (g_report == NULL) return 1;
  }
  const long linger_ms = argc > 2 ? atol(argv[2]) : 0;
  const int die_rank = argc > 3 ? atoi(argv[3]) : -1;
  const size_t count = (size_t)1 << 18;
  float *buf = malloc(count * sizeof(float));
  if (buf == NULL) return 1;
  for (size_t i = 0; i < count; ++i) buf[i] = 1.0f;
  const double start = now_ms();
  printf("rank %d: ready\n", rank);
  fflush(stdout);
  int code = 5;
  for (long iter = 0; now_ms() - start < 60e3; ++iter) {
    const double t0 = now_ms();
    if (rank == die_rank && t0 - start > 1e3) {
      snprintf(line, sizeof(line), "rank %d: killing itself at call %ld\n", rank, iter);
      report(line);
      raise(SIGKILL);
    }
    quorum_status_t s =
        quorum_allreduce(comm, QUORUM_IN_PLACE, buf, count, QUORUM_FLOAT32, QUORUM_SUM);
    if (s == QUORUM_OK) continue;
    const double t1 = now_ms();
    snprintf(line, sizeof(line),
             "rank %d: call %ld failed after %.0f ms (%.0f ms into the loop): %s: %s\n", rank, iter,
             t1 - t0, t1 - start, quorum_strerror(s), quorum_last_error());
    report(line);
    code = (s == QUORUM_ERR_PEER_FAILED || s == QUORUM_ERR_TIMEOUT) ? 3 : 4;
    break;
  }
  fflush(stdout);
  {
    const double f0 = now_ms();
    quorum_status_t f = quorum_finalize(comm);
    snprintf(line, sizeof(line), "rank %d: finalize returned %s after %.0f ms\n", rank,
             quorum_strerror(f), now_ms() - f0);
  }
  report(line);
  if (g_report != NULL) fclose(g_report);
  free(buf);
  if (linger_ms > 0) usleep((useconds_t)linger_ms * 1000);
  return code;
}
