// online_tuner.cpp: see online_tuner.hpp.
#include "trainer/tuner/online_tuner.hpp"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <sstream>

#include "trainer/tuner/allreduce_probe.hpp"
#include "trainer/tuner/compute_profiler.hpp"
#include "trainer/tuner/predictor.hpp"
#include "trainer/tuner/steps_model.hpp"

namespace quorum::trainer::tuner {

namespace {
constexpr const char *kSub = "tuner";
constexpr const char *kStateTag = "quorum-online-tuner";
constexpr int kStateVersion = 1;
// Each grid batch leaves at least this many steps per epoch (the noise scale
// is sampled from them, and the decision needs an epoch's evidence).
constexpr int64_t kMinStepsPerEpoch = 8;
}  // namespace

const char *decision_kind_name(DecisionKind k) {
  switch (k) {
    case DecisionKind::Profiled:
      return "profiled";
    case DecisionKind::Start:
      return "start";
    case DecisionKind::Keep:
      return "keep";
    case DecisionKind::Switch:
      return "switch";
    case DecisionKind::TargetReached:
      return "target_reached";
    case DecisionKind::Resumed:
      return "resumed";
  }
  return "?";
}

OnlineTuner::OnlineTuner(const OnlineTunerOptions &options, int ranks, Log log)
    : options_(options), ranks_(std::max(1, ranks)), log_(std::move(log)) {}

BatchPlan OnlineTuner::plan_for(int batch, double from_lr, int64_t start_step) const {
  const LrChoice c = lr_for_batch(options_.scaling, options_.lr0, options_.lr_b0,
                                  double(batch) * ranks_, options_.warmup_epochs);
  BatchPlan p;
  p.batch = batch, p.lr = c.lr, p.start_step = start_step;
  p.warmup_from_lr = std::min(from_lr, c.lr);
  const int64_t steps_per_epoch = std::max<int64_t>(1, shard_ / batch);
  p.warmup_steps = from_lr < c.lr ? int64_t(std::llround(c.warmup_epochs * steps_per_epoch)) : 0;
  return p;
}

Status OnlineTuner::profile(Backend *backend, const Dataset &train, quorum_comm_t comm) {
  const auto start = std::chrono::steady_clock::now();
  const OnlineTunerOptions &o = options_;
  if (o.batch_min < 2 || o.batch_max < o.batch_min || o.noise_every < 1 ||
      o.noise_every_alone < 1 || !(o.target_accuracy > 0) || o.target_accuracy > 1 ||
      !(o.min_gain >= 0))
    return fail(QUORUM_ERR_INVALID_ARG, kSub,
                "online tuner: bad options (batches {}..{}, noise every {}, target {}, gain {})",
                o.batch_min, o.batch_max, o.noise_every, o.target_accuracy, o.min_gain);
  shard_ = int64_t(train.count) / ranks_;
  const int largest = int(std::min<int64_t>(o.batch_max, shard_ / kMinStepsPerEpoch));
  if (largest < o.batch_min)
    return fail(QUORUM_ERR_INVALID_ARG, kSub,
                "--batch auto: {} training examples per rank leave no batch of at least {} "
                "with {} steps per epoch; use more data (--train-limit) or fewer ranks",
                shard_, o.batch_min, kMinStepsPerEpoch);
  QUORUM_CHECK(geometric_grid(o.batch_min, largest, 2.0, &grid_));
  ProfileOptions po;
  po.model = o.model, po.batches = grid_, po.warmup = o.profile_warmup;
  po.timed = o.profile_steps, po.max_seconds = o.profile_seconds;
  compute_ = StepProfile{};
  QUORUM_CHECK(profile_compute(po, backend, train, comm, nullptr, &compute_));
  double bytes = 0;
  size_t params = 0;
  QUORUM_CHECK(estimate_model_bytes(o.model, grid_.front(), &bytes, &params));
  gradient_bytes_ = double(params) * sizeof(float);
  allreduce_ = AlphaBeta{};
  if (comm != nullptr && ranks_ > 1) {
    AllreduceProbeOptions ao;
    ao.max_bytes = size_t(gradient_bytes_);
    ao.min_bytes = std::min<size_t>(4096, ao.max_bytes);
    ao.warmup = 2, ao.iterations = 5;
    std::vector<AllreduceSample> samples;
    QUORUM_CHECK(probe_allreduce(comm, ao, &samples, &allreduce_));
  }
  profile_seconds_ =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  // The first epoch at the grid batch nearest the start batch, from lr0.
  int first = grid_.front();
  for (int b : grid_)
    if (std::abs(std::log(double(b) / o.start_batch)) <
        std::abs(std::log(double(first) / o.start_batch)))
      first = b;
  plan_ = plan_for(first, o.lr0, 0);
  if (log_) {
    TunerDecision d;
    d.kind = DecisionKind::Profiled, d.ranks = ranks_, d.seconds = profile_seconds_;
    d.batch = first;
    std::string table;
    for (const auto &p : compute_.points())
      table += fmt::format("{}{}: {:.2f} ms", table.empty() ? "" : ", ", p.batch, 1e3 * p.seconds);
    d.reason = fmt::format(
        "step time per local batch ({}); allreduce of the {:.0f} KiB gradient "
        "{:.2f} ms",
        table, gradient_bytes_ / 1024, 1e3 * allreduce_.seconds(gradient_bytes_, ranks_));
    log_(d);
    TunerDecision s;
    s.kind = DecisionKind::Start, s.ranks = ranks_, s.batch = first, s.previous_batch = 0;
    s.lr = plan_.lr, s.warmup_from_lr = plan_.warmup_from_lr, s.warmup_steps = plan_.warmup_steps;
    s.reason = fmt::format(
        "no noise scale yet: epoch 1 at batch {} (the grid's nearest to {}), "
        "{} scaling of the rate; the batch is decided at each epoch's end",
        first, o.start_batch, lr_scaling_name(o.scaling));
    log_(s);
  }
  return kOk;
}

bool OnlineTuner::measures(int64_t global_step) const {
  int64_t every = options_.noise_every;
  if (ranks_ == 1) {
    const int64_t steps_per_epoch = std::max<int64_t>(1, shard_ / std::max(1, plan_.batch));
    every = std::clamp<int64_t>(steps_per_epoch / 8, 1, std::max(1, options_.noise_every_alone));
  }
  return global_step % every == 0;
}

void OnlineTuner::add_noise_sample(double b_small, double sq_small, double b_big, double sq_big) {
  TwoBatchEstimate e;
  if (two_batch_estimate(b_small, sq_small, b_big, sq_big, &e) != kOk) return;
  epoch_noise_.add(e);
  run_noise_.add(e);
}

Status OnlineTuner::end_epoch(const EpochReport &report, int64_t global_step,
                              GradientReducer *reducer, bool *stop) {
  *stop = false;
  TunerDecision d;
  d.epoch = report.epoch + 1, d.global_step = global_step, d.ranks = ranks_;
  d.previous_batch = plan_.batch, d.test_accuracy = report.test_accuracy;
  d.noise_samples = epoch_noise_.samples();
  // Rank 0's view is every rank's: [batch, B_noise, its error, gain].
  std::vector<double> v(4, 0.0);
  std::string reason;
  if (reducer->rank() == 0) {
    // The smoothed estimate (the EMA over the run's samples, which follows the
    // noise scale as it grows), or where its |G|^2 is not yet positive the
    // mean over this epoch's; the error is that of the epoch's mean.
    const double smoothed = run_noise_.noise_scale();
    v = {double(plan_.batch), smoothed > 0 ? smoothed : epoch_noise_.mean_noise_scale(),
         epoch_noise_.uncertainty(), 0.0};
    const double bn = v[1];
    if (epoch_noise_.samples() < 3 || !(bn > 0)) {
      reason = fmt::format("no usable noise scale from this epoch's {} samples: batch kept",
                           epoch_noise_.samples());
    } else {
      // The profile's shape at the level this epoch measured at its batch
      // (the brief profile and the training see different loads of a shared
      // machine), and likewise the allreduce (rank 0's times).
      double compute_scale = 1, comm_scale = 1;
      if (report.steps > 0) {
        const double steps = double(report.steps);
        const PhaseTimes &pt = report.times;
        const double measured = (pt.data + pt.forward + pt.backward + pt.update) / steps;
        const double profiled = compute_.seconds_at(plan_.batch);
        if (measured > 0 && profiled > 0) compute_scale = measured / profiled;
        const double modelled = allreduce_.seconds(gradient_bytes_, ranks_);
        if (ranks_ > 1 && pt.reduce > 0 && modelled > 0) comm_scale = pt.reduce / steps / modelled;
      }
      StepProfile scaled = compute_;
      scaled.scale(compute_scale);
      AlphaBeta comm = allreduce_;
      comm.alpha *= comm_scale, comm.beta *= comm_scale;
      PredictorInputs in;
      in.compute = scaled;
      in.compute_many = scaled;
      in.allreduce = comm;
      in.gradient_bytes = gradient_bytes_;
      in.steps = StepsModel::anchored(1.0, double(plan_.batch) * ranks_, bn);
      in.local_batches = grid_;
      in.ranks = {ranks_};
      in.launched_ranks = ranks_;
      in.scaling = options_.scaling;
      in.lr0 = options_.lr0, in.lr_b0 = options_.lr_b0, in.warmup_epochs = options_.warmup_epochs;
      std::vector<Prediction> rows;
      Choice choice;
      QUORUM_CHECK(predict_all(in, &rows));
      QUORUM_CHECK(choose(&rows, 0, 0, &choice));
      const Prediction &best = rows[choice.index];
      const auto current = std::find_if(rows.begin(), rows.end(), [&](const Prediction &r) {
        return r.local_batch == plan_.batch;
      });
      const double gain =
          current != rows.end() && best.seconds > 0 ? current->seconds / best.seconds - 1 : 0;
      v[3] = gain;
      const std::string level =
          fmt::format(" (step times x {:.2f} and allreduce x {:.2f} to this epoch's)",
                      compute_scale, comm_scale);
      if (best.local_batch != plan_.batch && gain >= options_.min_gain) {
        v[0] = best.local_batch;
        reason = fmt::format(
                     "B_noise {:.0f}: batch {} is predicted {:.1f}% faster to the target than {} "
                     "({:.2f} against {:.2f} ms per unit of progress)",
                     bn, best.local_batch, 100 * gain, plan_.batch, 1e3 * best.seconds,
                     1e3 * current->seconds) +
                 level;
      } else {
        reason = best.local_batch == plan_.batch
                     ? fmt::format("B_noise {:.0f}: batch {} is still the fastest predicted", bn,
                                   plan_.batch)
                     : fmt::format(
                           "B_noise {:.0f}: batch {} is predicted only {:.1f}% faster "
                           "than {} (below {:.0f}%): kept",
                           bn, best.local_batch, 100 * gain, plan_.batch, 100 * options_.min_gain);
        reason += level;
      }
    }
  }
  if (reducer->size() > 1) {
    if (reducer->rank() != 0) std::fill(v.begin(), v.end(), 0.0);
    QUORUM_CHECK(reducer->sum_over_ranks(v.data(), v.size()));
  }
  const int next = int(std::lround(v[0]));
  if (std::find(grid_.begin(), grid_.end(), next) == grid_.end())
    return fail(QUORUM_ERR_INTERNAL, kSub, "online tuner: rank 0 chose batch {}, not in the grid",
                next);
  d.b_noise = v[1], d.b_noise_error = v[2], d.predicted_gain = v[3];
  if (report.test_accuracy >= options_.target_accuracy) {
    reached_ = true;
    *stop = true;
    d.kind = DecisionKind::TargetReached;
    d.batch = plan_.batch;
    reason = fmt::format("test accuracy {:.2f}% reached the target {:.2f}%: training stops",
                         100 * report.test_accuracy, 100 * options_.target_accuracy);
  } else if (next != plan_.batch) {
    d.kind = DecisionKind::Switch;
    plan_ = plan_for(next, plan_.lr, global_step);
  } else {
    d.kind = DecisionKind::Keep;
  }
  d.batch = plan_.batch, d.lr = plan_.lr;
  d.warmup_from_lr = plan_.warmup_from_lr, d.warmup_steps = plan_.warmup_steps;
  // Only rank 0 wrote a reason; the others say what they were told.
  d.reason = reducer->rank() == 0 || d.kind == DecisionKind::TargetReached
                 ? reason
                 : fmt::format("rank 0's decision: batch {}", plan_.batch);
  epoch_noise_ = NoiseScaleTracker{};
  if (reducer->size() > 1) {
    // Every rank's plan, summed with its square: equal only if all agree.
    std::vector<double> mine{double(plan_.batch), double(plan_.batch) * plan_.batch, plan_.lr,
                             plan_.lr * plan_.lr};
    std::vector<double> sum = mine;
    QUORUM_CHECK(reducer->sum_over_ranks(sum.data(), sum.size()));
    const double k = reducer->size();
    for (size_t i = 0; i < mine.size(); ++i)
      if (std::abs(sum[i] - k * mine[i]) > 1e-9 * std::abs(k * mine[i]))
        return fail(QUORUM_ERR_INTERNAL, kSub,
                    "online tuner: the ranks' plans differ after epoch {} (rank {}: batch {}, "
                    "lr {})",
                    d.epoch, reducer->rank(), plan_.batch, plan_.lr);
  }
  if (log_) log_(d);
  return kOk;
}

std::string OnlineTuner::state() const {
  std::ostringstream out;
  out.precision(17);
  out << kStateTag << ' ' << kStateVersion << '\n';
  out << "grid " << grid_.size();
  for (const auto &p : compute_.points()) out << ' ' << p.batch << ' ' << p.seconds;
  out << "\nallreduce " << allreduce_.alpha << ' ' << allreduce_.beta << ' ' << allreduce_.r2 << ' '
      << allreduce_.measured_ranks << ' ' << gradient_bytes_ << '\n';
  out << "plan " << plan_.batch << ' ' << plan_.lr << ' ' << plan_.warmup_from_lr << ' '
      << plan_.warmup_steps << ' ' << plan_.start_step << '\n';
  for (const NoiseScaleTracker *t : {&epoch_noise_, &run_noise_}) {
    const NoiseScaleTracker::State s = t->state();
    out << "noise " << s.n << ' ' << s.ema_g << ' ' << s.ema_t << ' ' << s.weight << ' ' << s.mean_g
        << ' ' << s.mean_t << ' ' << s.m2_g << ' ' << s.m2_t << ' ' << s.c_gt << '\n';
  }
  out << "run " << shard_ << ' ' << profile_seconds_ << ' ' << int(reached_) << '\n';
  return out.str();
}

Status OnlineTuner::restore(const std::string &text) {
  std::istringstream in(text);
  std::string tag, word;
  int version = 0;
  size_t n = 0;
  auto bad = [&](const char *what) {
    return fail(QUORUM_ERR_INVALID_ARG, kSub, "the checkpoint's tuner state is malformed ({})",
                what);
  };
  if (!(in >> tag >> version) || tag != kStateTag || version != kStateVersion) return bad("header");
  if (!(in >> word >> n) || word != "grid" || n == 0 || n > 64) return bad("grid");
  StepProfile compute;
  std::vector<int> grid;
  for (size_t i = 0; i < n; ++i) {
    int b = 0;
    double s = 0;
    if (!(in >> b >> s) || b < 1 || !(s > 0) || !std::isfinite(s) || compute.add(b, s) != kOk)
      return bad("step times");
    grid.push_back(b);
  }
  AlphaBeta ab;
  double grad_bytes = 0;
  if (!(in >> word >> ab.alpha >> ab.beta >> ab.r2 >> ab.measured_ranks >> grad_bytes) ||
      word != "allreduce" || !(grad_bytes > 0))
    return bad("allreduce");
  BatchPlan p;
  if (!(in >> word >> p.batch >> p.lr >> p.warmup_from_lr >> p.warmup_steps >> p.start_step) ||
      word != "plan" || std::find(grid.begin(), grid.end(), p.batch) == grid.end() || !(p.lr > 0) ||
      !(p.warmup_from_lr > 0) || p.warmup_steps < 0 || p.start_step < 0)
    return bad("plan");
  NoiseScaleTracker::State ns[2];
  for (auto &s : ns)
    if (!(in >> word >> s.n >> s.ema_g >> s.ema_t >> s.weight >> s.mean_g >> s.mean_t >> s.m2_g >>
          s.m2_t >> s.c_gt) ||
        word != "noise" || s.n < 0)
      return bad("noise scale");
  int64_t shard = 0;
  double seconds = 0;
  int reached = 0;
  if (!(in >> word >> shard >> seconds >> reached) || word != "run" || shard < 1) return bad("run");
  std::sort(grid.begin(), grid.end());
  grid_ = grid, compute_ = compute, allreduce_ = ab, gradient_bytes_ = grad_bytes, plan_ = p;
  epoch_noise_.restore(ns[0]), run_noise_.restore(ns[1]);
  shard_ = shard, profile_seconds_ = seconds, reached_ = reached != 0;
  if (log_) {
    TunerDecision d;
    d.kind = DecisionKind::Resumed, d.ranks = ranks_, d.seconds = seconds;
    d.batch = plan_.batch, d.previous_batch = plan_.batch, d.lr = plan_.lr;
    d.warmup_from_lr = plan_.warmup_from_lr, d.warmup_steps = plan_.warmup_steps;
    d.global_step = plan_.start_step;
    d.b_noise = run_noise_.noise_scale(), d.noise_samples = run_noise_.samples();
    d.reason = fmt::format(
        "the checkpoint's tuner state: batch {} since step {}, {} noise "
        "samples, profile of {} batches (not measured again)",
        plan_.batch, plan_.start_step, run_noise_.samples(), grid_.size());
    log_(d);
  }
  return kOk;
}

}  // namespace quorum::trainer::tuner
