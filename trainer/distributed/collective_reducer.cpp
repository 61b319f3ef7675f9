// collective_reducer.cpp: sync, solo, majority and quorum:K gradient reduction.
#include "trainer/distributed/collective_reducer.hpp"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdlib>
#include <thread>
#include <utility>

#include "runtime/clock.hpp"

namespace quorum::trainer {

namespace {
double seconds_since(uint64_t start_ns) {
  return static_cast<double>(now_ns() - start_ns) * 1e-9;
}

Status api_error(quorum_status_t s, const char *what) {
  // The library already logged the cause; keep its detail as our last error.
  return fail(s, "reducer", "{}: {}", what, quorum_last_error());
}
}  // namespace

float partial_round_scale(PartialScale scale, int world, double n) {
  const double p = world, k = std::max(1.0, n);
  switch (scale) {
    case PartialScale::Sqrt:
      return static_cast<float>(1.0 / std::sqrt(p * k));
    case PartialScale::Count:
      return static_cast<float>(1.0 / k);
    case PartialScale::World:
      break;
  }
  return static_cast<float>(1.0 / p);
}

Status CollectiveReducer::create(quorum_comm_t comm, const ReducerOptions &options,
                                 Backend *backend, std::unique_ptr<CollectiveReducer> *out) {
  if (comm == nullptr) return fail(QUORUM_ERR_INVALID_ARG, "reducer", "no communicator");
  const int world = quorum_comm_size(comm);
  unsigned quorum_k = 0;
  if (options.mode.rfind("quorum:", 0) == 0) {
    const std::string k = options.mode.substr(7);
    char *end = nullptr;
    const long v = std::strtol(k.c_str(), &end, 10);
    if (k.empty() || *end != '\0' || v < 1 || v > world) {
      return fail(QUORUM_ERR_INVALID_ARG, "reducer",
                  "--reduce {} on {} rank{}: K is how many ranks start a round, 1 to {}",
                  options.mode, world, world == 1 ? "" : "s", world);
    }
    quorum_k = static_cast<unsigned>(v);
  } else if (options.mode != "sync" && options.mode != "solo" && options.mode != "majority") {
    return fail(QUORUM_ERR_INVALID_ARG, "reducer",
                "--reduce '{}': expected sync, solo, majority or quorum:K", options.mode);
  }
  if (!(options.carry_weight > 0 && options.carry_weight <= 1))
    return fail(QUORUM_ERR_INVALID_ARG, "reducer", "--carry-weight {}: expected a weight in (0, 1]",
                options.carry_weight);
  if (!options.carry && options.carry_weight != 1)
    return fail(QUORUM_ERR_INVALID_ARG, "reducer",
                "--carry-weight {} with --drop-late: late gradients are dropped, not carried",
                options.carry_weight);
  if (!std::isfinite(options.sync_epochs) || options.sync_epochs < 0)
    return fail(QUORUM_ERR_INVALID_ARG, "reducer",
                "--sync-epochs {}: expected a finite number of epochs, 0 or more",
                options.sync_epochs);
  std::unique_ptr<CollectiveReducer> r(new CollectiveReducer());
  r->comm_ = comm;
  r->options_ = options;
  r->backend_ = backend;
  r->rank_ = quorum_comm_rank(comm);
  r->size_ = world;
  r->quorum_k_ = quorum_k;
  QUORUM_CHECK(options.imbalance.check_world(r->size_));
  r->fresh_histogram_.assign(static_cast<size_t>(r->size_) + 1, 0);
  if (options.bucket_bytes > 0)
    r->buckets_ = std::make_unique<GradientBuckets>(comm, options.bucket_bytes);
  *out = std::move(r);
  return kOk;
}

CollectiveReducer::~CollectiveReducer() {
  if (partial_) quorum_partial_destroy(partial_);
}

void CollectiveReducer::set_steps_per_epoch(int64_t steps) {
  sync_steps_ = static_cast<int64_t>(std::llround(options_.sync_epochs * double(steps)));
}

Status CollectiveReducer::broadcast_parameters(float *params, size_t count, MemoryKind) {
  quorum_status_t s = quorum_bcast(comm_, params, count * sizeof(float), 0);
  return s == QUORUM_OK ? kOk : api_error(s, "broadcast of the initial parameters");
}

Status CollectiveReducer::ensure_partial(size_t count) {
  if (partial_) {
    if (count != partial_count_) {
      return fail(QUORUM_ERR_INVALID_ARG, "reducer", "gradient size changed from {} to {}",
                  partial_count_, count);
    }
    return kOk;
  }
  quorum_partial_opts_t opts{};
  opts.mode = quorum_k_ > 0             ? QUORUM_PARTIAL_QUORUM
              : options_.mode == "solo" ? QUORUM_PARTIAL_SOLO
                                        : QUORUM_PARTIAL_MAJORITY;
  opts.k = quorum_k_;
  opts.max_staleness = options_.max_staleness;
  opts.carry = options_.carry ? 1 : 0;
  opts.carry_weight = options_.carry_weight;
  opts.seed = options_.seed;
  opts.activation_delay_us = options_.activation_delay_us;
  quorum_status_t s =
      quorum_partial_create(comm_, count, QUORUM_FLOAT32, QUORUM_SUM, &opts, &partial_);
  if (s != QUORUM_OK) return api_error(s, "creating the partial allreduce");
  partial_count_ = count;
  return kOk;
}

double CollectiveReducer::inject_imbalance(int64_t step) {
  const double delay = options_.imbalance.delay_ms(rank_, size_, step);
  if (delay <= 0) return 0.0;
  const uint64_t t = now_ns();
  std::this_thread::sleep_for(std::chrono::microseconds(static_cast<int64_t>(delay * 1000)));
  return seconds_since(t);
}

Status CollectiveReducer::reduce_gradients(float *grads, size_t count, MemoryKind memory,
                                           int64_t step, ReduceInfo *info) {
  ReduceInfo local;
  uint64_t start = now_ns();
  if (synchronous_step(step)) {
    if (buckets_ && held_step_ == step) {
      // Drawn to be slow at this step: its buckets go out now, after the delay.
      for (auto [offset, n] : held_) buckets_->ready(grads, offset, n, step);
    }
    held_.clear(), held_step_ = -1;
    if (buckets_ && buckets_->started(grads, step)) {
      QUORUM_CHECK(buckets_->finish(count));
    } else {
      quorum_status_t s =
          quorum_allreduce(comm_, QUORUM_IN_PLACE, grads, count, QUORUM_FLOAT32, QUORUM_AVG);
      if (s != QUORUM_OK) return api_error(s, "gradient allreduce");
    }
    local.contributors = size_;
  } else {
    QUORUM_CHECK(ensure_partial(count));
    float *buf = round_buffer(grads, count, memory);
    if (buf != grads) backend_->copy_to_host(buf, grads, count * sizeof(float));
    // Lent: buf is not touched again before the wait returns.
    quorum_status_t s = quorum_partial_post_ref(partial_, buf);
    if (s != QUORUM_OK) return api_error(s, "posting the gradient");
    QUORUM_CHECK(receive_round(grads, buf, count, memory, &local));
  }
  local.wait_seconds = seconds_since(start);
  if (info) *info = local;
  return kOk;
}

void CollectiveReducer::gradient_ready(float *grads, size_t offset, size_t count, int64_t step) {
  if (!buckets_ || !synchronous_step(step)) return;
  // A device's backward may still be running: its gradient is reduced after.
  if (backend_ && backend_->memory_kind() != MemoryKind::Host) return;
  if (options_.imbalance.delay_ms(rank_, size_, step) > 0) {
    // Drawn to be slow at this step: hold its buckets until after the delay
    // (reduce_gradients), as a slow compute would make them late.
    if (held_step_ != step) held_.clear(), held_step_ = step;
    held_.emplace_back(offset, count);
    return;
  }
  buckets_->ready(grads, offset, count, step);
}

float *CollectiveReducer::round_buffer(float *grads, size_t count, MemoryKind memory) {
  if (memory != MemoryKind::Cuda) return grads;
  host_.resize(count);
  return host_.data();
}

Status CollectiveReducer::receive_round(float *grads, float *buf, size_t count, MemoryKind memory,
                                        ReduceInfo *info) {
  quorum_round_info_t round{};
  // The round's sum stays in the object; one pass scales it into buf.
  const void *sum = nullptr;
  quorum_status_t s = quorum_partial_wait_ref(partial_, &sum, &round);
  if (s != QUORUM_OK) return api_error(s, "waiting for the partial allreduce");
  quorum_round_stats_t stats{};
  s = quorum_partial_last_round_stats(partial_, &stats);
  if (s != QUORUM_OK) return api_error(s, "reading the round's stats");
  // Fresh and carried counts are the same on every rank: so is the scale. A
  // carried gradient counts as carry_weight of one.
  const double gradients = round.fresh + options_.carry_weight * double(stats.carried);
  const float scale = partial_round_scale(options_.scale, size_, gradients);
  const float *in = static_cast<const float *>(sum);
  for (size_t i = 0; i < count; ++i) buf[i] = in[i] * scale;
  if (memory == MemoryKind::Cuda) backend_->copy_to_device(grads, buf, count * sizeof(float));
  info->contributors = round.fresh;
  info->carried = stats.own_carried;
  info->staleness = stats.own_staleness;
  if (round.fresh >= 0 && round.fresh <= size_) ++fresh_histogram_[round.fresh];
  return kOk;
}

int64_t CollectiveReducer::steps_behind() {
  if (!options_.catch_up || !partial_) return 0;
  unsigned long long rounds = 0;
  // Only fails on a released object, which the next wait reports.
  if (quorum_partial_rounds_behind(partial_, &rounds) != QUORUM_OK) return 0;
  return static_cast<int64_t>(rounds);
}

Status CollectiveReducer::skip_step(float *grads, size_t count, MemoryKind memory, int64_t,
                                    ReduceInfo *info) {
  if (!partial_) return fail(QUORUM_ERR_INTERNAL, "reducer", "skip_step before any partial round");
  ReduceInfo local;
  const uint64_t start = now_ns();
  QUORUM_CHECK(receive_round(grads, round_buffer(grads, count, memory), count, memory, &local));
  local.wait_seconds = seconds_since(start);
  if (info) *info = local;
  return kOk;
}

Status CollectiveReducer::finish(double *drained_l1) {
  *drained_l1 = 0;
  if (!partial_) return kOk;
  std::vector<float> rest(partial_count_);
  quorum_status_t s = quorum_partial_flush(partial_, rest.data());
  if (s != QUORUM_OK) return api_error(s, "flushing the partial allreduce");
  for (float v : rest) *drained_l1 += std::fabs(v);
  s = quorum_partial_destroy(partial_);
  partial_ = nullptr;
  return s == QUORUM_OK ? kOk : api_error(s, "destroying the partial allreduce");
}

void CollectiveReducer::abandon() {
  if (partial_) quorum_partial_free(partial_);
  partial_ = nullptr;
  // Buckets still in flight end (or fail) within the timeout; their handles
  // must not outlive the communicator, which the caller finalizes next.
  buckets_.reset();
}

Status CollectiveReducer::check_same_settings(
    const std::vector<std::pair<std::string, std::string>> &settings) {
  // FNV-1a of each value: the same on every process, whatever its libc.
  auto hash = [](const std::string &text) {
    uint64_t h = 1469598103934665603ull;
    for (unsigned char c : text) h = (h ^ c) * 1099511628211ull;
    return h;
  };
  const size_t n = settings.size() + 1;
  std::vector<uint64_t> mine(n), all(n * static_cast<size_t>(size_));
  mine[0] = n;  // a rank with other settings names (another build) differs here
  for (size_t i = 1; i < n; ++i)
    mine[i] = hash(settings[i - 1].first + "=" + settings[i - 1].second);
  quorum_status_t s = quorum_allgather(comm_, mine.data(), all.data(), n * sizeof(uint64_t));
  if (s != QUORUM_OK) return api_error(s, "gathering the ranks' settings");
  for (size_t i = 0; i < n; ++i) {
    std::string same, other;
    for (int r = 0; r < size_; ++r) {
      std::string &list = all[static_cast<size_t>(r) * n + i] == all[i] ? same : other;
      list += fmt::format("{}{}", list.empty() ? "" : ", ", r);
    }
    if (other.empty()) continue;
    const std::string what =
        i == 0 ? std::string("the list of settings (different builds?)")
               : fmt::format("'{}' (here {})", settings[i - 1].first, settings[i - 1].second);
    return fail(QUORUM_ERR_INVALID_ARG, "reducer",
                "the ranks were given different settings: {} is the same as rank 0's on ranks "
                "{} and differs on ranks {}; every rank needs the same training options",
                what, same, other);
  }
  return kOk;
}

Status CollectiveReducer::sum_over_ranks(double *values, size_t n) {
  quorum_status_t s =
      quorum_allreduce(comm_, QUORUM_IN_PLACE, values, n, QUORUM_FLOAT64, QUORUM_SUM);
  if (s != QUORUM_OK) return api_error(s, "adding up the test-set evaluation");
  return kOk;
}

Status CollectiveReducer::check_replicas(uint32_t crc32, bool *agree) {
  std::vector<uint32_t> all(static_cast<size_t>(size_));
  quorum_status_t s = quorum_allgather(comm_, &crc32, all.data(), sizeof(crc32));
  if (s != QUORUM_OK) return api_error(s, "gathering replica checksums");
  *agree = true;
  for (uint32_t c : all) *agree = *agree && c == crc32;
  return kOk;
}

}  // namespace quorum::trainer
