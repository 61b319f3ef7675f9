/* mpi_allreduce_bench.c: the Open MPI anchor for quorum-bench. MPI_Allreduce
 * (float32 sum) over the same sizes, timed the same way (an untimed barrier
 * before every call, mean per call on each rank, avg/min/max over ranks),
 * checked with the same integer-valued data, printed with the same columns
 * (out-of-place and in-place) or as the same JSON lines (-J).
 *
 *   mpirun -n 2 mpi_allreduce_bench [-b 8] [-e 64M] [-f 2] [-n iters] [-w warmup] [-J]
 *
 * Buffers are allocated and touched once, at the largest size. */
#include <mpi.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "parse_size.h"

/* The same scaling as quorum-bench: about 256 MiB per size, 5..1000 calls. */
static int auto_iters(size_t bytes) {
  size_t n = bytes ? ((size_t)256 << 20) / bytes : 1000;
  if (n < 5) n = 5;
  if (n > 1000) n = 1000;
  return (int)n;
}

static int auto_warmup(int iters) {
  int w = iters / 10;
  return w < 2 ? 2 : (w > 50 ? 50 : w);
}

/* quorum-bench's contribution for sum: ((r*7 + i*3) % 11) - 3. */
static float contribution(int rank, size_t i) {
  return (float)(((size_t)rank * 7 + i * 3) % 11) - 3.0f;
}

struct placement {
  double mean_us;
  long long wrong;
};

static long long check(float *send, float *recv, size_t count, int in_place, int rank, int n) {
  float *in = in_place ? recv : send;
  for (size_t i = 0; i < count; ++i) in[i] = contribution(rank, i);
  if (!in_place) memset(recv, 0xA5, count * sizeof(float));
  MPI_Allreduce(in_place ? MPI_IN_PLACE : send, recv, (int)count, MPI_FLOAT, MPI_SUM,
                MPI_COMM_WORLD);
  long long wrong = 0;
  for (size_t i = 0; i < count; ++i) {
    float want = 0;
    for (int r = 0; r < n; ++r) want += contribution(r, i);
    if (recv[i] != want) ++wrong;
  }
  return wrong;
}

static double time_calls(float *send, float *recv, size_t count, int in_place, int warmup,
                         int iters) {
  memset(in_place ? recv : send, 0, count * sizeof(float)); /* stays 0 under repeated sums */
  const void *s = in_place ? MPI_IN_PLACE : send;
  for (int i = 0; i < warmup; ++i) {
    MPI_Barrier(MPI_COMM_WORLD);
    MPI_Allreduce(s, recv, (int)count, MPI_FLOAT, MPI_SUM, MPI_COMM_WORLD);
  }
  double total = 0;
  for (int i = 0; i < iters; ++i) {
    MPI_Barrier(MPI_COMM_WORLD);
    double t0 = MPI_Wtime();
    MPI_Allreduce(s, recv, (int)count, MPI_FLOAT, MPI_SUM, MPI_COMM_WORLD);
    total += MPI_Wtime() - t0;
  }
  return total / iters * 1e6;
}

static void summarize(const double *all, int n, double *avg, double *mn, double *mx) {
  double sum = 0;
  *mn = all[0];
  *mx = all[0];
  for (int r = 0; r < n; ++r) {
    sum += all[r];
    if (all[r] < *mn) *mn = all[r];
    if (all[r] > *mx) *mx = all[r];
  }
  *avg = sum / n;
}

int main(int argc, char **argv) {
  MPI_Init(&argc, &argv);
  int rank, n;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  MPI_Comm_size(MPI_COMM_WORLD, &n);

  size_t min_bytes = 8, max_bytes = (size_t)64 << 20;
  int factor = 2, iters_opt = 0, warmup_opt = -1, json = 0, opt;
  while ((opt = getopt(argc, argv, "b:e:f:n:w:J")) != -1) {
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
      case 'n':
        iters_opt = atoi(optarg);
        break;
      case 'w':
        warmup_opt = atoi(optarg);
        break;
      case 'J':
        json = 1;
        break;
      default:
        if (rank == 0) {
          fprintf(stderr, "usage: %s [-b min] [-e max] [-f factor] [-n iters] [-w warmup] [-J]\n",
                  argv[0]);
        }
        MPI_Finalize();
        return 2;
    }
  }
  if (min_bytes < sizeof(float) || max_bytes < min_bytes || factor < 2) {
    if (rank == 0) fprintf(stderr, "mpi_allreduce_bench: bad -b/-e/-f\n");
    MPI_Finalize();
    return 2;
  }

  size_t max_count = max_bytes / sizeof(float);
  float *send = NULL, *recv = NULL;
  if (posix_memalign((void **)&send, 4096, max_count * sizeof(float)) != 0 ||
      posix_memalign((void **)&recv, 4096, max_count * sizeof(float)) != 0) {
    fprintf(stderr, "mpi_allreduce_bench: rank %d: cannot allocate 2 x %zu bytes\n", rank,
            max_bytes);
    MPI_Abort(MPI_COMM_WORLD, 1);
  }
  memset(send, 0, max_count * sizeof(float));
  memset(recv, 0, max_count * sizeof(float));

  if (rank == 0 && !json) {
    printf("# mpi_allreduce_bench: %d ranks, MPI_Allreduce float32 sum\n#\n", n);
    printf("#%11s %12s %8s %6s %5s %6s  %9s %9s %9s %7s %7s %6s  %9s %9s %9s %7s %7s %6s\n", "size",
           "count", "type", "redop", "root", "iters", "time", "min", "max", "algbw", "busbw",
           "#wrong", "time", "min", "max", "algbw", "busbw", "#wrong");
  }
  double bus_factor = 2.0 * (n - 1) / n;
  double *gathered = malloc(sizeof(double) * 2 * (size_t)n); /* (oop, in-place) per rank */
  double *per_rank = malloc(sizeof(double) * (size_t)n);
  long long total_wrong = 0;
  size_t last_count = 0;
  for (size_t bytes = min_bytes; bytes <= max_bytes; bytes *= (size_t)factor) {
    size_t count = bytes / sizeof(float);
    if (count == 0 || count == last_count) continue;
    last_count = count;
    size_t size = count * sizeof(float);
    int iters = iters_opt > 0 ? iters_opt : auto_iters(size);
    int warmup = warmup_opt >= 0 ? warmup_opt : auto_warmup(iters);
    struct placement mine[2];
    for (int p = 0; p < 2; ++p) {
      mine[p].wrong = check(send, recv, count, p, rank, n);
      mine[p].mean_us = time_calls(send, recv, count, p, warmup, iters);
    }
    long long wrong[2] = {0, 0};
    double my_t[2] = {mine[0].mean_us, mine[1].mean_us};
    MPI_Gather(my_t, 2, MPI_DOUBLE, gathered, 2, MPI_DOUBLE, 0, MPI_COMM_WORLD);
    long long my_w[2] = {mine[0].wrong, mine[1].wrong};
    MPI_Reduce(my_w, wrong, 2, MPI_LONG_LONG, MPI_SUM, 0, MPI_COMM_WORLD);
    if (rank == 0) {
      double avg[2], mn[2], mx[2], alg[2], bus[2];
      for (int p = 0; p < 2; ++p) {
        for (int r = 0; r < n; ++r) per_rank[r] = gathered[2 * r + p];
        summarize(per_rank, n, &avg[p], &mn[p], &mx[p]);
        alg[p] = avg[p] > 0 ? (double)size / avg[p] / 1e3 : 0;
        bus[p] = alg[p] * bus_factor;
        total_wrong += wrong[p];
      }
      if (json) {
        printf(
            "{\"coll\":\"allreduce\",\"impl\":\"mpi\",\"nranks\":%d,\"size\":%zu,\"count\":%zu,"
            "\"type\":\"float32\",\"op\":\"sum\",\"iters\":%d,\"warmup\":%d",
            n, size, count, iters, warmup);
        const char *names[2] = {"out_of_place", "in_place"};
        for (int p = 0; p < 2; ++p) {
          printf(
              ",\"%s\":{\"time_us\":%.4f,\"time_min_us\":%.4f,\"time_max_us\":%.4f,"
              "\"algbw_gbs\":%.6f,\"busbw_gbs\":%.6f,\"wrong\":%lld}",
              names[p], avg[p], mn[p], mx[p], alg[p], bus[p], wrong[p]);
        }
        printf("}\n");
      } else {
        printf(" %11zu %12zu %8s %6s %5d %6d", size, count, "float32", "sum", -1, iters);
        for (int p = 0; p < 2; ++p) {
          printf("  %9.2f %9.2f %9.2f %7.2f %7.2f %6lld", avg[p], mn[p], mx[p], alg[p], bus[p],
                 wrong[p]);
        }
        printf("\n");
      }
      fflush(stdout);
    }
  }
  if (rank == 0 && !json)
    printf("# Out of bounds values : %lld %s\n", total_wrong, total_wrong ? "FAILED" : "OK");
  free(gathered);
  free(per_rank);
  free(send);
  free(recv);
  MPI_Finalize();
  return total_wrong ? 3 : 0;
}
