// soak.cpp: a long random workload through the public C API, every result
// checked, run by perf/soak.sh under quorum-run. All ranks draw the same
// sequence of operations from a shared seed: allreduce (every dtype and op),
// bcast from any root, allgather, reduce_scatter, barrier, non-blocking
// allreduce, and rounds of a synchronous partial (solo) allreduce, at random
// sizes from 1 element to 1 MiB. Inputs are small integers, so every
// expected value is exact in every dtype. Each rank samples its resident
// memory and open file descriptors; after the warm-up (the first tenth of the
// run, at least 30 s, while the library's buffers reach the largest size) memory
// may grow by at most --max-rss-growth (default 5 %) and the fd count not at all.
// Without --seed, rank 0 draws one and prints it (rerun with it to reproduce).
//
//   soak --seconds S [--seed N] [--max-rss-growth F]
// Exit status: 0 all good; 1 a wrong result; 2 an API error; 3 growth.
#include <dirent.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <random>
#include <string>
#include <vector>

#include "quorum/quorum.h"

namespace {

using Clock = std::chrono::steady_clock;

long rss_kib() {
  FILE *f = std::fopen("/proc/self/statm", "r");
  long pages = 0, resident = 0;
  if (f != nullptr) {
    if (std::fscanf(f, "%ld %ld", &pages, &resident) != 2) resident = 0;
    std::fclose(f);
  }
  return resident * (sysconf(_SC_PAGESIZE) / 1024);
}

int open_fds() {
  DIR *d = opendir("/proc/self/fd");
  int n = 0;
  if (d == nullptr) return -1;
  while (readdir(d) != nullptr) ++n;
  closedir(d);
  return n - 3;  // ".", ".." and the directory's own fd
}

size_t dtype_size(quorum_dtype_t t) {
  switch (t) {
    case QUORUM_FLOAT32:
    case QUORUM_INT32:
      return 4;
    case QUORUM_FLOAT64:
    case QUORUM_INT64:
      return 8;
    default:
      return 2;
  }
}

// Small integers: exact in every dtype used here (bf16/f16 are left out).
double input(int rank, size_t i, uint64_t op_index) {
  return double((rank * 7 + i * 3 + op_index) % 5) + 1.0;
}

void store(quorum_dtype_t t, void *buf, size_t i, double v) {
  switch (t) {
    case QUORUM_FLOAT32:
      static_cast<float *>(buf)[i] = float(v);
      break;
    case QUORUM_FLOAT64:
      static_cast<double *>(buf)[i] = v;
      break;
    case QUORUM_INT32:
      static_cast<int32_t *>(buf)[i] = int32_t(v);
      break;
    default:
      static_cast<int64_t *>(buf)[i] = int64_t(v);
      break;
  }
}

double load(quorum_dtype_t t, const void *buf, size_t i) {
  switch (t) {
    case QUORUM_FLOAT32:
      return static_cast<const float *>(buf)[i];
    case QUORUM_FLOAT64:
      return static_cast<const double *>(buf)[i];
    case QUORUM_INT32:
      return static_cast<const int32_t *>(buf)[i];
    default:
      return double(static_cast<const int64_t *>(buf)[i]);
  }
}

// The expected reduction over all ranks of element i.
double reduce_expected(quorum_op_t op, int size, size_t i, uint64_t k) {
  double acc = input(0, i, k);
  for (int r = 1; r < size; ++r) {
    const double v = input(r, i, k);
    if (op == QUORUM_SUM || op == QUORUM_AVG) acc += v;
    if (op == QUORUM_MIN) acc = v < acc ? v : acc;
    if (op == QUORUM_MAX) acc = v > acc ? v : acc;
    if (op == QUORUM_PROD) acc *= v;
  }
  return op == QUORUM_AVG ? acc / size : acc;
}

struct Soak {
  quorum_comm_t comm;
  int rank, size;
  uint64_t wrong = 0, errors = 0;

  bool ok(quorum_status_t s, const char *what, uint64_t k) {
    if (s == QUORUM_OK) return true;
    std::fprintf(stderr, "rank %d op %llu %s: %s: %s\n", rank, (unsigned long long)k, what,
                 quorum_strerror(s), quorum_last_error());
    ++errors;
    return false;
  }
  void expect(double got, double want, const char *what, uint64_t k, size_t i) {
    if (got == want || (want != 0 && std::abs(got - want) <= 1e-6 * std::abs(want))) return;
    if (wrong++ < 5) {
      std::fprintf(stderr, "rank %d op %llu %s: element %zu is %g, expected %g\n", rank,
                   (unsigned long long)k, what, i, got, want);
    }
  }
};

}  // namespace

int main(int argc, char **argv) {
  double seconds = 60, max_growth = 0.05;
  unsigned long long seed = 0;
  bool seed_given = false;
  for (int i = 1; i + 1 < argc; i += 2) {
    const std::string a = argv[i];
    if (a == "--seconds")
      seconds = std::atof(argv[i + 1]);
    else if (a == "--seed")
      seed = std::strtoull(argv[i + 1], nullptr, 0), seed_given = true;
    else if (a == "--max-rss-growth")
      max_growth = std::atof(argv[i + 1]);
    else {
      std::fprintf(stderr, "usage: soak --seconds S [--seed N] [--max-rss-growth F]\n");
      return 2;
    }
  }
  Soak s{};
  if (quorum_init(&s.comm) != QUORUM_OK) {
    std::fprintf(stderr, "quorum_init: %s\n", quorum_last_error());
    return 2;
  }
  s.rank = quorum_comm_rank(s.comm), s.size = quorum_comm_size(s.comm);
  if (!seed_given) {  // rank 0's draw, the same on every rank
    if (s.rank == 0) seed = (uint64_t(std::random_device{}()) << 32) | std::random_device{}();
    if (!s.ok(quorum_bcast(s.comm, &seed, sizeof seed, 0), "bcast of the seed", 0)) return 2;
  }
  if (s.rank == 0) std::printf("soak: seed %llu\n", seed);
  std::mt19937_64 rng(seed);  // the same draws on every rank
  const quorum_dtype_t dtypes[] = {QUORUM_FLOAT32, QUORUM_FLOAT64, QUORUM_INT32, QUORUM_INT64};
  const quorum_op_t ops[] = {QUORUM_SUM, QUORUM_MIN, QUORUM_MAX, QUORUM_PROD, QUORUM_AVG};
  quorum_partial_t partial = nullptr;
  const size_t partial_count = 4096;
  quorum_partial_opts_t popts;
  std::memset(&popts, 0, sizeof popts);
  popts.mode = QUORUM_PARTIAL_SOLO;
  popts.max_staleness = 0;  // every round synchronous: the sum of all posts
  popts.carry = 1;
  popts.seed = seed;
  if (!s.ok(quorum_partial_create(s.comm, partial_count, QUORUM_FLOAT32, QUORUM_SUM, &popts,
                                  &partial),
            "partial_create", 0))
    return 2;
  // The test's own buffers at their largest from the start (pages touched),
  // so that growth measured later is the library's.
  std::vector<unsigned char> a(8u << 20, 1), b(8u << 20, 1);
  const auto start = Clock::now();
  const auto elapsed = [&] { return std::chrono::duration<double>(Clock::now() - start).count(); };
  long rss_base = 0, rss_max = 0;
  int fds_base = -1, fds_max = 0;
  uint64_t k = 0;
  std::vector<long> trajectory;  // RSS at each tenth of the run, to tell warm-up from a leak
  // A tenth of the run, but at least 30 s (or half of a shorter run).
  const double warm_up_s = std::max(seconds * 0.1, std::min(30.0, seconds * 0.5));
  // Every rank decides to stop together: rank 0's clock, shared every 64 ops.
  for (int stop = 0; !stop; ++k) {
    const int kind = int(rng() % 8);
    const quorum_dtype_t t = dtypes[rng() % 4];
    quorum_op_t op = ops[rng() % 5];
    if (op == QUORUM_AVG && (t == QUORUM_INT32 || t == QUORUM_INT64)) op = QUORUM_SUM;
    const size_t es = dtype_size(t);
    const size_t count = 1 + size_t(rng() % ((1u << 20) / es));
    const int root = int(rng() % unsigned(s.size));
    if (kind <= 1 || kind == 5) {  // allreduce, out of place / in place / non-blocking
      const size_t n = op == QUORUM_PROD ? std::min<size_t>(count, 64) : count;
      a.assign(n * es, 0), b.assign(n * es, 0);
      for (size_t i = 0; i < n; ++i) store(t, a.data(), i, input(s.rank, i, k));
      quorum_status_t st;
      if (kind == 5) {
        quorum_request_t req = nullptr;
        st = quorum_iallreduce(s.comm, a.data(), b.data(), n, t, op, &req);
        if (st == QUORUM_OK) st = quorum_wait(req);
      } else {
        st = quorum_allreduce(s.comm, kind == 0 ? a.data() : QUORUM_IN_PLACE,
                              kind == 0 ? b.data() : a.data(), n, t, op);
      }
      if (!s.ok(st, "allreduce", k)) break;
      const void *out = kind == 1 ? a.data() : b.data();
      for (size_t i = 0; i < n; ++i)
        s.expect(load(t, out, i), reduce_expected(op, s.size, i, k), "allreduce", k, i);
    } else if (kind == 2) {  // bcast
      const size_t bytes = count * es;
      a.assign(bytes, 0);
      if (s.rank == root)
        for (size_t i = 0; i < bytes; ++i) a[i] = (unsigned char)(i * 13 + k);
      if (!s.ok(quorum_bcast(s.comm, a.data(), bytes, root), "bcast", k)) break;
      for (size_t i = 0; i < bytes; ++i) s.expect(a[i], (unsigned char)(i * 13 + k), "bcast", k, i);
    } else if (kind == 3) {  // allgather
      const size_t per = 1 + count * es / size_t(s.size);
      a.assign(per, (unsigned char)(s.rank + k)), b.assign(per * size_t(s.size), 0);
      if (!s.ok(quorum_allgather(s.comm, a.data(), b.data(), per), "allgather", k)) break;
      for (size_t i = 0; i < b.size(); ++i)
        s.expect(b[i], (unsigned char)(int(i / per) + k), "allgather", k, i);
    } else if (kind == 4) {  // reduce_scatter (sum)
      const size_t per = 1 + count / size_t(s.size);
      a.assign(per * size_t(s.size) * es, 0), b.assign(per * es, 0);
      for (size_t i = 0; i < per * size_t(s.size); ++i) store(t, a.data(), i, input(s.rank, i, k));
      if (!s.ok(quorum_reduce_scatter(s.comm, a.data(), b.data(), per, t, QUORUM_SUM),
                "reduce_scatter", k))
        break;
      for (size_t i = 0; i < per; ++i) {
        const size_t g = size_t(s.rank) * per + i;
        s.expect(load(t, b.data(), i), reduce_expected(QUORUM_SUM, s.size, g, k), "reduce_scatter",
                 k, i);
      }
    } else if (kind == 6) {
      if (!s.ok(quorum_barrier(s.comm), "barrier", k)) break;
    } else {  // a synchronous partial round: everyone's contribution, summed
      std::vector<float> mine(partial_count), result(partial_count);
      for (size_t i = 0; i < partial_count; ++i) mine[i] = float(input(s.rank, i, k));
      quorum_round_info_t info{};
      if (!s.ok(quorum_partial_post(partial, mine.data()), "partial_post", k) ||
          !s.ok(quorum_partial_wait(partial, result.data(), &info), "partial_wait", k))
        break;
      for (size_t i = 0; i < partial_count; ++i)
        s.expect(result[i], reduce_expected(QUORUM_SUM, s.size, i, k), "partial", k, i);
    }
    if (k % 64 == 63) {
      const long rss = rss_kib();
      const int fds = open_fds();
      if (size_t(elapsed() / seconds * 10) >= trajectory.size()) trajectory.push_back(rss);
      if (elapsed() < warm_up_s) {
        rss_base = rss, fds_base = fds;  // still warming up
      } else {
        rss_max = std::max(rss_max, rss), fds_max = std::max(fds_max, fds);
      }
      int32_t done = s.rank == 0 && elapsed() >= seconds ? 1 : 0;
      if (!s.ok(quorum_bcast(s.comm, &done, sizeof done, 0), "bcast (stop)", k)) break;
      stop = done;
    }
  }
  quorum_partial_destroy(partial);
  const double growth = rss_base > 0 ? double(rss_max - rss_base) / double(rss_base) : 0;
  std::printf(
      "rank %d: %llu ops in %.0f s, %llu wrong, %llu errors; RSS %ld -> %ld KiB (%+.1f %%), fds %d "
      "-> %d\n",
      s.rank, (unsigned long long)k, elapsed(), (unsigned long long)s.wrong,
      (unsigned long long)s.errors, rss_base, rss_max, 100 * growth, fds_base, fds_max);
  if (s.rank == 0) {
    std::string line;
    for (long r : trajectory) line += " " + std::to_string(r);
    std::printf("rank 0: RSS (KiB) at each tenth of the run:%s\n", line.c_str());
  }
  const quorum_status_t fin = quorum_finalize(s.comm);
  if (s.wrong) return 1;
  if (s.errors || fin != QUORUM_OK) return 2;
  if (growth > max_growth || fds_max > fds_base) return 3;
  return 0;
}
