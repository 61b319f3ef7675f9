// compute_profiler.cpp: see compute_profiler.hpp.
#include "trainer/tuner/compute_profiler.hpp"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <memory>

#include "trainer/model.hpp"

namespace quorum::trainer::tuner {

namespace {
// Whether the last of three points lies within `tight` of the log-log line
// through the two before it.
bool on_line(const std::vector<StepProfile::Point> &p, double tight) {
  if (!(tight > 0) || p.size() < 3) return false;
  const auto &a = p[p.size() - 3], &b = p[p.size() - 2], &c = p.back();
  const double slope =
      std::log(b.seconds / a.seconds) / std::log(double(b.batch) / double(a.batch));
  const double line = b.seconds * std::pow(double(c.batch) / double(b.batch), slope);
  return std::abs(c.seconds / line - 1) <= tight;
}

// Whether n timed steps (sum, sum of squares) give their mean to within
// `precision` of it (standard error of the mean); precision 0: never.
bool known_to(double sum, double squares, int n, double precision) {
  if (!(precision > 0) || n < 2) return false;
  const double mean = sum / n;
  const double variance = std::max(0.0, (squares - n * mean * mean) / (n - 1));
  return std::sqrt(variance / n) <= precision * mean;
}
}  // namespace

Status estimate_model_bytes(const std::string &model, int batch, double *bytes,
                            size_t *param_count) {
  ModelSpec spec;
  QUORUM_CHECK(find_model(model, &spec));
  std::vector<LayerPlan> plan;
  ParamLayout layout;
  QUORUM_CHECK(plan_model(spec, &plan, &layout));
  double per_example = 0;
  for (const auto &l : plan) per_example += double(l.in_size());
  per_example += double(plan.back().out_size());
  *param_count = layout.total();
  *bytes = sizeof(float) * (3.0 * double(layout.total()) + 2.0 * per_example * batch);
  return kOk;
}

Status profile_compute(const ProfileOptions &o, Backend *backend, const Dataset &train,
                       quorum_comm_t comm, const std::function<void(int, double)> &progress,
                       StepProfile *out) {
  *out = StepProfile{};
  ModelSpec spec;
  QUORUM_CHECK(find_model(o.model, &spec));
  if (o.batches.empty() || o.timed < 1 || o.warmup < 0)
    return fail(QUORUM_ERR_INVALID_ARG, "tuner", "profile: no batch sizes or no timed steps");
  if (train.count == 0) return fail(QUORUM_ERR_INVALID_ARG, "tuner", "profile: no training data");
  using Clock = std::chrono::steady_clock;
  for (int b : o.batches) {
    std::unique_ptr<Model<float>> model;
    QUORUM_CHECK(Model<float>::create(spec, backend, b, &model));
    model->init_params(1);
    const size_t n = model->param_count();
    float *velocity = static_cast<float *>(backend->alloc(n * sizeof(float)));
    if (velocity == nullptr)
      return fail(QUORUM_ERR_NO_MEMORY, "tuner", "profile: batch {}: no memory for {} floats", b,
                  n);
    backend->fill_zero(velocity, n * sizeof(float));
    std::vector<uint32_t> idx(static_cast<size_t>(b));
    std::vector<float> images(size_t(b) * model->image_size());
    std::vector<int32_t> labels(static_cast<size_t>(b));
    double timed_seconds = 0, timed_squares = 0;
    int timed_steps = 0;
    for (int step = 0; step < o.warmup + o.timed; ++step) {
      if (timed_steps >= 3 && ((o.max_seconds > 0 && timed_seconds >= o.max_seconds) ||
                               known_to(timed_seconds, timed_squares, timed_steps, o.precision)))
        break;
      for (int i = 0; i < b; ++i) idx[size_t(i)] = uint32_t((size_t(step) * b + i) % train.count);
      const auto t0 = Clock::now();
      assemble_batch(train, idx.data(), b, images.data(), labels.data());
      model->load_batch(b, images.data(), labels.data());
      model->forward(b);
      double loss = 0;
      int64_t correct = 0;
      model->loss(b, &loss, &correct);
      model->backward(b);
      // A tiny rate: the parameters stay where they started.
      backend->sgd_update(n, SgdStep{1e-6, 0.9, 0.0}, model->params(), model->grads(), velocity);
      backend->synchronize();
      if (step >= o.warmup) {
        const double took = std::chrono::duration<double>(Clock::now() - t0).count();
        timed_seconds += took, timed_squares += took * took;
        ++timed_steps;
      }
    }
    backend->free(velocity);
    double per_step = timed_seconds / timed_steps;
    if (comm != nullptr && quorum_allreduce(comm, QUORUM_IN_PLACE, &per_step, 1, QUORUM_FLOAT64,
                                            QUORUM_MAX) != QUORUM_OK)
      return fail(QUORUM_ERR_TRANSPORT, "tuner", "profile: {}", quorum_last_error());
    double bytes = 0;
    size_t params = 0;
    QUORUM_CHECK(estimate_model_bytes(o.model, b, &bytes, &params));
    QUORUM_CHECK(out->add(b, per_step, bytes));
    if (progress) progress(b, per_step);
    // per_step is the same on every rank (the maximum), so is this decision.
    if (on_line(out->points(), o.tight)) break;
  }
  return kOk;
}

}  // namespace quorum::trainer::tuner
