// gpu_train_bench.cpp: training throughput (images/s) of whole SGD steps
// (batch copy to the backend, forward, loss, backward, update, synchronize) for
// one model on several backends and batch sizes, on synthetic data, in one run
// so that the backends are compared under the same conditions.
//
//   gpu_train_bench [--backends cuda,cpu] [--model fm-s] [--batches 64,256]
//                   [--steps 50] [--warmup 5] [--threads N] [--json FILE]
//
// Prints one line per (backend, batch): images/s, mean and median step time.
// A backend that cannot be created (no device) is reported and skipped; the
// exit status is 77 when none could be measured.
#include <fmt/format.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include "trainer/model.hpp"
#include "trainer/rng.hpp"

namespace qt = quorum::trainer;

namespace {

std::vector<std::string> split(const std::string &s) {
  std::vector<std::string> out;
  std::stringstream in(s);
  for (std::string item; std::getline(in, item, ',');)
    if (!item.empty()) out.push_back(item);
  return out;
}

struct Result {
  std::string backend;
  int batch = 0;
  int steps = 0;
  double images_per_s = 0, mean_ms = 0, median_ms = 0, final_loss = 0;
};

// Returns false (with the reason printed) when the backend or model cannot be made.
bool run(const std::string &backend_name, const std::string &model_name, int batch, int steps,
         int warmup, int threads, Result *r) {
  qt::BackendOptions options;
  options.threads = threads;
  std::unique_ptr<qt::Backend> be;
  if (qt::make_backend(backend_name, options, &be) != quorum::kOk) {
    std::printf("%-6s batch %4d: unavailable: %s\n", backend_name.c_str(), batch,
                quorum::last_error());
    return false;
  }
  qt::ModelSpec spec;
  std::unique_ptr<qt::Model<float>> m;
  if (qt::find_model(model_name, &spec) != quorum::kOk ||
      qt::Model<float>::create(spec, be.get(), batch, &m) != quorum::kOk) {
    std::printf("%-6s batch %4d: setup failed: %s\n", backend_name.c_str(), batch,
                quorum::last_error());
    return false;
  }
  m->init_params(1);
  // A few distinct batches, so that the data is not the same every step.
  const int kBatches = 4;
  std::vector<std::vector<float>> images(kBatches);
  std::vector<std::vector<int32_t>> labels(kBatches);
  qt::Rng rng(7);
  for (int b = 0; b < kBatches; ++b) {
    images[b].resize(size_t(batch) * m->image_size());
    for (float &x : images[b]) x = float(rng.uniform(-1, 1));
    labels[b].resize(batch);
    for (int32_t &l : labels[b]) l = int32_t(rng.below(uint64_t(spec.classes)));
  }
  auto *velocity = static_cast<float *>(be->alloc(m->param_count() * sizeof(float)));
  if (velocity == nullptr) {
    std::printf("%-6s batch %4d: cannot allocate the optimizer state\n", backend_name.c_str(),
                batch);
    return false;
  }
  std::vector<double> step_ms;
  double loss = 0;
  int64_t correct = 0;
  using clock = std::chrono::steady_clock;
  const auto t_start = clock::now();
  auto t_timed = t_start;
  for (int s = 0; s < warmup + steps; ++s) {
    if (s == warmup) t_timed = clock::now();
    const auto t0 = clock::now();
    const int b = s % kBatches;
    m->load_batch(batch, images[b].data(), labels[b].data());
    m->forward(batch);
    m->loss(batch, &loss, &correct);
    m->backward(batch);
    be->sgd_update(m->param_count(), qt::SgdStep{0.01, 0.9, 0.0}, m->params(), m->grads(),
                   velocity);
    be->synchronize();
    if (s >= warmup)
      step_ms.push_back(std::chrono::duration<double, std::milli>(clock::now() - t0).count());
  }
  const double seconds = std::chrono::duration<double>(clock::now() - t_timed).count();
  be->free(velocity);
  std::vector<double> sorted = step_ms;
  std::sort(sorted.begin(), sorted.end());
  r->backend = backend_name;
  r->batch = batch;
  r->steps = steps;
  r->images_per_s = seconds > 0 ? double(steps) * batch / seconds : 0;
  r->mean_ms = steps > 0 ? seconds * 1e3 / steps : 0;
  r->median_ms = sorted.empty() ? 0 : sorted[sorted.size() / 2];
  r->final_loss = loss;
  return true;
}

}  // namespace

int main(int argc, char **argv) {
  std::string backends = "cuda,cpu", model = "fm-s", batches = "64,256", json_path;
  int steps = 50, warmup = 5, threads = 1;
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    auto value = [&]() -> std::string {
      if (i + 1 >= argc) {
        std::fprintf(stderr, "gpu_train_bench: %s needs a value\n", a.c_str());
        std::exit(2);
      }
      return argv[++i];
    };
    if (a == "--backends") {
      backends = value();
    } else if (a == "--model") {
      model = value();
    } else if (a == "--batches") {
      batches = value();
    } else if (a == "--steps") {
      steps = std::atoi(value().c_str());
    } else if (a == "--warmup") {
      warmup = std::atoi(value().c_str());
    } else if (a == "--threads") {
      threads = std::atoi(value().c_str());
    } else if (a == "--json") {
      json_path = value();
    } else if (a == "-h" || a == "--help") {
      std::printf(
          "usage: gpu_train_bench [--backends cuda,cpu] [--model fm-s] [--batches 64,256]\n"
          "                       [--steps 50] [--warmup 5] [--threads N] [--json FILE]\n");
      return 0;
    } else {
      std::fprintf(stderr, "gpu_train_bench: unknown argument %s\n", a.c_str());
      return 2;
    }
  }
  if (steps <= 0 || warmup < 0 || threads <= 0) {
    std::fprintf(stderr, "gpu_train_bench: --steps and --threads must be positive\n");
    return 2;
  }
  std::ofstream json;
  if (!json_path.empty()) {
    json.open(json_path, std::ios::app);
    if (!json) {
      std::fprintf(stderr, "gpu_train_bench: cannot open %s\n", json_path.c_str());
      return 2;
    }
  }
  std::printf("model %s, %d timed steps after %d warm-up steps, synthetic data, %d cpu thread(s)\n",
              model.c_str(), steps, warmup, threads);
  int measured = 0;
  for (const std::string &backend : split(backends))
    for (const std::string &b : split(batches)) {
      const int batch = std::atoi(b.c_str());
      if (batch <= 0) {
        std::fprintf(stderr, "gpu_train_bench: bad batch size '%s'\n", b.c_str());
        return 2;
      }
      Result r;
      if (!run(backend, model, batch, steps, warmup, threads, &r)) continue;
      ++measured;
      std::printf(
          "%-6s batch %4d: %10.0f images/s  step %8.3f ms mean, %8.3f ms median  (loss %.4f)\n",
          r.backend.c_str(), r.batch, r.images_per_s, r.mean_ms, r.median_ms, r.final_loss);
      std::fflush(stdout);
      if (json)
        json << fmt::format(
            "{{\"backend\":\"{}\",\"model\":\"{}\",\"batch\":{},\"steps\":{},\"threads\":{},"
            "\"images_per_s\":{:.1f},\"mean_step_ms\":{:.4f},\"median_step_ms\":{:.4f}}}\n",
            r.backend, model, r.batch, r.steps, threads, r.images_per_s, r.mean_ms, r.median_ms);
    }
  return measured > 0 ? 0 : 77;
}
