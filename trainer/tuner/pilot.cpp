// pilot.cpp: see pilot.hpp. The step mirrors trainer.cpp's (which the tuner's
// predictions are about); only the noise-scale measurement is added.
#include "trainer/tuner/pilot.hpp"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <memory>

#include "trainer/evaluation.hpp"
#include "trainer/model.hpp"
#include "trainer/tuner/staged_evaluation.hpp"

namespace quorum::trainer::tuner {

namespace {
using Clock = std::chrono::steady_clock;
double since(Clock::time_point t) {
  return std::chrono::duration<double>(Clock::now() - t).count();
}
// As trainer.cpp: evaluations evenly spaced inside an epoch, the last at its end.
bool evaluates_after(int64_t step_in_epoch, int64_t steps_per_epoch, int evals_per_epoch) {
  if (step_in_epoch >= steps_per_epoch) return true;
  if (evals_per_epoch <= 1) return false;
  return step_in_epoch * evals_per_epoch / steps_per_epoch !=
         (step_in_epoch - 1) * evals_per_epoch / steps_per_epoch;
}

// After an evaluation below the target: fit the curve so far and say whether
// to stop there (every rank decides alike: the fit is deterministic, and the
// ranks agree on it all the same).
Status consider_extrapolating(const PilotOptions &o, PilotResult &r, int64_t step,
                              GradientReducer *reducer, bool *stop) {
  *stop = false;
  if (!o.extrapolate || int(r.curve.size()) < o.rule.min_points ||
      r.best_accuracy < o.target_accuracy - o.rule.margin)
    return kOk;
  CurveFit fit;
  if (fit_learning_curve(r.curve, o.target_accuracy, 200, o.seed, &fit) != kOk) return kOk;
  r.fit = fit;
  double votes = may_extrapolate(fit, o.rule, step, r.best_accuracy, o.target_accuracy) ? 1 : 0;
  QUORUM_CHECK(reducer->sum_over_ranks(&votes, 1));
  *stop = votes >= double(reducer->size());
  return kOk;
}
}  // namespace

Status run_pilot(const PilotOptions &o, Backend *backend, const DataSplit &data,
                 GradientReducer *reducer,
                 const std::function<void(int64_t, double, double)> &progress, PilotResult *out) {
  *out = PilotResult{};
  if (o.local_batch < 2 || !(o.lr > 0) || !(o.target_accuracy > 0) || o.target_accuracy > 1 ||
      !(o.max_epochs > 0) || o.noise_every < 1 || o.evals_per_epoch < 1)
    return fail(QUORUM_ERR_INVALID_ARG, "tuner",
                "pilot: bad options (batch {} >= 2, lr {} > 0, target {} in (0, 1], epochs {} > 0)",
                o.local_batch, o.lr, o.target_accuracy, o.max_epochs);
  ModelSpec spec;
  QUORUM_CHECK(find_model(o.model, &spec));
  const int world = reducer->size(), rank = reducer->rank();
  ShardSampler sampler(data.train.count, o.seed, rank, world);
  const int b = o.local_batch;
  const int64_t steps_per_epoch = int64_t(sampler.shard_size() / size_t(b));
  if (steps_per_epoch == 0)
    return fail(QUORUM_ERR_INVALID_ARG, "tuner",
                "pilot: a shard of {} examples holds no batch of {}", sampler.shard_size(), b);
  out->steps_per_epoch = steps_per_epoch;
  std::unique_ptr<Model<float>> model;
  QUORUM_CHECK(Model<float>::create(spec, backend, b, &model));
  const size_t n = model->param_count();
  float *velocity = static_cast<float *>(backend->alloc(n * sizeof(float)));
  if (velocity == nullptr)
    return fail(QUORUM_ERR_NO_MEMORY, "tuner", "pilot: no memory for {} floats", n);
  struct Free {
    Backend *b;
    float *p;
    ~Free() { b->free(p); }
  } free_velocity{backend, velocity};
  backend->fill_zero(velocity, n * sizeof(float));
  model->init_params(o.seed);
  QUORUM_CHECK(reducer->broadcast_parameters(model->params(), n, backend->memory_kind()));
  reducer->set_steps_per_epoch(steps_per_epoch);

  std::vector<double> stages;
  if (o.screen_fraction < 1) stages = {o.screen_fraction, 3 * o.screen_fraction};
  const StagedEvaluation staged(data.test, stages);
  NoiseScaleTracker noise;
  std::vector<TwoBatchEstimate> estimates;
  std::vector<float> images(size_t(b) * model->image_size());
  std::vector<int32_t> labels(static_cast<size_t>(b));
  const int64_t max_steps = int64_t(std::ceil(o.max_epochs * double(steps_per_epoch)));
  int64_t step = 0, plain_steps = 0;
  double plain_seconds = 0;  // steps without a noise measurement: quorum-train's step
  for (int64_t epoch = 0; step < max_steps; ++epoch) {
    const std::vector<uint32_t> order = sampler.epoch_indices(epoch);
    for (int64_t s = 0; s < steps_per_epoch && step < max_steps; ++s) {
      auto t0 = Clock::now();
      assemble_batch(data.train, order.data() + s * b, b, images.data(), labels.data());
      double loss = 0, small_sq = 0;
      int64_t correct = 0;
      const bool measure = step % o.noise_every == 0;
      if (measure && world == 1) {
        // The half batch's gradient first (the full batch's overwrites it).
        model->load_batch(b / 2, images.data(), labels.data());
        model->forward(b / 2);
        model->loss(b / 2, &loss, &correct);
        model->backward(b / 2);
        small_sq = backend->sum_squares(n, model->grads());
      }
      model->load_batch(b, images.data(), labels.data());
      model->forward(b);
      model->loss(b, &loss, &correct);
      model->backward(b);
      if (measure && world > 1) small_sq = backend->sum_squares(n, model->grads());
      ReduceInfo info;
      QUORUM_CHECK(
          reducer->reduce_gradients(model->grads(), n, backend->memory_kind(), step, &info));
      if (measure) {
        const double big_sq = backend->sum_squares(n, model->grads());
        double b_small = b / 2;
        if (world > 1) {
          QUORUM_CHECK(reducer->sum_over_ranks(&small_sq, 1));
          small_sq /= world;
          b_small = b;
        }
        TwoBatchEstimate e;
        if (two_batch_estimate(b_small, small_sq, double(b) * world, big_sq, &e) == kOk)
          noise.add(e), estimates.push_back(e);
      }
      backend->sgd_update(n, SgdStep{o.lr, o.momentum, o.weight_decay}, model->params(),
                          model->grads(), velocity);
      backend->synchronize();
      const double took = since(t0);
      out->train_seconds += took;
      if (!measure) plain_seconds += took, ++plain_steps;
      ++step;
      if (!evaluates_after(s + 1, steps_per_epoch, o.evals_per_epoch)) continue;
      const auto te = Clock::now();
      Evaluation ev;
      bool early = false;
      QUORUM_CHECK(staged.evaluate(*model, reducer, o.target_accuracy, &ev, &early));
      ++out->evaluations;
      if (early) ++out->screened_out;
      // The sums' wait is the slowest rank's training, not evaluating.
      out->eval_seconds += since(te) - ev.sum_seconds;
      out->train_seconds += ev.sum_seconds;
      if (!std::isfinite(ev.loss))
        return fail(QUORUM_ERR_INVALID_ARG, "tuner",
                    "pilot: training diverged by step {} (test loss not finite); lower --lr", step);
      out->curve.emplace_back(step, ev.accuracy);
      out->best_accuracy = std::max(out->best_accuracy, ev.accuracy);
      if (progress) progress(step, ev.accuracy, noise.mean_noise_scale());
      if (ev.accuracy >= o.target_accuracy) {
        out->reached = true;
        break;
      }
      bool stop = false;
      QUORUM_CHECK(consider_extrapolating(o, *out, step, reducer, &stop));
      if (stop) {
        out->reached = out->extrapolated = true;
        break;
      }
    }
    if (out->reached) break;
  }
  out->steps = step;
  const double interval = double(steps_per_epoch) / o.evals_per_epoch;
  if (out->extrapolated) {
    // Where a run would first be seen at or above the target, on this
    // pilot's evaluation grid past the steps run, the fit's spread as noise.
    const double seen = first_passage(out->fit, o.target_accuracy, double(step), interval,
                                      double(max_steps), out->fit.rmse, 2000, o.seed);
    out->target_steps = std::max(1.0, seen - interval / 2);
  } else {
    out->target_steps = std::max(1.0, double(step) - interval / 2);
  }
  out->step_seconds = plain_steps > 0 ? plain_seconds / double(plain_steps) : 0;
  // The noise scale grows as the loss falls; the one that sets the steps to
  // a target is measured near that target (McCandlish et al. compare the
  // critical batch at a loss with the noise scale at that loss): the mean
  // over the last quarter of the samples (at least 10).
  NoiseScaleTracker late;
  const size_t tail = std::min(estimates.size(), std::max<size_t>(10, estimates.size() / 4));
  for (size_t i = estimates.size() - tail; i < estimates.size(); ++i) late.add(estimates[i]);
  out->b_noise = late.mean_noise_scale();
  out->b_noise_error = late.uncertainty();
  out->b_noise_whole = noise.mean_noise_scale();
  out->b_noise_ema = noise.noise_scale();
  out->noise_samples = noise.samples();
  out->late_samples = late.samples();
  return kOk;
}

}  // namespace quorum::trainer::tuner
