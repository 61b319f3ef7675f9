/* memcpy_bw.c: the physical limit next to quorum-bench's figures: one-thread
 * memcpy bandwidth (bytes copied / time, GB = 1e9) over the same sizes, with
 * buffers allocated and touched once at the largest size. JSON lines with -J.
 *
 *   memcpy_bw [-b 8] [-e 64M] [-f 2] [-J] */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "parse_size.h"

static double now_s(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

int main(int argc, char **argv) {
  size_t min_bytes = 8, max_bytes = (size_t)64 << 20;
  int factor = 2, json = 0, opt;
  while ((opt = getopt(argc, argv, "b:e:f:J")) != -1) {
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
      case 'J':
        json = 1;
        break;
      default:
        fprintf(stderr, "usage: %s [-b min] [-e max] [-f factor] [-J]\n", argv[0]);
        return 2;
    }
  }
  if (min_bytes == 0 || max_bytes < min_bytes || factor < 2) {
    fprintf(stderr, "memcpy_bw: bad -b/-e/-f\n");
    return 2;
  }
  unsigned char *src = NULL, *dst = NULL;
  if (posix_memalign((void **)&src, 4096, max_bytes) != 0 ||
      posix_memalign((void **)&dst, 4096, max_bytes) != 0) {
    fprintf(stderr, "memcpy_bw: cannot allocate 2 x %zu bytes\n", max_bytes);
    return 1;
  }
  memset(src, 1, max_bytes);
  memset(dst, 0, max_bytes);
  if (!json) printf("#%11s %8s %10s %8s\n", "size", "iters", "time(us)", "GB/s");
  for (size_t bytes = min_bytes; bytes <= max_bytes; bytes *= (size_t)factor) {
    /* About 1 GiB copied per size, 20..100000 copies, after a few warm-up copies. */
    size_t iters = ((size_t)1 << 30) / bytes;
    if (iters < 20) iters = 20;
    if (iters > 100000) iters = 100000;
    for (int i = 0; i < 3; ++i) memcpy(dst, src, bytes);
    double t0 = now_s();
    for (size_t i = 0; i < iters; ++i) {
      memcpy(dst, src, bytes);
      __asm__ __volatile__("" : : "r"(dst) : "memory"); /* keep every copy */
    }
    double us = (now_s() - t0) / (double)iters * 1e6;
    double gbs = (double)bytes / us / 1e3;
    if (json) {
      printf("{\"size\":%zu,\"iters\":%zu,\"time_us\":%.4f,\"memcpy_gbs\":%.6f}\n", bytes, iters,
             us, gbs);
    } else {
      printf(" %11zu %8zu %10.3f %8.2f\n", bytes, iters, us, gbs);
    }
  }
  free(src);
  free(dst);
  return 0;
}
