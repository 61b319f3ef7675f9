/* link_flap_probe.c DIR LOOP_MS: checked collectives in a loop for about
 * LOOP_MS while a host's link goes down briefly and comes back (link_flap.sh).
 * Each iteration runs three allreduces (sum, out of place) whose exact result
 * every rank can compute: 8 B (1 int64), 64 KiB (16384 int32) and 4 MiB
 * (1 Mi float32, small integers, so the sum is exact), then one round of a
 * solo partial allreduce with carry (int64, posted and waited on every
 * iteration), then a 4 B max allreduce by which rank 0 ends the loop on every
 * rank at once. After the loop the partial object is flushed and every rank
 * checks conservation: the sum of all round results and the flush equals the
 * sum of every rank's posts (an allreduce of them). Every call must return
 * QUORUM_OK with exact values. Each rank prints, and writes to DIR/rank.N,
 * one line: its iterations, the longest call (which one, and when), and
 * "all correct" or the first wrong element (rank, iteration, index, got,
 * expected). Exit 0: all correct; 3: a call failed; 4: a wrong value. */
#include <inttypes.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "quorum/quorum.h"

enum { SMALL_COUNT = 1, MEDIUM_COUNT = 16384, LARGE_COUNT = 1 << 20, PARTIAL_COUNT = 4096 };

/* The calls of one iteration, for the report. */
typedef enum {
  CALL_SMALL,
  CALL_MEDIUM,
  CALL_LARGE,
  CALL_PARTIAL_POST,
  CALL_PARTIAL_WAIT,
  CALL_STOP,
  CALL_KINDS
} call_kind_t;

static const char *const call_names[CALL_KINDS] = {"allreduce 8 B",       "allreduce 64 KiB",
                                                   "allreduce 4 MiB",     "partial post (solo)",
                                                   "partial wait (solo)", "stop allreduce"};

static double now_ms(void) {
  struct timespec t;
  clock_gettime(CLOCK_MONOTONIC, &t);
  return (double)t.tv_sec * 1e3 + (double)t.tv_nsec / 1e6;
}

/* The longest call seen so far. */
typedef struct {
  double ms;
  double at_ms; /* its end, in ms since the loop started */
  long iter;
  call_kind_t kind;
} longest_t;

static double g_start;
static longest_t g_longest;
static long g_iter;
static char g_failure[512];

/* Runs a call's result through the bookkeeping: its time, and its status. */
static int timed(call_kind_t kind, double t0, quorum_status_t s) {
  const double t1 = now_ms();
  if (t1 - t0 > g_longest.ms) {
    g_longest.ms = t1 - t0;
    g_longest.at_ms = t1 - g_start;
    g_longest.iter = g_iter;
    g_longest.kind = kind;
  }
  if (s == QUORUM_OK) return 1;
  snprintf(g_failure, sizeof(g_failure), "iteration %ld: %s failed after %.0f ms: %s: %s", g_iter,
           call_names[kind], t1 - t0, quorum_strerror(s), quorum_last_error());
  return 0;
}

/* Records the first wrong element. */
static void wrong(call_kind_t kind, size_t index, double got, double expected) {
  if (g_failure[0] != '\0') return;
  snprintf(g_failure, sizeof(g_failure), "iteration %ld: %s: element %zu is %.17g, expected %.17g",
           g_iter, call_names[kind], index, got, expected);
}

/* Rank r's element i in iteration k; the sums over P ranks follow. */
static int64_t small_value(int r, long k) {
  return (int64_t)k * 1000003 + r * 11 + 1;
}
static int32_t medium_value(int r, long k, size_t i) {
  return (int32_t)((k * 31 + (long)i) % 100003) - 50000 + r;
}
static float large_value(int r, long k, size_t i) {
  return (float)((k + (long)i) % 4099) + (float)r;
}
static int64_t partial_value(int r, long k, size_t i) {
  return (int64_t)(k + 1) * 1000 + (int64_t)i * 7 + r * 100003;
}

int main(int argc, char **argv) {
  if (argc < 3) {
    fprintf(stderr, "usage: link_flap_probe DIR LOOP_MS\n");
    return 2;
  }
  quorum_comm_t comm;
  if (quorum_init(&comm) != QUORUM_OK) {
    fprintf(stderr, "init: %s\n", quorum_last_error());
    return 1;
  }
  const int rank = quorum_comm_rank(comm);
  const int size = quorum_comm_size(comm);
  const double loop_ms = atof(argv[2]);
  char line[1024];
  snprintf(line, sizeof(line), "%s/rank.%d", argv[1], rank);
  FILE *report = fopen(line, "w");
  int64_t small_in, small_out;
  int32_t *medium_in = malloc(MEDIUM_COUNT * sizeof(int32_t));
  int32_t *medium_out = malloc(MEDIUM_COUNT * sizeof(int32_t));
  float *large_in = malloc((size_t)LARGE_COUNT * sizeof(float));
  float *large_out = malloc((size_t)LARGE_COUNT * sizeof(float));
  int64_t *part_in = malloc(PARTIAL_COUNT * sizeof(int64_t));
  int64_t *part_out = malloc(PARTIAL_COUNT * sizeof(int64_t));
  int64_t *posted = calloc(PARTIAL_COUNT, sizeof(int64_t));
  int64_t *got = calloc(PARTIAL_COUNT, sizeof(int64_t));
  int64_t *total = malloc(PARTIAL_COUNT * sizeof(int64_t));
  if (report == NULL || !medium_in || !medium_out || !large_in || !large_out || !part_in ||
      !part_out || !posted || !got || !total) {
    fprintf(stderr, "rank %d: setup failed\n", rank);
    return 1;
  }
  quorum_partial_opts_t opts = {0};
  opts.mode = QUORUM_PARTIAL_SOLO;
  opts.max_staleness = 4;
  opts.carry = 1;
  quorum_partial_t partial;
  if (quorum_partial_create(comm, PARTIAL_COUNT, QUORUM_INT64, QUORUM_SUM, &opts, &partial) !=
      QUORUM_OK) {
    fprintf(stderr, "rank %d: partial_create: %s\n", rank, quorum_last_error());
    return 1;
  }
  const int64_t p = size;
  const int64_t rank_sum = p * (p - 1) / 2; /* sum of r over the ranks */
  printf("rank %d: ready\n", rank);
  fflush(stdout);
  g_start = now_ms();
  int ok = 1;
  long rounds = 0;
  for (g_iter = 0; ok; ++g_iter) {
    const long k = g_iter;
    double t0;
    small_in = small_value(rank, k);
    t0 = now_ms();
    ok =
        timed(CALL_SMALL, t0,
              quorum_allreduce(comm, &small_in, &small_out, SMALL_COUNT, QUORUM_INT64, QUORUM_SUM));
    if (!ok) break;
    const int64_t small_expected = p * ((int64_t)k * 1000003 + 1) + 11 * rank_sum;
    if (small_out != small_expected)
      wrong(CALL_SMALL, 0, (double)small_out, (double)small_expected);

    for (size_t i = 0; i < MEDIUM_COUNT; ++i) medium_in[i] = medium_value(rank, k, i);
    t0 = now_ms();
    ok = timed(
        CALL_MEDIUM, t0,
        quorum_allreduce(comm, medium_in, medium_out, MEDIUM_COUNT, QUORUM_INT32, QUORUM_SUM));
    if (!ok) break;
    for (size_t i = 0; i < MEDIUM_COUNT; ++i) {
      const int64_t e = p * (int64_t)medium_value(0, k, i) + rank_sum;
      if (medium_out[i] != e) {
        wrong(CALL_MEDIUM, i, medium_out[i], (double)e);
        break;
      }
    }

    for (size_t i = 0; i < LARGE_COUNT; ++i) large_in[i] = large_value(rank, k, i);
    t0 = now_ms();
    ok =
        timed(CALL_LARGE, t0,
              quorum_allreduce(comm, large_in, large_out, LARGE_COUNT, QUORUM_FLOAT32, QUORUM_SUM));
    if (!ok) break;
    for (size_t i = 0; i < LARGE_COUNT; ++i) {
      const float e = (float)p * large_value(0, k, i) + (float)rank_sum;
      if (large_out[i] != e) {
        wrong(CALL_LARGE, i, large_out[i], e);
        break;
      }
    }

    for (size_t i = 0; i < PARTIAL_COUNT; ++i) {
      part_in[i] = partial_value(rank, k, i);
      posted[i] += part_in[i];
    }
    t0 = now_ms();
    ok = timed(CALL_PARTIAL_POST, t0, quorum_partial_post(partial, part_in));
    if (!ok) break;
    quorum_round_info_t info;
    t0 = now_ms();
    ok = timed(CALL_PARTIAL_WAIT, t0, quorum_partial_wait(partial, part_out, &info));
    if (!ok) break;
    for (size_t i = 0; i < PARTIAL_COUNT; ++i) got[i] += part_out[i];
    ++rounds;

    int32_t stop_in = rank == 0 && now_ms() - g_start >= loop_ms, stop = 0;
    t0 = now_ms();
    ok = timed(CALL_STOP, t0, quorum_allreduce(comm, &stop_in, &stop, 1, QUORUM_INT32, QUORUM_MAX));
    if (!ok || stop) break;
  }
  const long iterations = g_iter + (ok ? 1 : 0);
  if (ok) {
    const double t0 = now_ms();
    ok = timed(CALL_PARTIAL_WAIT, t0, quorum_partial_flush(partial, part_out));
  }
  if (ok) {
    for (size_t i = 0; i < PARTIAL_COUNT; ++i) got[i] += part_out[i];
    const double t0 = now_ms();
    ok = timed(CALL_STOP, t0,
               quorum_allreduce(comm, posted, total, PARTIAL_COUNT, QUORUM_INT64, QUORUM_SUM));
  }
  if (ok) {
    for (size_t i = 0; i < PARTIAL_COUNT; ++i) {
      if (got[i] != total[i]) {
        if (g_failure[0] == '\0') {
          snprintf(g_failure, sizeof(g_failure),
                   "conservation after %ld rounds: element %zu of the results sums to %" PRId64
                   ", the posts to %" PRId64,
                   rounds, i, got[i], total[i]);
        }
        break;
      }
    }
  }
  const int correct = ok && g_failure[0] == '\0';
  snprintf(line, sizeof(line),
           "rank %d: %ld iterations, %ld solo rounds in %.0f ms; longest call %.0f ms (%s, "
           "iteration %ld, ended %.0f ms into the loop); %s%s\n",
           rank, iterations, rounds, now_ms() - g_start, g_longest.ms, call_names[g_longest.kind],
           g_longest.iter, g_longest.at_ms,
           correct ? "all correct" : "FAILED: ", correct ? "" : g_failure);
  fputs(line, stdout);
  fputs(line, report);
  fflush(stdout);
  fflush(report);
  const quorum_status_t d = quorum_partial_destroy(partial);
  const quorum_status_t f = quorum_finalize(comm);
  if (d == QUORUM_OK && f == QUORUM_OK) {
    snprintf(line, sizeof(line), "rank %d: partial_destroy and finalize returned QUORUM_OK\n",
             rank);
  } else {
    snprintf(line, sizeof(line), "rank %d: partial_destroy: %s, finalize: %s\n", rank,
             quorum_strerror(d), quorum_strerror(f));
  }
  fputs(line, stdout);
  fputs(line, report);
  fclose(report);
  free(medium_in);
  free(medium_out);
  free(large_in);
  free(large_out);
  free(part_in);
  free(part_out);
  free(posted);
  free(got);
  free(total);
  if (!ok) return 3;
  if (!correct || d != QUORUM_OK || f != QUORUM_OK) return 4;
  return 0;
}
