// trainer_step_bench.cpp: Google Benchmark of the trainer's cpu backend: one
// whole SGD step (forward, loss, backward, update) per model, fm-s's two
// conv + relu + max-pool blocks as the step runs them (BM_ConvBlock: one
// fused call each way, activations kept in the backend's layout between the
// blocks), and fm-s's layers one by one on NCHW tensors (BM_Layer: what an
// unfused backend would run). items/s = images/s. Run with
// --benchmark_filter=...
#include <benchmark/benchmark.h>

#include <vector>

#include "trainer/model.hpp"
#include "trainer/rng.hpp"

namespace quorum::trainer {
namespace {

std::vector<float> random_vec(size_t n, uint64_t seed) {
  Rng r(seed);
  std::vector<float> v(n);
  for (float &x : v) x = float(r.uniform(-1, 1));
  return v;
}

void BM_TrainStep(benchmark::State &state, const char *backend_name, const char *model_name) {
  const int batch = int(state.range(0));
  std::unique_ptr<Backend> be;
  ModelSpec spec;
  std::unique_ptr<Model<float>> m;
  if (make_backend(backend_name, BackendOptions{}, &be) != kOk ||
      find_model(model_name, &spec) != kOk ||
      Model<float>::create(spec, be.get(), batch, &m) != kOk) {
    state.SkipWithError("setup failed");
    return;
  }
  m->init_params(1);
  std::vector<float> images = random_vec(size_t(batch) * m->image_size(), 2);
  std::vector<int32_t> labels(batch);
  for (int i = 0; i < batch; ++i) labels[i] = i % spec.classes;
  float *velocity = static_cast<float *>(be->alloc(m->param_count() * sizeof(float)));
  for (auto _ : state) {
    double loss;
    int64_t correct;
    m->load_batch(batch, images.data(), labels.data());
    m->forward(batch);
    m->loss(batch, &loss, &correct);
    m->backward(batch);
    be->sgd_update(m->param_count(), SgdStep{0.01, 0.9, 0}, m->params(), m->grads(), velocity);
    be->synchronize();
    benchmark::DoNotOptimize(loss);
  }
  be->free(velocity);
  state.SetItemsProcessed(state.iterations() * batch);
}
BENCHMARK_CAPTURE(BM_TrainStep, cpu_fm_s, "cpu", "fm-s")
    ->Arg(64)
    ->Arg(256)
    ->Unit(benchmark::kMillisecond);
BENCHMARK_CAPTURE(BM_TrainStep, cpu_cifar_cnn, "cpu", "cifar-cnn")
    ->Arg(64)
    ->Unit(benchmark::kMillisecond);

// fm-s's conv blocks at batch 64 on the cpu backend, linked as the model
// links them: block 1 reads the images (NCHW) and hands its output to block 2
// in the backend's layout; block 2 hands its output to the linear layer (NCHW).
void BM_ConvBlock(benchmark::State &state) {
  const int which = int(state.range(0));
  std::unique_ptr<Backend> be;
  if (make_backend("cpu", BackendOptions{}, &be) != kOk) {
    state.SkipWithError("setup failed");
    return;
  }
  const Conv2dShape s = which < 2 ? Conv2dShape{64, 1, 28, 28, 16, 5, 5, 1, 2}
                                  : Conv2dShape{64, 16, 14, 14, 32, 5, 5, 1, 2};
  const Backend::BlockLinks links{which >= 2, which < 2};
  const PoolShape p = Backend::pool2_after(s);
  const size_t nx = size_t(s.batch) * s.in_c * s.in_h * s.in_w;
  const size_t nc = size_t(s.batch) * s.out_c * s.out_h() * s.out_w();
  const size_t ny = size_t(p.batch) * p.channels * p.out_h() * p.out_w();
  const size_t nw = size_t(s.out_c) * s.in_c * s.kernel_h * s.kernel_w;
  // Buffers from the backend (aligned, as the model's).
  std::vector<float *> owned;
  auto buffer = [&](size_t n, uint64_t seed) {
    auto *q = static_cast<float *>(be->alloc(n * sizeof(float)));
    std::vector<float> v = random_vec(n, seed);
    be->copy_to_device(q, v.data(), n * sizeof(float));
    owned.push_back(q);
    return q;
  };
  float *x = buffer(nx, 5), *w = buffer(nw, 6), *b = buffer(s.out_c, 7), *c = buffer(nc, 8);
  float *r = buffer(nc, 9), *y = buffer(ny, 10), *dy = buffer(ny, 11), *dc = buffer(nc, 12);
  float *dr = buffer(nc, 13), *dx = buffer(nx, 14), *dw = buffer(nw, 15), *db = buffer(s.out_c, 16);
  const char *names[] = {"block1 fwd", "block1 bwd", "block2 fwd", "block2 bwd"};
  state.SetLabel(names[which]);
  be->conv2d_relu_maxpool2_forward(s, links, x, w, b, c, r, y);
  for (auto _ : state) {
    if (which % 2 == 0) {
      be->conv2d_relu_maxpool2_forward(s, links, x, w, b, c, r, y);
    } else {
      // Block 1 is the first layer: no dx, as in the step.
      be->conv2d_relu_maxpool2_backward(s, links, x, w, c, r, y, dy, dc, dr,
                                        which == 1 ? nullptr : dx, dw, db);
    }
    benchmark::ClobberMemory();
  }
  for (float *q : owned) be->free(q);
  state.SetItemsProcessed(state.iterations() * 64);
}
BENCHMARK(BM_ConvBlock)->DenseRange(0, 3)->Unit(benchmark::kMicrosecond);

// fm-s's layers at batch 64 on the cpu backend, NCHW.
void BM_Layer(benchmark::State &state) {
  const int which = int(state.range(0));
  std::unique_ptr<Backend> be;
  make_backend("cpu", BackendOptions{}, &be);
  const Conv2dShape c1{64, 1, 28, 28, 16, 5, 5, 1, 2}, c2{64, 16, 14, 14, 32, 5, 5, 1, 2};
  const PoolShape p1{64, 16, 28, 28, 2};
  const LinearShape l1{64, 1568, 128};
  std::vector<float> a = random_vec(64 * 16 * 28 * 28, 3), b(a.size()), c(a.size()), d(a.size());
  std::vector<float> w = random_vec(1568 * 128, 4), bias(128), dw(w.size()), db(128);
  const char *names[] = {"conv1 fwd", "conv1 bwd", "conv2 fwd", "conv2 bwd", "pool1 fwd",
                         "pool1 bwd", "relu1 fwd", "relu1 bwd", "fc1 fwd",   "fc1 bwd"};
  state.SetLabel(names[which]);
  for (auto _ : state) {
    switch (which) {
      case 0:
        be->conv2d_forward(c1, a.data(), w.data(), bias.data(), b.data());
        break;
      case 1:
        be->conv2d_backward(c1, a.data(), w.data(), b.data(), nullptr, dw.data(), db.data());
        break;
      case 2:
        be->conv2d_forward(c2, a.data(), w.data(), bias.data(), b.data());
        break;
      case 3:
        be->conv2d_backward(c2, a.data(), w.data(), b.data(), c.data(), dw.data(), db.data());
        break;
      case 4:
        be->maxpool_forward(p1, a.data(), b.data());
        break;
      case 5:
        be->maxpool_backward(p1, a.data(), b.data(), c.data(), d.data());
        break;
      case 6:
        be->relu_forward(a.size(), a.data(), b.data());
        break;
      case 7:
        be->relu_backward(a.size(), b.data(), a.data(), c.data());
        break;
      case 8:
        be->linear_forward(l1, a.data(), w.data(), bias.data(), b.data());
        break;
      case 9:
        be->linear_backward(l1, a.data(), w.data(), b.data(), c.data(), dw.data(), db.data());
        break;
    }
    benchmark::ClobberMemory();
  }
  state.SetItemsProcessed(state.iterations() * 64);
}
BENCHMARK(BM_Layer)->DenseRange(0, 9)->Unit(benchmark::kMicrosecond);

}  // namespace
}  // namespace quorum::trainer

BENCHMARK_MAIN();
