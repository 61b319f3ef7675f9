/* mpi_vs_quorum.c: MPI_Allreduce and quorum_allreduce side by side in one MPI
 * program, the way an application that uses both would call them. MPI hands
 * MPI_COMM_WORLD over to quorum (quorum_init_oob over MPI_Allgather); then,
 * per size (float32 sum, out-of-place and in-place), rounds alternate the two
 * on the same buffers: in each round `iters` calls of MPI_Allreduce, then
 * `iters` of quorum_allreduce (an untimed MPI_Barrier before every call), so
 * both meet the same machine, binding and neighbours. Round 0 warms up and is
 * not counted. Every round also checks each library's result exactly
 * (integer-valued data, as quorum-bench and mpi_allreduce_bench use).
 *
 * Printed per size and placement: each library's busbw (GB/s, allreduce:
 * algbw x 2(P-1)/P; a round's time is its mean per call, averaged over
 * ranks) as the median over rounds, their ratio (quorum / MPI), and the worst
 * round's ratio.
 *
 *   mpirun -n 2 mpi_vs_quorum [-b 1M] [-e 16M] [-f 2] [-r rounds] [-n iters]
 *
 * Exits 3 if a result was wrong, 1 if a call failed. */
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <quorum/quorum.h>

#include "parse_size.h"

enum library { LIB_MPI, LIB_QUORUM, LIB_COUNT };

static int mpi_allgather(const void *send, void *recv, size_t bytes_per_rank, void *ctx) {
  MPI_Comm comm = *(MPI_Comm *)ctx;
  return MPI_Allgather(send, (int)bytes_per_rank, MPI_BYTE, recv, (int)bytes_per_rank, MPI_BYTE,
                       comm) == MPI_SUCCESS
             ? 0
             : 1;
}

/* About 32 MiB per round and library, 2..32 calls. */
static int auto_iters(size_t bytes) {
  size_t n = ((size_t)32 << 20) / bytes;
  if (n < 2) n = 2;
  if (n > 32) n = 32;
  return (int)n;
}

/* quorum-bench's contribution for sum: ((r*7 + i*3) % 11) - 3. */
static float contribution(int rank, size_t i) {
  return (float)(((size_t)rank * 7 + i * 3) % 11) - 3.0f;
}

static quorum_comm_t qcomm;

static void allreduce(enum library lib, const float *send, float *recv, size_t count) {
  if (lib == LIB_MPI) {
    if (MPI_Allreduce(send ? (const void *)send : MPI_IN_PLACE, recv, (int)count, MPI_FLOAT,
                      MPI_SUM, MPI_COMM_WORLD) != MPI_SUCCESS) {
      fprintf(stderr, "mpi_vs_quorum: MPI_Allreduce of %zu floats failed\n", count);
      MPI_Abort(MPI_COMM_WORLD, 1);
    }
    return;
  }
  quorum_status_t s = quorum_allreduce(qcomm, send ? (const void *)send : QUORUM_IN_PLACE, recv,
                                       count, QUORUM_FLOAT32, QUORUM_SUM);
  if (s != QUORUM_OK) {
    fprintf(stderr, "mpi_vs_quorum: quorum_allreduce of %zu floats failed: %s\n", count,
            quorum_last_error());
    MPI_Abort(MPI_COMM_WORLD, 1);
  }
}

/* Elements of recv that differ from the sum of every rank's contribution
 * (expect_zero: from 0, what repeated sums of zeros leave). */
static long long count_wrong(const float *recv, size_t count, int n, int expect_zero) {
  long long wrong = 0;
  for (size_t i = 0; i < count; ++i) {
    float want = 0;
    if (!expect_zero) {
      for (int r = 0; r < n; ++r) want += contribution(r, i);
    }
    if (recv[i] != want) ++wrong;
  }
  return wrong;
}

/* One library's share of a round: a checked call with integer data, then
 * `iters` timed calls. Out of place the send buffer keeps its data and the
 * last result is checked; in place the buffer holds zeros, which stay zero.
 * Returns the mean time per timed call (s); adds wrong elements to *wrong. */
static double run_share(enum library lib, float *send, float *recv, size_t count, int in_place,
                        int iters, int rank, int n, long long *wrong) {
  float *in = in_place ? recv : send;
  for (size_t i = 0; i < count; ++i) in[i] = contribution(rank, i);
  if (!in_place) memset(recv, 0xA5, count * sizeof(float));
  MPI_Barrier(MPI_COMM_WORLD);
  allreduce(lib, in_place ? NULL : send, recv, count);
  *wrong += count_wrong(recv, count, n, 0);

  if (in_place) memset(recv, 0, count * sizeof(float));
  double total = 0;
  for (int i = 0; i < iters; ++i) {
    MPI_Barrier(MPI_COMM_WORLD);
    double t0 = MPI_Wtime();
    allreduce(lib, in_place ? NULL : send, recv, count);
    total += MPI_Wtime() - t0;
  }
  *wrong += count_wrong(recv, count, n, in_place);
  return total / iters;
}

static int compare_doubles(const void *a, const void *b) {
  double x = *(const double *)a, y = *(const double *)b;
  return (x > y) - (x < y);
}

static double median(double *v, int n) {
  qsort(v, (size_t)n, sizeof(double), compare_doubles);
  return n % 2 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
}

int main(int argc, char **argv) {
  MPI_Init(&argc, &argv);
  MPI_Comm world = MPI_COMM_WORLD;
  int rank, n;
  MPI_Comm_rank(world, &rank);
  MPI_Comm_size(world, &n);

  size_t min_bytes = (size_t)1 << 20, max_bytes = (size_t)16 << 20;
  int factor = 2, rounds = 10, iters_opt = 0, opt;
  while ((opt = getopt(argc, argv, "b:e:f:r:n:")) != -1) {
    switch (opt) {
      case 'b':
        min_bytes = parse_size(optarg);
        break;
      case 'e':
        max_bytes = parse_size(optarg);
        break;
      case 'f':
        factor = atoi(optarg);
        break;
      case 'r':
        rounds = atoi(optarg);
        break;
      case 'n':
        iters_opt = atoi(optarg);
        break;
      default:
        if (rank == 0) {
          fprintf(stderr, "usage: %s [-b min] [-e max] [-f factor] [-r rounds] [-n iters]\n",
                  argv[0]);
        }
        MPI_Finalize();
        return 2;
    }
  }
  if (min_bytes < sizeof(float) || max_bytes < min_bytes || factor < 2 || rounds < 1) {
    if (rank == 0) fprintf(stderr, "mpi_vs_quorum: bad -b/-e/-f/-r\n");
    MPI_Finalize();
    return 2;
  }

  quorum_oob_t oob = {rank, n, mpi_allgather, &world};
  if (quorum_init_oob(&oob, &qcomm) != QUORUM_OK) {
    fprintf(stderr, "mpi_vs_quorum: rank %d: quorum_init_oob: %s\n", rank, quorum_last_error());
    MPI_Abort(world, 1);
  }

  size_t max_count = max_bytes / sizeof(float);
  float *send = NULL, *recv = NULL;
  if (posix_memalign((void **)&send, 4096, max_count * sizeof(float)) != 0 ||
      posix_memalign((void **)&recv, 4096, max_count * sizeof(float)) != 0) {
    fprintf(stderr, "mpi_vs_quorum: rank %d: cannot allocate 2 x %zu bytes\n", rank, max_bytes);
    MPI_Abort(world, 1);
  }
  memset(send, 0, max_count * sizeof(float));
  memset(recv, 0, max_count * sizeof(float));

  if (rank == 0) {
    printf(
        "# mpi_vs_quorum: %d ranks, float32 sum, quorum over %s; %d rounds (+1 warm-up), "
        "MPI then quorum in each\n",
        n, quorum_comm_transport(qcomm), rounds);
    printf(
        "# busbw in GB/s: median over rounds; ratio = quorum / MPI of the medians; worst = "
        "the lowest ratio of one round\n#\n");
    printf("#%11s %-12s %5s  %9s %9s %7s %7s  %9s\n", "size", "placement", "iters", "MPI", "quorum",
           "ratio", "worst", "#wrong");
  }
  const double bus_factor = 2.0 * (n - 1) / n;
  double *times = malloc(sizeof(double) * (size_t)rounds * LIB_COUNT);
  double *sorted = malloc(sizeof(double) * (size_t)rounds);
  long long total_wrong = 0;
  size_t last_count = 0;
  for (size_t bytes = min_bytes; bytes <= max_bytes; bytes *= (size_t)factor) {
    size_t count = bytes / sizeof(float);
    if (count == 0 || count == last_count) continue;
    last_count = count;
    const size_t size = count * sizeof(float);
    const int iters = iters_opt > 0 ? iters_opt : auto_iters(size);
    for (int in_place = 0; in_place < 2; ++in_place) {
      long long wrong = 0;
      for (int round = 0; round <= rounds; ++round) {
        for (int lib = 0; lib < LIB_COUNT; ++lib) {
          double mine =
              run_share((enum library)lib, send, recv, count, in_place, iters, rank, n, &wrong);
          double sum = 0;
          MPI_Allreduce(&mine, &sum, 1, MPI_DOUBLE, MPI_SUM, world);
          if (round > 0) times[(round - 1) * LIB_COUNT + lib] = sum / n;
        }
      }
      long long all_wrong = 0;
      MPI_Reduce(&wrong, &all_wrong, 1, MPI_LONG_LONG, MPI_SUM, 0, world);
      if (rank != 0) continue;
      total_wrong += all_wrong;
      double bus[LIB_COUNT], worst = 0;
      for (int lib = 0; lib < LIB_COUNT; ++lib) {
        for (int r = 0; r < rounds; ++r) sorted[r] = times[r * LIB_COUNT + lib];
        bus[lib] = (double)size / median(sorted, rounds) / 1e9 * bus_factor;
      }
      for (int r = 0; r < rounds; ++r) {
        /* busbw ratio = time ratio, inverted */
        double ratio = times[r * LIB_COUNT + LIB_MPI] / times[r * LIB_COUNT + LIB_QUORUM];
        if (r == 0 || ratio < worst) worst = ratio;
      }
      printf(" %11zu %-12s %5d  %9.2f %9.2f %7.2f %7.2f  %9lld\n", size,
             in_place ? "in-place" : "out-of-place", iters, bus[LIB_MPI], bus[LIB_QUORUM],
             bus[LIB_QUORUM] / bus[LIB_MPI], worst, all_wrong);
      fflush(stdout);
    }
  }
  if (rank == 0) printf("# %s: %lld wrong elements\n", total_wrong ? "FAILED" : "OK", total_wrong);
  free(times);
  free(sorted);
  free(send);
  free(recv);
  quorum_finalize(qcomm);
  MPI_Finalize();
  return total_wrong ? 3 : 0;
}
