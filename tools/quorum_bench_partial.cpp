// quorum_bench_partial.cpp: `quorum-bench partial`, the partial collectives
// (solo, majority and the k-of-P quorum allreduce for every k = 1..P) against
// a synchronous allreduce under an injected load imbalance, as in eager-SGD's
// evaluation (--model all: under each imbalance model in turn, so a user can
// pick k for the imbalance they have).
//
// Each step every rank "computes" for C ms plus its injected delay (a sleep),
// then posts its gradient and waits for the round's result (sync: a plain
// quorum_allreduce). The gradient and result buffers come from
// quorum_mem_alloc for every variant (sync's allreduce then copies nothing on
// one host; the partial rounds' own buffers are symmetric too), and the
// partial variants lend their gradient with quorum_partial_post_ref and take
// their result with quorum_partial_wait_ref (no copies; --copy-post:
// quorum_partial_post, --copy-result: quorum_partial_wait). Delays are
// pure functions of (seed, step, rank), so all ranks agree without talking:
//   paper        1 or 2 ranks per step, drawn with the step as shared seed, wait D ms
//   slow-rank    the last rank waits D ms every step
//   exponential  every rank waits Exp(mean D) ms every step
// Reported per variant: steps/s of the job (slowest rank's elapsed time) and
// mean over ranks, the ratio to sync, the fresh-contribution histogram, and
// whether the sum of everything posted came back (carry + flush), the
// activation latency of activated rounds (median and 90th percentile; the mean
// is in the JSON) and the staleness of carried contributions. Each
// variant's ideal speedup replays the same delays with free communication
// (model_job_ms), so of_ideal shows what the runtime itself costs.
#include <fmt/format.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdint>
#include <nlohmann/json.hpp>
#include <random>
#include <thread>
#include <vector>

#include "collectives/partial/activation.hpp"
#include "tools/quorum_bench_colls.hpp"
#include "tools/quorum_bench_partial.hpp"

namespace quorum_bench {

namespace {

using quorum::partial::splitmix64;

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

// The job time (ms) of `steps` steps under the model when communication is
// free: the bound each variant can reach. Rank r posts round k at
// post = end_r(k-1) + C + delay_r(k). sync: every rank leaves at the last
// post. Partial: round k activates at act(k) = max(act(k-1), activating
// post), where the activating post is the first one (solo), the initiator's
// (majority), the K-th earliest (quorum:K), or the last one (the synchronous
// rounds); rank r leaves at max(its post, act(k)).
double model_job_ms(const PartialOptions &o, int nranks, const char *variant) {
  const std::string v = variant;
  std::vector<double> end(static_cast<size_t>(nranks), 0.0), post(end.size());
  double act = 0;
  for (int k = 0; k < o.steps; ++k) {
    for (int r = 0; r < nranks; ++r) {
      post[static_cast<size_t>(r)] =
          end[static_cast<size_t>(r)] + o.compute_ms + injected_delay_ms(o, nranks, r, k);
    }
    double first = *std::min_element(post.begin(), post.end());
    double last = *std::max_element(post.begin(), post.end());
    double by;
    if (v == "sync" ||
        quorum::partial::scheduled_sync_round(static_cast<uint64_t>(k), o.max_staleness)) {
      by = last;
    } else if (v == "solo") {
      by = first;
    } else if (v.rfind("quorum:", 0) == 0) {
      std::vector<double> sorted = post;
      std::sort(sorted.begin(), sorted.end());
      const size_t q = std::stoul(v.substr(7));
      by = sorted[std::min(sorted.size(), std::max<size_t>(q, 1)) - 1];
    } else {
      by = post[static_cast<size_t>(
          quorum::partial::majority_initiator(o.seed, static_cast<uint64_t>(k), nranks))];
    }
    act = std::max(act, by);
    for (int r = 0; r < nranks; ++r) {
      end[static_cast<size_t>(r)] = std::max(post[static_cast<size_t>(r)], act);
    }
  }
  return *std::max_element(end.begin(), end.end());
}

// A variant's ideal speedup over sync: the model's job times, communication free.
double ideal_speedup(const PartialOptions &o, int nranks, const char *variant) {
  return model_job_ms(o, nranks, "sync") / model_job_ms(o, nranks, variant);
}

struct VariantResult {
  std::string name;
  double job_elapsed_s = 0;                // slowest rank
  double mean_elapsed_s = 0;               // average over ranks
  std::vector<long long> fresh_histogram;  // index: fresh contributions in a round
  double mean_fresh = 0;
  bool conserved = true;  // sum of results (+ flush) == sum of posts
  // Partial variants: activation latency (a round's first join, its
  // activation, to its last; one host's monotonic clock; activated rounds
  // only): median, 90th percentile and mean; and the mean staleness of
  // carried contributions (rounds late), over the timed steps.
  double activation_us = 0;
  double activation_p90_us = 0;
  double activation_mean_us = 0;
  long long carried = 0;
  double mean_staleness = 0;
};

// A rank's view of one round, gathered to compute the cross-rank figures.
struct RoundStamp {
  unsigned long long post_ns = 0;
  unsigned long long join_ns = 0;
  long long carried = 0;
  unsigned long long staleness = 0;
};

// Activation latency of every activated round, sorted: from the activation
// (the earliest join: the activating rank joins at its post) to the latest
// join, when the activation reached the last rank; stamps[r * steps + k].
// In majority the wait for the initiator's post is not in it. Synchronous
// rounds (every max_staleness+1) are left out: nothing activates them, each
// rank joins when it arrives there itself.
std::vector<double> activation_latencies_us(const std::vector<RoundStamp> &stamps, int nranks,
                                            int steps, unsigned max_staleness) {
  std::vector<double> out;
  for (int k = 0; k < steps; ++k) {
    if (quorum::partial::scheduled_sync_round(static_cast<uint64_t>(k), max_staleness)) continue;
    unsigned long long first_join = ~0ull, last_join = 0;
    for (int r = 0; r < nranks; ++r) {
      const RoundStamp &st = stamps[static_cast<size_t>(r) * steps + k];
      if (st.join_ns == 0) continue;
      first_join = std::min(first_join, st.join_ns);
      last_join = std::max(last_join, st.join_ns);
    }
    if (first_join == ~0ull) continue;
    out.push_back(static_cast<double>(last_join - first_join) / 1e3);
  }
  std::sort(out.begin(), out.end());
  return out;
}

// The q-quantile (0..1) of sorted values (0 when empty).
double quantile(const std::vector<double> &sorted, double q) {
  if (sorted.empty()) return 0;
  return sorted[std::min(sorted.size() - 1, static_cast<size_t>(q * sorted.size()))];
}

// count floats from quorum_mem_alloc, freed on scope exit.
struct SharedFloats {
  SharedFloats(quorum_comm_t c, size_t count) : comm(c) {
    void *p = nullptr;
    quorum_status_t s = quorum_mem_alloc(comm, count * sizeof(float), &p);
    if (s != QUORUM_OK) die(comm, "quorum_mem_alloc", s);
    data = static_cast<float *>(p);
  }
  ~SharedFloats() { quorum_mem_free(comm, data); }
  SharedFloats(const SharedFloats &) = delete;
  SharedFloats &operator=(const SharedFloats &) = delete;
  quorum_comm_t comm;
  float *data = nullptr;
};

void sleep_ms(double ms) {
  if (ms > 0) std::this_thread::sleep_for(std::chrono::duration<double, std::milli>(ms));
}

VariantResult run_variant(quorum_comm_t comm, const PartialOptions &o, const std::string &name,
                          bool sync, quorum_partial_mode_t mode, unsigned k = 0) {
  int rank = quorum_comm_rank(comm), n = quorum_comm_size(comm);
  size_t count = std::max<size_t>(1, o.bytes / sizeof(float));
  // From quorum_mem_alloc (collective), so that sync's allreduce is at its
  // best too: zero-copy on one host, like the partial rounds' own buffers.
  SharedFloats grad_buf(comm, count), result_buf(comm, count);
  float *grad = grad_buf.data, *result = result_buf.data;
  std::fill(grad, grad + count, 1.0f);
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
    opts.activation_delay_us = o.activation_delay_us;
    opts.k = k;
    quorum_status_t s =
        quorum_partial_create(comm, count, QUORUM_FLOAT32, QUORUM_SUM, &opts, &partial);
    if (s != QUORUM_OK) die(comm, "quorum_partial_create", s);
  }
  quorum_status_t s = quorum_barrier(comm);
  if (s != QUORUM_OK) die(comm, "barrier", s);

  double received = 0;  // element 0 of every result: counts contributions
  std::vector<RoundStamp> stamps(static_cast<size_t>(o.steps));
  auto t0 = std::chrono::steady_clock::now();
  for (int step = 0; step < o.steps; ++step) {
    sleep_ms(o.compute_ms + injected_delay_ms(o, n, rank, step));
    if (sync) {
      s = quorum_allreduce(comm, grad, result, count, QUORUM_FLOAT32, QUORUM_SUM);
      if (s != QUORUM_OK) die(comm, "quorum_allreduce", s);
      ++v.fresh_histogram[static_cast<size_t>(n)];
    } else {
      // The gradient stays unchanged until the wait: it can be lent.
      s = o.copy_post ? quorum_partial_post(partial, grad) : quorum_partial_post_ref(partial, grad);
      if (s != QUORUM_OK) die(comm, "quorum_partial_post", s);
      quorum_round_info_t info{};
      if (o.copy_result) {
        s = quorum_partial_wait(partial, result, &info);
        if (s != QUORUM_OK) die(comm, "quorum_partial_wait", s);
      } else {
        // The result stays inside the object (as sync's stays in place).
        const void *lent = nullptr;
        s = quorum_partial_wait_ref(partial, &lent, &info);
        if (s != QUORUM_OK) die(comm, "quorum_partial_wait_ref", s);
        result[0] = static_cast<const float *>(lent)[0];
      }
      if (info.fresh >= 0 && info.fresh <= n) ++v.fresh_histogram[static_cast<size_t>(info.fresh)];
      quorum_round_stats_t rs{};
      s = quorum_partial_last_round_stats(partial, &rs);
      if (s != QUORUM_OK) die(comm, "quorum_partial_last_round_stats", s);
      stamps[static_cast<size_t>(step)] = {rs.post_ns, rs.join_ns, rs.own_carried,
                                           rs.own_staleness};
    }
    received += result[0];
  }
  double elapsed = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  if (!sync) {
    s = quorum_partial_flush(partial, result);
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
  if (!sync) {
    std::vector<RoundStamp> all_stamps(static_cast<size_t>(n) * o.steps);
    s = quorum_allgather(comm, stamps.data(), all_stamps.data(),
                         stamps.size() * sizeof(RoundStamp));
    if (s != QUORUM_OK) die(comm, "allgather (round stamps)", s);
    const std::vector<double> lat =
        activation_latencies_us(all_stamps, n, o.steps, o.max_staleness);
    v.activation_us = quantile(lat, 0.5);
    v.activation_p90_us = quantile(lat, 0.9);
    for (double l : lat) v.activation_mean_us += l / static_cast<double>(lat.size());
    unsigned long long staleness = 0;
    for (const RoundStamp &st : all_stamps) {
      v.carried += st.carried;
      staleness += st.staleness;
    }
    v.mean_staleness = v.carried ? static_cast<double>(staleness) / v.carried : 0;
  }
  long long rounds = 0, fresh_sum = 0;
  for (size_t f = 0; f < v.fresh_histogram.size(); ++f) {
    rounds += v.fresh_histogram[f];
    fresh_sum += static_cast<long long>(f) * v.fresh_histogram[f];
  }
  v.mean_fresh = rounds ? static_cast<double>(fresh_sum) / static_cast<double>(rounds) : 0;
  return v;
}

}  // namespace

namespace {

// Every variant under one imbalance model (o.model); rank 0 prints.
int run_model(quorum_comm_t comm, const PartialOptions &o) {
  int rank = quorum_comm_rank(comm), n = quorum_comm_size(comm);
  std::vector<VariantResult> results;
  results.push_back(run_variant(comm, o, "sync", true, QUORUM_PARTIAL_SOLO));
  results.push_back(run_variant(comm, o, "solo", false, QUORUM_PARTIAL_SOLO));
  results.push_back(run_variant(comm, o, "majority", false, QUORUM_PARTIAL_MAJORITY));
  for (int k = 1; k <= n; ++k) {
    results.push_back(run_variant(comm, o, fmt::format("quorum:{}", k), false,
                                  QUORUM_PARTIAL_QUORUM, static_cast<unsigned>(k)));
  }
  bool all_conserved = true;
  for (const auto &v : results) all_conserved = all_conserved && v.conserved;
  if (rank != 0) return all_conserved ? 0 : 3;

  double sync_rate = o.steps / results[0].job_elapsed_s;
  if (!o.json) {
    fmt::print("# quorum-bench partial: {} ranks, transport {}, {} steps, {} B float32 sum\n", n,
               quorum_comm_transport(comm), o.steps, std::max<size_t>(4, o.bytes / 4 * 4));
    fmt::print(
        "#   compute C = {} ms, delay D = {} ms, model {}, max staleness {}, seed {}, activation "
        "delay {} us, posts {}, results {}\n",
        o.compute_ms, o.delay_ms, o.model, o.max_staleness, o.seed, o.activation_delay_us,
        o.copy_post ? "copied (quorum_partial_post)" : "lent (quorum_partial_post_ref)",
        o.copy_result ? "copied (quorum_partial_wait)" : "lent (quorum_partial_wait_ref)");
    std::string ideals;
    for (size_t i = 1; i < results.size(); ++i) {
      ideals += fmt::format("{}{} {:.3f}", i == 1 ? "" : ", ", results[i].name,
                            ideal_speedup(o, n, results[i].name.c_str()));
    }
    fmt::print("#   ideal speedup over sync (the model with free communication): {}\n#\n", ideals);
    fmt::print("#{:>9} {:>10} {:>10} {:>11} {:>9} {:>9} {:>7} {:>10} {:>8} {:>7} {:>8} {:>8}  {}\n",
               "variant", "steps/s", "ms/step", "mean_rank", "vs_sync", "of_ideal", "fresh",
               "conserved", "carried", "stale", "act_us", "act_p90", "fresh histogram (0..P)");
  }
  for (const auto &v : results) {
    double rate = o.steps / v.job_elapsed_s;
    double mean_rate = o.steps / v.mean_elapsed_s;
    if (o.json) {
      nlohmann::json j;
      j["bench"] = "partial";
      j["variant"] = v.name;
      j["k"] = v.name.rfind("quorum:", 0) == 0 ? std::stoi(v.name.substr(7)) : 0;
      j["nranks"] = n;
      j["transport"] = quorum_comm_transport(comm);
      j["steps"] = o.steps;
      j["bytes"] = o.bytes;
      j["compute_ms"] = o.compute_ms;
      j["delay_ms"] = o.delay_ms;
      j["model"] = o.model;
      j["max_staleness"] = o.max_staleness;
      j["copy_result"] = o.copy_result;
      j["copy_post"] = o.copy_post;
      j["activation_delay_us"] = o.activation_delay_us;
      j["steps_per_s"] = rate;
      j["steps_per_s_mean_rank"] = mean_rate;
      j["ms_per_step"] = 1e3 * v.job_elapsed_s / o.steps;
      j["ratio_to_sync"] = rate / sync_rate;
      j["ideal_speedup"] = ideal_speedup(o, n, v.name.c_str());
      j["mean_fresh"] = v.mean_fresh;
      j["fresh_histogram"] = v.fresh_histogram;
      j["conserved"] = v.conserved;
      j["carried"] = v.carried;
      j["mean_staleness_rounds"] = v.mean_staleness;
      j["activation_latency_us"] = v.activation_us;  // median
      j["activation_latency_p90_us"] = v.activation_p90_us;
      j["activation_latency_mean_us"] = v.activation_mean_us;
      fmt::print("{}\n", j.dump());
    } else {
      std::string hist;
      for (long long c : v.fresh_histogram) hist += (hist.empty() ? "" : " ") + std::to_string(c);
      double ideal = ideal_speedup(o, n, v.name.c_str());
      fmt::print(
          " {:>9} {:>10.2f} {:>10.2f} {:>11.2f} {:>9.3f} {:>8.0f}% {:>7.2f} {:>10} {:>8} {:>7.2f} "
          "{:>8.0f} {:>8.0f}  [{}]\n",
          v.name, rate, 1e3 * v.job_elapsed_s / o.steps, mean_rate, rate / sync_rate,
          100.0 * (rate / sync_rate) / ideal, v.mean_fresh, v.conserved ? "yes" : "NO", v.carried,
          v.mean_staleness, v.activation_us, v.activation_p90_us, hist);
    }
  }
  std::fflush(stdout);
  if (!all_conserved) {
    fmt::print(stderr, "quorum-bench: partial: the sum of results differs from the sum of posts\n");
    return 3;
  }
  return 0;
}

}  // namespace

int run_partial_bench(quorum_comm_t comm, const PartialOptions &o) {
  if (o.model != "all") return run_model(comm, o);
  int worst = 0;
  for (const char *model : {"paper", "slow-rank", "exponential"}) {
    PartialOptions each = o;
    each.model = model;
    worst = std::max(worst, run_model(comm, each));
    if (quorum_comm_rank(comm) == 0 && !o.json) fmt::print("\n");
  }
  return worst;
}

}  // namespace quorum_bench
