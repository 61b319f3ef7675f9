// trainer.cpp: see trainer.hpp. The loop reads top to bottom: resume or
// initialise, broadcast, then per step assemble -> forward -> backward ->
// reduce -> update, and per epoch evaluate, report and checkpoint.
#include "trainer/trainer.hpp"

#include <signal.h>
#include <zlib.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <ctime>

#include "trainer/checkpoint.hpp"
#include "trainer/evaluation.hpp"
#include "trainer/lr_schedule.hpp"
#include "trainer/model.hpp"
#include "trainer/stop_signal.hpp"

namespace quorum::trainer {

namespace {
constexpr const char *kSub = "trainer";

using Clock = std::chrono::steady_clock;
double since(Clock::time_point t) {
  return std::chrono::duration<double>(Clock::now() - t).count();
}

double process_cpu_seconds() {
  timespec ts{};
  clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts);
  return double(ts.tv_sec) + 1e-9 * double(ts.tv_nsec);
}

// Host-side scratch of one batch.
struct HostBatch {
  std::vector<float> images;
  std::vector<int32_t> labels;
};

// Whether the step that ends with `step_in_epoch` steps done is one of the
// evaluations inside an epoch: evals_per_epoch - 1 of them, evenly spaced (the
// last evaluation is at the epoch's end).
bool evaluates_after(int64_t step_in_epoch, int64_t steps_per_epoch, int evals_per_epoch) {
  if (evals_per_epoch <= 1 || step_in_epoch >= steps_per_epoch) return false;
  return step_in_epoch * evals_per_epoch / steps_per_epoch !=
         (step_in_epoch - 1) * evals_per_epoch / steps_per_epoch;
}

// The moving average's decay after `steps` steps: short while few steps are
// averaged, so the first parameters do not linger in it.
double ema_decay_after(double decay, int64_t steps) {
  return std::min(decay, double(1 + steps) / double(10 + steps));
}

// Collective: the signal every rank reports when a stop was agreed on: the
// highest-numbered one that any rank received (SIGTERM over SIGINT).
Status agree_on_signal(GradientReducer *reducer, int own, int *agreed) {
  std::vector<double> received(NSIG, 0.0);
  if (own > 0 && own < NSIG) received[size_t(own)] = 1;
  QUORUM_CHECK(reducer->sum_over_ranks(received.data(), received.size()));
  *agreed = 0;
  for (int s = 1; s < NSIG; ++s)
    if (received[size_t(s)] > 0) *agreed = s;
  if (*agreed == 0)
    return fail(QUORUM_ERR_INTERNAL, kSub, "a stop was agreed on, but no rank received a signal");
  return kOk;
}

Status diverged(int64_t global_step, int64_t epoch) {
  return fail(QUORUM_ERR_INVALID_ARG, "train",
              "training diverged: the parameters are not finite after step {} (epoch {}); "
              "lower --lr, or see trainer/README.md for partial runs (--warmup-epochs, "
              "--sync-epochs, --drop-late)",
              global_step, epoch + 1);
}
}  // namespace

uint32_t params_crc32(const std::vector<float> &params) {
  return uint32_t(crc32(0L, reinterpret_cast<const Bytef *>(params.data()),
                        uInt(params.size() * sizeof(float))));
}

double params_sum(const std::vector<float> &params) {
  double s = 0;
  for (float p : params) s += double(p);
  return s;
}

Status train(const TrainConfig &cfg, Backend *backend, const DataSplit &data,
             GradientReducer *reducer, TrainObserver *observer, TrainResult *result) {
  // Finite and at least lo (NaN fails every comparison, so test the good case).
  auto in_range = [](double v, double lo) { return std::isfinite(v) && v >= lo; };
  if (cfg.batch <= 0 || cfg.epochs < 0 || !in_range(cfg.lr, 0) || cfg.lr == 0 ||
      !in_range(cfg.momentum, 0) || !in_range(cfg.weight_decay, 0) ||
      !in_range(cfg.warmup_epochs, 0) || cfg.evals_per_epoch < 1 || !in_range(cfg.ema_decay, 0) ||
      cfg.ema_decay >= 1)
    return fail(QUORUM_ERR_INVALID_ARG, kSub,
                "bad hyper-parameters: batch {} epochs {} lr {} momentum {} weight decay {} "
                "warmup epochs {} evaluations per epoch {} EMA decay {} (0 <= decay < 1)",
                cfg.batch, cfg.epochs, cfg.lr, cfg.momentum, cfg.weight_decay, cfg.warmup_epochs,
                cfg.evals_per_epoch, cfg.ema_decay);
  ModelSpec spec;
  QUORUM_CHECK(find_model(cfg.model, &spec));
  const Dataset &tr = data.train;
  if (tr.channels != spec.in_c || tr.height != spec.in_h || tr.width != spec.in_w ||
      tr.classes > spec.classes)
    return fail(QUORUM_ERR_INVALID_ARG, kSub,
                "model '{}' takes {}x{}x{} images of {} classes; data set '{}' has {}x{}x{} and {}",
                spec.name, spec.in_c, spec.in_h, spec.in_w, spec.classes, tr.name, tr.channels,
                tr.height, tr.width, tr.classes);
  // The evaluation assembles test images into buffers of the model's image size.
  const Dataset &te = data.test;
  if (te.channels != tr.channels || te.height != tr.height || te.width != tr.width ||
      te.classes > spec.classes)
    return fail(QUORUM_ERR_INVALID_ARG, kSub,
                "the test split of data set '{}' has {}x{}x{} images of {} classes; the training "
                "split and model '{}' take {}x{}x{} of at most {}",
                te.name, te.channels, te.height, te.width, te.classes, spec.name, tr.channels,
                tr.height, tr.width, spec.classes);
  const int world = reducer->size(), rank = reducer->rank();
  ShardSampler sampler(tr.count, cfg.seed, rank, world);
  // A batch policy (--batch auto) names each epoch's batch; the checkpoint
  // of its run carries its state, which a resume restores first.
  BatchPolicy *const policy = cfg.batch_policy;
  TrainingState st;
  if (!cfg.resume_path.empty()) {
    QUORUM_CHECK(load_checkpoint(cfg.resume_path, &st));
    if (policy != nullptr && st.policy_state.empty())
      return fail(QUORUM_ERR_MISMATCH, kSub,
                  "{}: the checkpoint of a run with a fixed --batch cannot resume a run with "
                  "--batch auto (it holds no tuner state); resume with --batch {}",
                  cfg.resume_path, st.batch);
    if (policy == nullptr && !st.policy_state.empty())
      return fail(QUORUM_ERR_MISMATCH, kSub,
                  "{}: the checkpoint of a run with --batch auto (at batch {}) resumes only "
                  "with --batch auto",
                  cfg.resume_path, st.batch);
    if (policy != nullptr) QUORUM_CHECK(policy->restore(st.policy_state));
  }
  int batch = policy != nullptr ? policy->plan().batch : cfg.batch;
  const auto steps_of = [&](int b) { return int64_t(sampler.shard_size() / size_t(b)); };
  int64_t steps_per_epoch = steps_of(batch);
  if (steps_per_epoch == 0)
    return fail(QUORUM_ERR_INVALID_ARG, kSub,
                "a shard of {} examples holds no full batch of {} ({} examples, {} ranks)",
                sampler.shard_size(), batch, tr.count, world);
  const int model_batch = policy != nullptr ? policy->max_batch() : cfg.batch;
  if (batch > model_batch)
    return fail(QUORUM_ERR_INTERNAL, kSub, "the batch policy names batch {} above its largest, {}",
                batch, model_batch);
  std::unique_ptr<Model<float>> model;
  QUORUM_CHECK(Model<float>::create(spec, backend, model_batch, &model));
  const size_t count = model->param_count();
  struct Buffer {
    Backend *b;
    float *p;
    ~Buffer() {
      if (p) b->free(p);
    }
  };
  auto alloc = [&](const char *what, Buffer *out) -> Status {
    out->p = static_cast<float *>(backend->alloc(count * sizeof(float)));
    if (out->p == nullptr)
      return fail(QUORUM_ERR_NO_MEMORY, kSub, "cannot allocate the {} ({} floats)", what, count);
    return kOk;
  };
  Buffer velocity_buf{backend, nullptr}, ema{backend, nullptr}, ema_swap{backend, nullptr};
  QUORUM_CHECK(alloc("momentum buffer", &velocity_buf));
  float *velocity = velocity_buf.p;
  const bool averaging = cfg.ema_decay > 0;
  if (averaging) {
    QUORUM_CHECK(alloc("parameters' moving average", &ema));
    QUORUM_CHECK(alloc("parameters' copy during an evaluation", &ema_swap));
  }

  reducer->set_steps_per_epoch(steps_per_epoch);
  const int64_t planned_steps = steps_per_epoch * cfg.epochs;
  // A policy's epochs differ in steps: the epochs bound the run, and the
  // progress's total is re-estimated at each epoch start.
  int64_t total_steps = policy != nullptr ? INT64_MAX : planned_steps;
  if (cfg.max_steps >= 0) total_steps = std::min(total_steps, cfg.max_steps);
  int64_t shown_total = std::min(total_steps, planned_steps);
  // The decay spans the planned epochs, not --max-steps: a run stopped early and
  // resumed follows the same rates as an uninterrupted one.
  LrSchedule schedule{cfg.lr,
                      cfg.lr_reference_batch,
                      cfg.batch * world,
                      int64_t(std::llround(cfg.warmup_epochs * double(steps_per_epoch))),
                      cfg.lr_decay == "cosine",
                      planned_steps};

  // Initial state: fresh or from the checkpoint read above.
  if (!cfg.resume_path.empty()) {
    if (st.model != cfg.model || st.seed != cfg.seed || st.batch != batch || st.world != world ||
        st.params.size() != count)
      return fail(QUORUM_ERR_MISMATCH, kSub,
                  "{}: checkpoint of model '{}' seed {} batch {} ranks {} ({} parameters) cannot "
                  "resume model '{}' seed {} batch {} ranks {} ({} parameters)",
                  cfg.resume_path, st.model, st.seed, st.batch, st.world, st.params.size(),
                  cfg.model, cfg.seed, batch, world, count);
    // The data fixes the order and number of steps: other data would resume
    // at another position, or past its epoch's end.
    if (st.data != tr.name || st.train_count != tr.count || st.steps_per_epoch != steps_per_epoch)
      return fail(QUORUM_ERR_MISMATCH, kSub,
                  "{}: checkpoint of a run on data set '{}' with {} training examples ({} steps "
                  "per epoch) cannot resume a run on '{}' with {} ({} steps per epoch); resume "
                  "with the same --data, --data-dir and --train-limit",
                  cfg.resume_path, st.data, st.train_count, st.steps_per_epoch, tr.name, tr.count,
                  steps_per_epoch);
    if (averaging && st.ema.size() != count)
      return fail(QUORUM_ERR_MISMATCH, kSub,
                  "{}: the checkpoint holds no moving average of the parameters, which "
                  "--ema-decay {} continues; resume without --ema-decay, or start afresh",
                  cfg.resume_path, cfg.ema_decay);
    model->write_params(st.params);
    backend->copy_to_device(velocity, st.momentum.data(), count * sizeof(float));
    if (averaging) backend->copy_to_device(ema.p, st.ema.data(), count * sizeof(float));
  } else {
    model->init_params(cfg.seed);
    st.model = cfg.model, st.seed = cfg.seed, st.batch = batch, st.world = world;
    st.data = tr.name, st.train_count = tr.count, st.steps_per_epoch = steps_per_epoch;
  }
  QUORUM_CHECK(reducer->broadcast_parameters(model->params(), count, backend->memory_kind()));
  // A fresh average starts at the (broadcast) initial parameters.
  if (averaging && cfg.resume_path.empty())
    backend->copy_device(ema.p, model->params(), count * sizeof(float));
  if (observer)
    observer->on_start(cfg,
                       RunStart{count, steps_per_epoch, st.global_step, st.train_seconds, batch});

  // Every rank checks the (identical) parameters, so all stop together; a
  // diverged run never overwrites the last good checkpoint.
  int64_t saved_step = -1;  // a stop right after an epoch's end has nothing new to save
  auto save = [&]() -> Status {
    if (cfg.checkpoint_path.empty() || st.global_step == saved_step) return kOk;
    model->read_params(&st.params);
    if (!std::isfinite(params_sum(st.params))) return diverged(st.global_step, st.epoch);
    if (rank != 0) return kOk;
    st.momentum.resize(count);
    backend->copy_to_host(st.momentum.data(), velocity, count * sizeof(float));
    st.ema.resize(averaging ? count : 0);
    if (averaging) backend->copy_to_host(st.ema.data(), ema.p, count * sizeof(float));
    if (policy != nullptr) st.policy_state = policy->state();
    QUORUM_CHECK(save_checkpoint(cfg.checkpoint_path, st));
    saved_step = st.global_step;
    return kOk;
  };

  // A stop asked for by SIGINT/SIGTERM rides in the gradient's reduction: the
  // control slot after the gradient holds 1 on a rank that received one, so
  // every rank reads the same reduced value (> 0: some rank asked) after the
  // same step, and all stop at the next boundary together, with no collective
  // of its own (a rank that stopped alone would leave the others waiting in
  // the next step's reduction, and rank 0 might never write the checkpoint).
  // One rank stops at the next boundary.
  float *const stop_slot = model->grads() + count;
  const size_t reduced = count + Model<float>::kGradControlSlots;
  bool stop_agreed = false;

  HostBatch hb{std::vector<float>(size_t(model_batch) * model->image_size()),
               std::vector<int32_t>(size_t(model_batch))};
  const auto run_start = Clock::now();
  const int64_t run_start_step = st.global_step;
  result->start_step = result->global_step = st.global_step;
  result->train_seconds = st.train_seconds;
  while (st.epoch < cfg.epochs && st.global_step < total_steps) {
    if (policy != nullptr && st.step_in_epoch == 0) {
      // An epoch's start: the policy's batch from here (the data order does
      // not depend on it; the position does).
      batch = policy->plan().batch;
      steps_per_epoch = batch >= 1 && batch <= model_batch ? steps_of(batch) : 0;
      if (steps_per_epoch == 0)
        return fail(QUORUM_ERR_INTERNAL, kSub,
                    "the batch policy names batch {}: outside 1..{} or above a shard of {}", batch,
                    model_batch, sampler.shard_size());
      st.batch = batch, st.steps_per_epoch = steps_per_epoch;
      st.epoch_start_step = st.global_step;
      reducer->set_steps_per_epoch(steps_per_epoch);
    }
    if (policy != nullptr)
      shown_total =
          std::min(total_steps, st.epoch_start_step + steps_per_epoch * (cfg.epochs - st.epoch));
    const std::vector<uint32_t> order = sampler.epoch_indices(st.epoch);
    EpochReport rep;
    rep.epoch = st.epoch;
    const auto epoch_start = Clock::now();
    double eval_seconds = 0, eval_cpu_seconds = 0;  // this epoch's evaluations (not training)
    auto training_seconds = [&] { return since(epoch_start) - eval_seconds; };
    // The run's training time before this epoch (or this run's part of it):
    // what the checkpoint carries on, so that a resumed run's times continue.
    const double seconds_before_epoch = st.train_seconds;
    // Scores the test set now; the scoring is not training time, but the
    // sum's wait for the slowest rank (which the evaluation adds to a partial
    // run) is.
    // With --ema-decay the moving average is scored, in the parameters' place.
    auto score_test_set = [&](Evaluation *e) -> Status {
      const auto start = Clock::now();
      const double cpu = process_cpu_seconds();
      const size_t bytes = count * sizeof(float);
      if (averaging) {
        backend->copy_device(ema_swap.p, model->params(), bytes);
        backend->copy_device(model->params(), ema.p, bytes);
      }
      const Status scored = evaluate_test_set(*model, data.test, reducer, e);
      if (averaging) backend->copy_device(model->params(), ema_swap.p, bytes);
      QUORUM_CHECK(scored);
      eval_seconds += since(start) - e->sum_seconds;
      eval_cpu_seconds += process_cpu_seconds() - cpu;
      return kOk;
    };
    const double cpu_start = process_cpu_seconds();
    int64_t images_this_run = 0;
    double contributors_sum = 0;
    uint64_t staleness_sum = 0;
    while (st.step_in_epoch < steps_per_epoch && st.global_step < total_steps) {
      // A step boundary: a stop asked for by SIGINT/SIGTERM is honoured here.
      if (stop_agreed || (world == 1 && stop_signal() != 0)) {
        int sig = stop_signal();
        if (world > 1) {
          QUORUM_CHECK(agree_on_signal(reducer, sig, &sig));
          rearm_stop_signals();
        }
        st.train_seconds = seconds_before_epoch + training_seconds();
        QUORUM_CHECK(save());
        model->read_params(&result->params);
        result->global_step = st.global_step;
        result->train_seconds = st.train_seconds;
        result->stopped_by_signal = sig;
        return kOk;
      }
      // A rank that fell behind applies the steps the others already ran
      // without computing its (late) gradient for them.
      const bool skip = reducer->steps_behind() > 0;
      // Several ranks: each one's |g_local|^2 against the reduced gradient's.
      const bool measure = policy != nullptr && !skip && policy->measures(st.global_step);
      double small_sq = 0;
      double loss = 0;
      int64_t correct = 0;
      auto t = Clock::now();
      if (!skip) {
        const float stop_request = stop_signal() != 0 ? 1.0f : 0.0f;
        backend->copy_to_device(stop_slot, &stop_request, sizeof stop_request);
        const uint32_t *idx = order.data() + st.step_in_epoch * batch;
        assemble_batch(tr, idx, batch, hb.images.data(), hb.labels.data());
        backend->synchronize();
        rep.times.data += since(t);

        t = Clock::now();
        if (measure && world == 1) {
          // One process: the noise scale compares the first half's gradient
          // with the whole batch's (which overwrites it): half a step extra.
          double half_loss = 0;
          int64_t half_correct = 0;
          model->load_batch(batch / 2, hb.images.data(), hb.labels.data());
          model->forward(batch / 2);
          model->loss(batch / 2, &half_loss, &half_correct);
          model->backward(batch / 2);
          small_sq = backend->sum_squares(count, model->grads());
        }
        model->load_batch(batch, hb.images.data(), hb.labels.data());
        model->forward(batch);
        model->loss(batch, &loss, &correct);
        backend->synchronize();
        rep.times.forward += since(t);

        t = Clock::now();
        float *grads = model->grads();
        const int64_t this_step = st.global_step;
        // The first range reported (the buffer's end) takes the control slot along.
        model->backward(batch, [&](size_t offset, size_t n) {
          if (offset + n == count) n += Model<float>::kGradControlSlots;
          reducer->gradient_ready(grads, offset, n, this_step);
        });
        if (measure && world > 1) small_sq = backend->sum_squares(count, grads);
        backend->synchronize();
        rep.times.backward += since(t);
        rep.times.imbalance += reducer->inject_imbalance(this_step);
      }

      t = Clock::now();
      ReduceInfo info;
      if (skip) {
        QUORUM_CHECK(reducer->skip_step(model->grads(), reduced, backend->memory_kind(),
                                        st.global_step, &info));
      } else {
        QUORUM_CHECK(reducer->reduce_gradients(model->grads(), reduced, backend->memory_kind(),
                                               st.global_step, &info));
      }
      float stop_requests = 0;
      backend->copy_to_host(&stop_requests, stop_slot, sizeof stop_requests);
      stop_agreed = stop_requests > 0;
      if (measure) {
        const double big_sq = backend->sum_squares(count, model->grads());
        double b_small = double(batch / 2);
        if (world > 1) {
          QUORUM_CHECK(reducer->sum_over_ranks(&small_sq, 1));
          small_sq /= world;
          b_small = batch;
        }
        policy->add_noise_sample(b_small, small_sq, double(batch) * world, big_sq);
      }
      rep.times.reduce += since(t);
      contributors_sum += info.contributors;
      rep.carried += info.carried;
      staleness_sum += info.staleness;

      t = Clock::now();
      const double rate =
          policy != nullptr ? policy->plan().lr_at(st.global_step) : schedule.at(st.global_step);
      SgdStep step{rate, cfg.momentum, cfg.weight_decay};
      backend->sgd_update(count, step, model->params(), model->grads(), velocity);
      if (averaging)
        backend->average_into(count, ema_decay_after(cfg.ema_decay, st.global_step), ema.p,
                              model->params());
      backend->synchronize();
      rep.times.update += since(t);

      ++st.step_in_epoch, ++st.global_step, ++rep.steps;
      rep.lr = step.lr;
      if (skip) {
        ++rep.skipped;
      } else {
        st.epoch_loss_sum += loss * batch;
        st.epoch_correct += correct;
        st.epoch_images += batch;
        images_this_run += batch;
      }
      if (observer && !skip) {
        StepProgress p;
        p.epoch = st.epoch, p.step_in_epoch = st.step_in_epoch;
        p.steps_per_epoch = steps_per_epoch, p.global_step = st.global_step;
        p.total_steps = shown_total, p.loss = loss, p.lr = step.lr;
        const double elapsed = training_seconds();
        p.images_per_s = elapsed > 0 ? double(images_this_run) / elapsed : 0;
        p.epoch_seconds = elapsed;
        p.train_seconds = seconds_before_epoch + elapsed;
        const double run_elapsed = since(run_start);
        const double per_step = run_elapsed / double(st.global_step - run_start_step);
        p.eta_s = per_step * double(shown_total - st.global_step);
        observer->on_step(p);
      }
      if (evaluates_after(st.step_in_epoch, steps_per_epoch, cfg.evals_per_epoch)) {
        EvalReport ev;
        ev.epoch = st.epoch, ev.step_in_epoch = st.step_in_epoch;
        ev.global_step = st.global_step, ev.epoch_seconds = training_seconds();
        ev.train_seconds = seconds_before_epoch + ev.epoch_seconds;
        const double before = eval_seconds;
        Evaluation e;
        QUORUM_CHECK(score_test_set(&e));
        ev.test_loss = e.loss, ev.test_accuracy = e.accuracy;
        ev.eval_seconds = eval_seconds - before;
        if (observer) observer->on_eval(ev);
      }
      if (cfg.checkpoint_every > 0 && st.global_step % cfg.checkpoint_every == 0 &&
          st.step_in_epoch < steps_per_epoch) {
        st.train_seconds = seconds_before_epoch + training_seconds();
        QUORUM_CHECK(save());
      }
    }
    rep.seconds = training_seconds();
    rep.cpu_seconds = process_cpu_seconds() - cpu_start - eval_cpu_seconds;
    rep.images_per_cpu_s = rep.cpu_seconds > 0 ? double(images_this_run) / rep.cpu_seconds : 0;
    rep.images_per_s = rep.times.total() > 0 ? double(images_this_run) / rep.times.total() : 0;
    rep.complete = st.step_in_epoch == steps_per_epoch;
    rep.batch = batch;
    rep.mean_contributors = rep.steps > 0 ? contributors_sum / double(rep.steps) : 0;
    rep.mean_staleness = rep.carried > 0 ? double(staleness_sum) / double(rep.carried) : 0;
    rep.train_loss = st.epoch_images ? st.epoch_loss_sum / double(st.epoch_images) : 0;
    rep.train_accuracy = st.epoch_images ? double(st.epoch_correct) / double(st.epoch_images) : 0;
    Evaluation e;
    QUORUM_CHECK(score_test_set(&e));
    rep.test_loss = e.loss, rep.test_accuracy = e.accuracy;
    rep.eval_seconds = eval_seconds;
    rep.seconds += e.sum_seconds;
    rep.train_seconds = seconds_before_epoch + rep.seconds;
    model->read_params(&result->params);
    rep.param_crc32 = params_crc32(result->params);
    rep.param_sum = params_sum(result->params);
    if (!std::isfinite(rep.param_sum)) {
      // Diverged: say so and stop (the replicas are identical, so every rank
      // stops here), without overwriting the checkpoint with these parameters.
      result->last = rep;
      result->global_step = st.global_step;
      if (observer) (void)observer->on_epoch(rep);  // the divergence is the error to report
      return diverged(st.global_step, st.epoch);
    }
    st.train_seconds = rep.train_seconds;
    result->train_seconds = st.train_seconds;
    if (rep.complete) {
      ++st.epoch;
      st.step_in_epoch = 0;
      st.epoch_loss_sum = 0;
      st.epoch_correct = st.epoch_images = 0;
    }
    // The policy decides the next epoch's plan, which the checkpoint carries.
    bool policy_stop = false;
    if (policy != nullptr && rep.complete) {
      QUORUM_CHECK(policy->end_epoch(rep, st.global_step, reducer, &policy_stop));
      // The checkpoint is at the next epoch's start, with its batch.
      const int next = policy->plan().batch;
      if (next < 1 || next > model_batch || steps_of(next) == 0)
        return fail(QUORUM_ERR_INTERNAL, kSub, "the batch policy names batch {} (largest {})", next,
                    model_batch);
      st.batch = next, st.steps_per_epoch = steps_of(next), st.epoch_start_step = st.global_step;
    }
    QUORUM_CHECK(save());
    result->last = rep;
    result->global_step = st.global_step;
    if (observer) QUORUM_CHECK(observer->on_epoch(rep));
    if (policy_stop) {
      result->stopped_by_policy = true;
      break;
    }
    // Every rank scored the same (summed) test set: all stop here together.
    if (cfg.stop_accuracy > 0 && rep.complete && rep.test_accuracy >= cfg.stop_accuracy) {
      result->reached_stop_accuracy = true;
      break;
    }
  }
  model->read_params(&result->params);
  return kOk;
}

}  // namespace quorum::trainer
