// quorum_bench_partial.cpp: `quorum-bench partial`, the partial collectives
// (solo and majority allreduce) against a synchronous allreduce under an
// injected load imbalance, as in eager-SGD's evaluation.
//
// Each step every rank "computes" for C ms plus its injected delay (a sleep),
// then posts its gradient and waits for the round's result (sync: a plain
// quorum_allreduce). Delays are pure functions of (seed, step, rank), so all
// ranks agree without talking:
//   paper        1 or 2 ranks per step, drawn with the step as shared seed, wait D ms
//   slow-rank    the last rank waits D ms every step
//   exponential  every rank waits Exp(mean D) ms every step
// Reported per variant: steps/s of the job (slowest rank's elapsed time) and
// mean over ranks, the ratio to sync, the fresh-contribution histogram, and
// whether the sum of everything posted came back (carry + flush). The ideal
// speedup assumes the slowest rank on average sets the pace:
// (C + E[max_r delay_r]) / (C + max_r E[delay_r]).
#include <fmt/format.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdint>
#include <nlohmann/json.hpp>
#include <random>
#include <thread>
#include <vector>

#include "tools/quorum_bench_colls.hpp"
#include "tools/quorum_bench_partial.hpp"

namespace quorum_bench {

namespace {

uint64_t splitmix64(uint64_t x) {
  x += 0x9e3779b97f4a7c15ull;
  x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ull;
  x = (x ^ (x >> 27)) * 0x94d049bb133111ebull;
  return x ^ (x >> 31);
}

// The injected delay (ms) of `rank` at `step`.
double injected_delay_ms(const PartialOptions &o, int nranks, int rank, int step) {
  if (o.delay_ms <= 0) return 0;
  if (o.model == "slow-rank") return rank == nranks - 1 ? o.delay_ms : 0;
  if (o.model == "exponential") {
    std::mt19937_64 rng(splitmix64(
        o.seed ^ splitmix64(static_cast<uint64_t>(step) * 1000003u + static_cast<uint64_t>(rank))));
    std::exponential_distribution<double> exp(1.0 / o.delay_ms);
    return exp(rng);
  }
  // paper: 1 or 2 distinct ranks per step, shared draw.
  std::mt19937_64 rng(splitmix64(o.seed ^ splitmix64(static_cast<uint64_t>(step))));
  int k = std::min(nranks, 1 + static_cast<int>(rng() % 2));
  std::vector<int> ranks(static_cast<size_t>(nranks));
  for (int r = 0; r < nranks; ++r) ranks[static_cast<size_t>(r)] = r;
  for (int i = 0; i < k; ++i) {  // partial Fisher-Yates
    size_t j = static_cast<size_t>(i) + rng() % static_cast<size_t>(nranks - i);
    std::swap(ranks[static_cast<size_t>(i)], ranks[j]);
    if (ranks[static_cast<size_t>(i)] == rank) return o.delay_ms;
  }
  return 0;
}

// (C + E[max delay]) / (C + max_r E[delay_r]) for the model.
double ideal_speedup(const PartialOptions &o, int nranks) {
  double c = o.compute_ms, d = o.delay_ms, n = nranks;
  if (d <= 0) return 1.0;
  if (o.model == "slow-rank") return 1.0;  // the slow rank computes every step itself
  if (o.model == "exponential") {
    double harmonic = 0;
    for (int i = 1; i <= nranks; ++i) harmonic += 1.0 / i;
    return (c + d * harmonic) / (c + d);
  }
  double mean_k = nranks >= 2 ? 1.5 : 1.0;
  return (c + d) / (c + d * mean_k / n);
}

struct VariantResult {
  std::string name;
  double job_elapsed_s = 0;                // slowest rank
  double mean_elapsed_s = 0;               // average over ranks
  std::vector<long long> fresh_histogram;  // index: fresh contributions in a round
  double mean_fresh = 0;
  bool conserved = true;  // sum of results (+ flush) == sum of posts
};

void sleep_ms(double ms) {
  if (ms > 0) std::this_thread::sleep_for(std::chrono::duration<double, std::milli>(ms));
}

VariantResult run_variant(quorum_comm_t comm, const PartialOptions &o, const char *name, bool sync,
                          quorum_partial_mode_t mode) {
  int rank = quorum_comm_rank(comm), n = quorum_comm_size(comm);
  size_t count = std::max<size_t>(1, o.bytes / sizeof(float));
  std::vector<float> grad(count, 1.0f), result(count, 0.0f);
  VariantResult v;
  v.name = name;
  v.fresh_histogram.assign(static_cast<size_t>(n) + 1, 0);

  quorum_partial_t partial = nullptr;
  if (!sync) {
    quorum_partial_opts_t opts{};
    opts.mode = mode;
    opts.max_staleness = o.max_staleness;
    opts.carry = 1;
    opts.seed = o.seed;
    quorum_status_t s =
        quorum_partial_create(comm, count, QUORUM_FLOAT32, QUORUM_SUM, &opts, &partial);
    if (s != QUORUM_OK) die(comm, "quorum_partial_create", s);
  }
  quorum_status_t s = quorum_barrier(comm);
  if (s != QUORUM_OK) die(comm, "barrier", s);

  double received = 0;  // element 0 of every result: counts contributions
  auto t0 = std::chrono::steady_clock::now();
  for (int step = 0; step < o.steps; ++step) {
    sleep_ms(o.compute_ms + injected_delay_ms(o, n, rank, step));
    if (sync) {
      s = quorum_allreduce(comm, grad.data(), result.data(), count, QUORUM_FLOAT32, QUORUM_SUM);
      if (s != QUORUM_OK) die(comm, "quorum_allreduce", s);
      ++v.fresh_histogram[static_cast<size_t>(n)];
    } else {
      s = quorum_partial_post(partial, grad.data());
      if (s != QUORUM_OK) die(comm, "quorum_partial_post", s);
      quorum_round_info_t info{};
      s = quorum_partial_wait(partial, result.data(), &info);
      if (s != QUORUM_OK) die(comm, "quorum_partial_wait", s);
      if (info.fresh >= 0 && info.fresh <= n) ++v.fresh_histogram[static_cast<size_t>(info.fresh)];
    }
    received += result[0];
  }
  double elapsed = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  if (!sync) {
    s = quorum_partial_flush(partial, result.data());
    if (s != QUORUM_OK) die(comm, "quorum_partial_flush", s);
    received += result[0];
    s = quorum_partial_destroy(partial);
    if (s != QUORUM_OK) die(comm, "quorum_partial_destroy", s);
  }
  double posted = static_cast<double>(n) * o.steps;

  struct Record {
    double elapsed;
    double received;
  } mine{elapsed, received};
  std::vector<Record> all(static_cast<size_t>(n));
  s = quorum_allgather(comm, &mine, all.data(), sizeof mine);
  if (s != QUORUM_OK) die(comm, "allgather (results)", s);
  double sum = 0;
  for (const auto &r : all) {
    v.job_elapsed_s = std::max(v.job_elapsed_s, r.elapsed);
    sum += r.elapsed;
    if (r.received != posted) v.conserved = false;
  }
  v.mean_elapsed_s = sum / n;
  long long rounds = 0, fresh_sum = 0;
  for (size_t f = 0; f < v.fresh_histogram.size(); ++f) {
    rounds += v.fresh_histogram[f];
    fresh_sum += static_cast<long long>(f) * v.fresh_histogram[f];
  }
  v.mean_fresh = rounds ? static_cast<double>(fresh_sum) / static_cast<double>(rounds) : 0;
  return v;
}

}  // namespace

int run_partial_bench(quorum_comm_t comm, const PartialOptions &o) {
  int rank = quorum_comm_rank(comm), n = quorum_comm_size(comm);
  std::vector<VariantResult> results;
  results.push_back(run_variant(comm, o, "sync", true, QUORUM_PARTIAL_SOLO));
  results.push_back(run_variant(comm, o, "solo", false, QUORUM_PARTIAL_SOLO));
  results.push_back(run_variant(comm, o, "majority", false, QUORUM_PARTIAL_MAJORITY));
  bool all_conserved = true;
  for (const auto &v : results) all_conserved = all_conserved && v.conserved;
  if (rank != 0) return all_conserved ? 0 : 3;

  double ideal = ideal_speedup(o, n);
  double sync_rate = o.steps / results[0].job_elapsed_s;
  if (!o.json) {
    fmt::print("# quorum-bench partial: {} ranks, transport {}, {} steps, {} B float32 sum\n", n,
               quorum_comm_transport(comm), o.steps, std::max<size_t>(4, o.bytes / 4 * 4));
    fmt::print("#   compute C = {} ms, delay D = {} ms, model {}, max staleness {}, seed {}\n",
               o.compute_ms, o.delay_ms, o.model, o.max_staleness, o.seed);
    fmt::print("#   ideal speedup over sync: {:.3f}\n#\n", ideal);
    fmt::print("#{:>9} {:>10} {:>10} {:>11} {:>9} {:>10} {:>10}  {}\n", "variant", "steps/s",
               "ms/step", "mean_rank", "vs_sync", "fresh", "conserved", "fresh histogram (0..P)");
  }
  for (const auto &v : results) {
    double rate = o.steps / v.job_elapsed_s;
    double mean_rate = o.steps / v.mean_elapsed_s;
    if (o.json) {
      nlohmann::json j;
      j["bench"] = "partial";
      j["variant"] = v.name;
      j["nranks"] = n;
      j["transport"] = quorum_comm_transport(comm);
      j["steps"] = o.steps;
      j["bytes"] = o.bytes;
      j["compute_ms"] = o.compute_ms;
      j["delay_ms"] = o.delay_ms;
      j["model"] = o.model;
      j["max_staleness"] = o.max_staleness;
      j["steps_per_s"] = rate;
      j["steps_per_s_mean_rank"] = mean_rate;
      j["ms_per_step"] = 1e3 * v.job_elapsed_s / o.steps;
      j["ratio_to_sync"] = rate / sync_rate;
      j["ideal_speedup"] = ideal;
      j["mean_fresh"] = v.mean_fresh;
      j["fresh_histogram"] = v.fresh_histogram;
      j["conserved"] = v.conserved;
      fmt::print("{}\n", j.dump());
    } else {
      std::string hist;
      for (long long c : v.fresh_histogram) hist += (hist.empty() ? "" : " ") + std::to_string(c);
      fmt::print(" {:>9} {:>10.2f} {:>10.2f} {:>11.2f} {:>9.3f} {:>10.2f} {:>10}  [{}]\n", v.name,
                 rate, 1e3 * v.job_elapsed_s / o.steps, mean_rate, rate / sync_rate, v.mean_fresh,
                 v.conserved ? "yes" : "NO", hist);
    }
  }
  std::fflush(stdout);
  if (!all_conserved) {
    fmt::print(stderr, "quorum-bench: partial: the sum of results differs from the sum of posts\n");
    return 3;
  }
  return 0;
}

}  // namespace quorum_bench
