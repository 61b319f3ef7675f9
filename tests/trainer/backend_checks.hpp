// backend_checks.hpp: a backend's checks against `ref` (float), shared by the
// cpu backend's test (cpu_vs_ref_test.cpp), the cuda backend's device test
// (tests/gpu/cuda_vs_ref_test.cpp) and the CPU emulation of its algorithms
// (tests/gpu/kernel_emulation_test.cpp). Included once per test binary; the
// binary's main() says which backend to build through target().
//
// Every layer forward and backward, the loss, SGD, the reductions, the memory
// calls and whole training steps are compared element by element, tolerances
// relative to the magnitude of the reference (the backends sum in different
// orders), exact where the math is a selection. Outputs start as garbage, so
// every element must be written.
#pragma once

#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "trainer/model.hpp"
#include "trainer/ref_backend.hpp"
#include "trainer/rng.hpp"

namespace quorum::trainer::checks {

struct Target {
  // Builds the backend under test; workspace_bytes: the budget of a backend
  // with a workspace (cuda), 0 for its default; a backend without one ignores it.
  std::function<std::unique_ptr<Backend>(size_t workspace_bytes)> make;
  // Its sticky error (kOk while healthy, and always where it has none).
  std::function<Status(Backend &)> error;
};
inline Target &target() {
  static Target t;
  return t;
}

using Vec = std::vector<float>;

inline Vec random_vec(size_t n, uint64_t seed, double lo = -1, double hi = 1) {
  Rng r(seed);
  Vec v(n);
  for (float &x : v) x = float(r.uniform(lo, hi));
  return v;
}

// Names the first element that differs by more than tol x (1 + max |ref|).
inline void expect_close(const std::string &what, const Vec &got, const Vec &want,
                         double tol = 1e-5) {
  ASSERT_EQ(got.size(), want.size()) << what;
  double scale = 0;
  for (float w : want) scale = std::max(scale, double(std::fabs(w)));
  for (size_t i = 0; i < want.size(); ++i)
    ASSERT_NEAR(got[i], want[i], tol * (1.0 + scale)) << what << ": first difference at " << i;
}

// Buffers in the backend's memory, freed at the end of the test.
class DeviceBuffers {
 public:
  explicit DeviceBuffers(Backend *be) : be_(be) {}
  ~DeviceBuffers() {
    for (void *p : owned_) be_->free(p);
  }
  float *put(const Vec &host) {
    auto *p = static_cast<float *>(be_->alloc(host.size() * sizeof(float)));
    EXPECT_NE(p, nullptr);
    if (p != nullptr) be_->copy_to_device(p, host.data(), host.size() * sizeof(float));
    owned_.push_back(p);
    return p;
  }
  int32_t *put_labels(const std::vector<int32_t> &host) {
    auto *p = static_cast<int32_t *>(be_->alloc(host.size() * sizeof(int32_t)));
    EXPECT_NE(p, nullptr);
    if (p != nullptr) be_->copy_to_device(p, host.data(), host.size() * sizeof(int32_t));
    owned_.push_back(p);
    return p;
  }
  Vec get(const float *p, size_t n) {
    Vec v(n);
    be_->copy_to_host(v.data(), p, n * sizeof(float));
    return v;
  }

 private:
  Backend *be_;
  std::vector<void *> owned_;
};

class BackendVsRef : public ::testing::Test {
 protected:
  void SetUp() override {
    be_ = target().make(0);
    ASSERT_NE(be_, nullptr);
  }
  void TearDown() override {
    if (be_) {
      EXPECT_EQ(target().error(*be_), kOk) << last_error();
    }
  }
  RefBackend<float> ref_;
  std::unique_ptr<Backend> be_;
};

inline void check_conv(Backend *be, const Conv2dShape &s) {
  SCOPED_TRACE(::testing::Message() << "batch " << s.batch << " in " << s.in_c << "x" << s.in_h
                                    << "x" << s.in_w << " out " << s.out_c << " k" << s.kernel_h
                                    << "x" << s.kernel_w << " s" << s.stride << " p" << s.pad);
  RefBackend<float> ref;
  const size_t nx = size_t(s.batch) * s.in_c * s.in_h * s.in_w;
  const size_t nw = size_t(s.out_c) * s.in_c * s.kernel_h * s.kernel_w;
  const size_t ny = size_t(s.batch) * s.out_c * s.out_h() * s.out_w();
  Vec x = random_vec(nx, 1), w = random_vec(nw, 2, -0.2, 0.2), b = random_vec(s.out_c, 3);
  Vec dy = random_vec(ny, 4);
  Vec y(ny), dx(nx), dw(nw), db(s.out_c);
  ref.conv2d_forward(s, x.data(), w.data(), b.data(), y.data());
  ref.conv2d_backward(s, x.data(), w.data(), dy.data(), dx.data(), dw.data(), db.data());

  DeviceBuffers d(be);
  float *cx = d.put(x), *cw = d.put(w), *cb = d.put(b), *cdy = d.put(dy);
  // Outputs start as garbage: every element must be written.
  float *cy = d.put(Vec(ny, 7.f)), *cdx = d.put(Vec(nx, 7.f)), *cdw = d.put(Vec(nw, 7.f));
  float *cdb = d.put(Vec(s.out_c, 7.f));
  be->conv2d_forward(s, cx, cw, cb, cy);
  be->conv2d_backward(s, cx, cw, cdy, cdx, cdw, cdb);
  expect_close("conv y", d.get(cy, ny), y);
  expect_close("conv dx", d.get(cdx, nx), dx);
  expect_close("conv dw", d.get(cdw, nw), dw);
  expect_close("conv db", d.get(cdb, s.out_c), db);
  // First-layer form: no dx.
  be->fill_zero(cdw, nw * sizeof(float));
  be->conv2d_backward(s, cx, cw, cdy, nullptr, cdw, cdb);
  expect_close("conv dw (no dx)", d.get(cdw, nw), dw);
  expect_close("conv db (no dx)", d.get(cdb, s.out_c), db);
}

const Conv2dShape kConvShapes[] = {
    {4, 1, 28, 28, 16, 5, 5, 1, 2},   // fm-s conv1
    {4, 16, 14, 14, 32, 5, 5, 1, 2},  // fm-s conv2
    {3, 3, 9, 7, 5, 3, 3, 2, 1},      // stride 2, odd sizes
    {2, 4, 8, 8, 6, 3, 3, 1, 0},      // no padding
    {5, 3, 32, 32, 32, 3, 3, 1, 1},   // cifar-cnn conv1
    {3, 2, 7, 6, 3, 1, 1, 1, 0},      // 1x1 kernel
    {2, 3, 11, 10, 4, 5, 3, 3, 2},    // rectangular kernel, stride 3
};

TEST_F(BackendVsRef, Conv2dForwardBackward) {
  for (const Conv2dShape &s : kConvShapes) check_conv(be_.get(), s);
}

TEST_F(BackendVsRef, ReluForwardBackward) {
  const size_t n = 100003;
  Vec x = random_vec(n, 5), dy = random_vec(n, 6), y(n), dx(n);
  x[0] = 0.f, x[1] = -0.f, x[2] = NAN;
  ref_.relu_forward(n, x.data(), y.data());
  ref_.relu_backward(n, y.data(), dy.data(), dx.data());
  DeviceBuffers d(be_.get());
  float *cx = d.put(x), *cy = d.put(Vec(n)), *cdy = d.put(dy), *cdx = d.put(Vec(n));
  be_->relu_forward(n, cx, cy);
  be_->relu_backward(n, cy, cdy, cdx);
  expect_close("relu y", d.get(cy, n), y, 0);
  expect_close("relu dx", d.get(cdx, n), dx, 0);
  // In place (y aliases x, dx aliases dy).
  be_->relu_forward(n, cx, cx);
  be_->relu_backward(n, cx, cdy, cdy);
  expect_close("relu y in place", d.get(cx, n), y, 0);
  expect_close("relu dx in place", d.get(cdy, n), dx, 0);
}

// fm-s's first pool (rows of 14 outputs), odd sizes, rows of 35 outputs (more
// than one 16-lane block and a partial one), 3x3 and 4x4 windows.
TEST_F(BackendVsRef, MaxPoolForwardBackwardWithTies) {
  for (PoolShape s :
       {PoolShape{3, 4, 28, 28, 2}, PoolShape{2, 3, 7, 9, 2}, PoolShape{1, 2, 6, 70, 2},
        PoolShape{2, 2, 9, 9, 3}, PoolShape{1, 2, 10, 11, 4}}) {
    SCOPED_TRACE(::testing::Message() << s.in_h << "x" << s.in_w << " window " << s.window);
    const size_t nx = size_t(s.batch) * s.channels * s.in_h * s.in_w;
    const size_t ny = size_t(s.batch) * s.channels * s.out_h() * s.out_w();
    Vec x = random_vec(nx, 7);
    for (size_t i = 0; i < nx; i += 3) x[i] = 0.25f;  // many ties: the first maximum must win
    Vec dy = random_vec(ny, 8), y(ny), dx(nx);
    ref_.maxpool_forward(s, x.data(), y.data());
    ref_.maxpool_backward(s, x.data(), y.data(), dy.data(), dx.data());
    DeviceBuffers d(be_.get());
    float *cx = d.put(x), *cy = d.put(Vec(ny)), *cdy = d.put(dy), *cdx = d.put(Vec(nx, 9.f));
    be_->maxpool_forward(s, cx, cy);
    be_->maxpool_backward(s, cx, cy, cdy, cdx);
    expect_close("pool y", d.get(cy, ny), y, 0);
    expect_close("pool dx", d.get(cdx, nx), dx, 0);
  }
}

// The fused relu + 2x2 max-pool equals ref's two layers exactly: ties,
// zeros of both signs, NaN, all-negative windows and rows left out of odd sizes.
TEST_F(BackendVsRef, ReluMaxPoolEqualsTheTwoLayers) {
  for (PoolShape s :
       {PoolShape{3, 4, 28, 28, 2}, PoolShape{2, 3, 7, 9, 2}, PoolShape{1, 5, 3, 5, 2}}) {
    SCOPED_TRACE(::testing::Message() << s.in_h << "x" << s.in_w);
    const size_t nx = size_t(s.batch) * s.channels * s.in_h * s.in_w;
    const size_t ny = size_t(s.batch) * s.channels * s.out_h() * s.out_w();
    Vec x = random_vec(nx, 11);
    for (size_t i = 0; i < nx; i += 5) x[i] = 0.25f;  // ties among positive maxima
    for (size_t i = 1; i < nx; i += 7) x[i] = -0.f;
    for (size_t i = 2; i < nx; i += 11) x[i] = 0.f;
    for (size_t i = 0; i < 2 * size_t(s.in_w); ++i) x[i] = -1.f - float(i);  // all negative
    x[nx / 2] = NAN;
    Vec dy = random_vec(ny, 12), r(nx), y(ny), dr(nx), dx(nx);
    ref_.relu_forward(nx, x.data(), r.data());
    ref_.maxpool_forward(s, r.data(), y.data());
    ref_.maxpool_backward(s, r.data(), y.data(), dy.data(), dr.data());
    ref_.relu_backward(nx, r.data(), dr.data(), dx.data());
    DeviceBuffers d(be_.get());
    float *cx = d.put(x), *cr = d.put(Vec(nx)), *cy = d.put(Vec(ny, 9.f)), *cdy = d.put(dy);
    float *cdr = d.put(Vec(nx)), *cdx = d.put(Vec(nx, 9.f));
    be_->relu_maxpool2_forward(s, cx, cr, cy);
    be_->relu_maxpool2_backward(s, cx, cr, cy, cdy, cdr, cdx);
    expect_close("relu+pool y", d.get(cy, ny), y, 0);
    expect_close("relu+pool dx", d.get(cdx, nx), dx, 0);
  }
}

TEST_F(BackendVsRef, LinearForwardBackward) {
  for (LinearShape s : {LinearShape{7, 1568, 128}, LinearShape{3, 10, 5}, LinearShape{1, 128, 10},
                        LinearShape{33, 17, 9}}) {
    SCOPED_TRACE(::testing::Message() << s.batch << "x" << s.in << " -> " << s.out);
    Vec x = random_vec(size_t(s.batch) * s.in, 9),
        w = random_vec(size_t(s.out) * s.in, 10, -.05, .05);
    Vec b = random_vec(s.out, 11), dy = random_vec(size_t(s.batch) * s.out, 12);
    Vec y(dy.size()), dx(x.size()), dw(w.size()), db(s.out);
    ref_.linear_forward(s, x.data(), w.data(), b.data(), y.data());
    ref_.linear_backward(s, x.data(), w.data(), dy.data(), dx.data(), dw.data(), db.data());
    DeviceBuffers d(be_.get());
    float *cx = d.put(x), *cw = d.put(w), *cb = d.put(b), *cdy = d.put(dy);
    float *cy = d.put(Vec(y.size(), 3.f)), *cdx = d.put(Vec(x.size(), 3.f)),
          *cdw = d.put(Vec(w.size(), 3.f)), *cdb = d.put(Vec(s.out, 3.f));
    be_->linear_forward(s, cx, cw, cb, cy);
    be_->linear_backward(s, cx, cw, cdy, cdx, cdw, cdb);
    expect_close("linear y", d.get(cy, y.size()), y);
    expect_close("linear dx", d.get(cdx, x.size()), dx);
    expect_close("linear dw", d.get(cdw, w.size()), dw);
    expect_close("linear db", d.get(cdb, s.out), db);
    be_->linear_backward(s, cx, cw, cdy, nullptr, cdw, cdb);
    expect_close("linear dw (no dx)", d.get(cdw, w.size()), dw);
  }
}

TEST_F(BackendVsRef, SoftmaxCrossEntropy) {
  const int batch = 9, classes = 10;
  Vec z = random_vec(size_t(batch) * classes, 13, -5, 5);
  z[20] = z[21] = 9.f;  // a tie for the argmax of row 2: the first wins
  std::vector<int32_t> labels{0, 1, 2, 3, 4, 5, 6, 7, 9};
  Vec dz(z.size());
  double rl = 0, cl = 0;
  int64_t rc = 0, cc = 0;
  ref_.softmax_xent(batch, classes, z.data(), labels.data(), dz.data(), &rl, &rc);
  DeviceBuffers d(be_.get());
  float *cz = d.put(z), *cdz = d.put(Vec(z.size()));
  int32_t *clab = d.put_labels(labels);
  be_->softmax_xent(batch, classes, cz, clab, cdz, &cl, &cc);
  EXPECT_NEAR(cl, rl, 1e-6 * rl);
  EXPECT_EQ(cc, rc);
  expect_close("dlogits", d.get(cdz, z.size()), dz);
  double el = 0;
  int64_t ec = -1;
  be_->softmax_xent_eval(batch, classes, cz, clab, &el, &ec);
  EXPECT_NEAR(el, rl, 1e-6 * rl);
  EXPECT_EQ(ec, rc);
  // dlogits may alias the logits.
  be_->softmax_xent(batch, classes, cz, clab, cz, &cl, &cc);
  EXPECT_NEAR(cl, rl, 1e-6 * rl);
  expect_close("dlogits in place", d.get(cz, z.size()), dz);
}

TEST_F(BackendVsRef, SoftmaxCrossEntropyLargeBatch) {
  const int batch = 1000, classes = 10;
  Vec z = random_vec(size_t(batch) * classes, 31, -8, 8);
  std::vector<int32_t> labels(batch);
  for (int i = 0; i < batch; ++i) labels[i] = (i * 3) % classes;
  Vec dz(z.size());
  double rl = 0, cl = 0;
  int64_t rc = 0, cc = 0;
  ref_.softmax_xent(batch, classes, z.data(), labels.data(), dz.data(), &rl, &rc);
  DeviceBuffers d(be_.get());
  float *cz = d.put(z), *cdz = d.put(Vec(z.size()));
  be_->softmax_xent(batch, classes, cz, d.put_labels(labels), cdz, &cl, &cc);
  EXPECT_NEAR(cl, rl, 1e-6 * rl);
  EXPECT_EQ(cc, rc);
  expect_close("dlogits", d.get(cdz, z.size()), dz);
}

TEST_F(BackendVsRef, SgdScaleSumSquares) {
  const size_t n = 1003;
  Vec p = random_vec(n, 14), g = random_vec(n, 15), v = random_vec(n, 16);
  Vec rp = p, rv = v;
  SgdStep st{0.1, 0.9, 5e-4};
  ref_.sgd_update(n, st, rp.data(), g.data(), rv.data());
  DeviceBuffers d(be_.get());
  float *cp = d.put(p), *cg = d.put(g), *cv = d.put(v);
  be_->sgd_update(n, st, cp, cg, cv);
  expect_close("sgd params", d.get(cp, n), rp, 1e-6);
  expect_close("sgd momentum", d.get(cv, n), rv, 1e-6);
  be_->scale(n, 0.5, cg);
  ref_.scale(n, 0.5, g.data());
  expect_close("scale", d.get(cg, n), g, 0);
  EXPECT_NEAR(be_->sum_squares(n, cg), ref_.sum_squares(n, g.data()), 1e-9);
  EXPECT_EQ(be_->sum_squares(0, cg), 0.0);
  be_->average_into(n, 0.9, cv, cp);
  ref_.average_into(n, 0.9, rv.data(), rp.data());
  expect_close("average_into", d.get(cv, n), rv, 1e-6);
  // Long enough to be split across many blocks before the final sum.
  const size_t big = (size_t(3) << 20) + 5;
  Vec x = random_vec(big, 17);
  const double want = ref_.sum_squares(big, x.data());
  EXPECT_NEAR(be_->sum_squares(big, d.put(x)), want, 1e-9 * want);
}

TEST_F(BackendVsRef, MemoryCopiesAndZeroFill) {
  const size_t n = 4099;
  auto *p = static_cast<float *>(be_->alloc(n * sizeof(float)));
  ASSERT_NE(p, nullptr);
  DeviceBuffers d(be_.get());
  EXPECT_EQ(d.get(p, n), Vec(n, 0.f)) << "alloc must zero-fill";
  Vec a = random_vec(n, 18);
  be_->copy_to_device(p, a.data(), n * sizeof(float));
  EXPECT_EQ(d.get(p, n), a);
  // Overlapping device copies have memmove semantics, both directions.
  Vec want = a;
  std::memmove(want.data() + 100, want.data(), (n - 100) * sizeof(float));
  be_->copy_device(p + 100, p, (n - 100) * sizeof(float));
  EXPECT_EQ(d.get(p, n), want);
  std::memmove(want.data(), want.data() + 7, (n - 7) * sizeof(float));
  be_->copy_device(p, p + 7, (n - 7) * sizeof(float));
  EXPECT_EQ(d.get(p, n), want);
  float *q = d.put(Vec(n, 1.f));
  be_->copy_device(q, p, n * sizeof(float));
  EXPECT_EQ(d.get(q, n), want);
  be_->fill_zero(q + 1, (n - 2) * sizeof(float));
  Vec z = d.get(q, n);
  EXPECT_EQ(z[0], want[0]);
  EXPECT_EQ(z[n - 1], want[n - 1]);
  for (size_t i = 1; i + 1 < n; ++i) ASSERT_EQ(z[i], 0.f) << i;
  be_->synchronize();
  be_->free(p);
  be_->free(nullptr);
}

// A few SGD steps of a whole model give the same parameters as `ref`.
inline void expect_same_training(const std::string &model_name, int batch, int steps,
                                 size_t workspace_bytes) {
  ModelSpec spec;
  ASSERT_EQ(find_model(model_name, &spec), kOk);
  RefBackend<float> ref;
  std::unique_ptr<Backend> be = target().make(workspace_bytes);
  ASSERT_NE(be, nullptr);
  std::unique_ptr<Model<float>> mr, mb;
  ASSERT_EQ(Model<float>::create(spec, &ref, batch, &mr), kOk);
  ASSERT_EQ(Model<float>::create(spec, be.get(), batch, &mb), kOk);
  mr->init_params(3);
  mb->init_params(3);
  const size_t n = mr->param_count();
  auto *vr = static_cast<float *>(ref.alloc(n * 4));
  auto *vb = static_cast<float *>(be->alloc(n * 4));
  ASSERT_NE(vb, nullptr);
  for (int step = 0; step < steps; ++step) {
    SCOPED_TRACE(::testing::Message() << model_name << " step " << step);
    Vec images = random_vec(size_t(batch) * mr->image_size(), 100 + step);
    std::vector<int32_t> labels(batch);
    for (int i = 0; i < batch; ++i) labels[i] = (i * 7 + step) % spec.classes;
    double lr_ = 0, lb = 0;
    int64_t cr = 0, cb = 0;
    for (auto *m : {mr.get(), mb.get()}) {
      m->load_batch(batch, images.data(), labels.data());
      m->forward(batch);
    }
    mr->loss(batch, &lr_, &cr);
    mb->loss(batch, &lb, &cb);
    EXPECT_NEAR(lb, lr_, 1e-5 * (1 + lr_));
    EXPECT_EQ(cb, cr);
    mr->backward(batch);
    mb->backward(batch);
    Vec gr, gb;
    mr->read_grads(&gr);
    mb->read_grads(&gb);
    for (const ParamView &v : mr->layout().views()) {
      Vec a(gb.begin() + v.offset, gb.begin() + v.offset + v.count);
      Vec b(gr.begin() + v.offset, gr.begin() + v.offset + v.count);
      expect_close(model_name + " grad " + v.name, a, b, 1e-4);
    }
    EXPECT_NEAR(be->sum_squares(n, mb->grads()), ref.sum_squares(n, mr->grads()),
                1e-4 * (1 + ref.sum_squares(n, mr->grads())));
    SgdStep st{0.05, 0.9, 1e-4};
    ref.sgd_update(n, st, mr->params(), mr->grads(), vr);
    be->sgd_update(n, st, mb->params(), mb->grads(), vb);
  }
  Vec pr, pb;
  mr->read_params(&pr);
  mb->read_params(&pb);
  expect_close(model_name + " params after training", pb, pr, 1e-4);
  // Evaluation agrees too.
  double el_r = 0, el_b = 0;
  int64_t ec_r = 0, ec_b = 0;
  mr->evaluate(batch, &el_r, &ec_r);
  mb->evaluate(batch, &el_b, &ec_b);
  EXPECT_NEAR(el_b, el_r, 1e-4 * (1 + el_r));
  be->synchronize();
  EXPECT_EQ(target().error(*be), kOk) << last_error();
  ref.free(vr);
  be->free(vb);
}

TEST(WholeModel, FmSTrainingStepsAgree) {
  expect_same_training("fm-s", 8, 3, 0);
}
TEST(WholeModel, CifarCnnTrainingStepsAgree) {
  expect_same_training("cifar-cnn", 4, 2, 0);
}

}  // namespace quorum::trainer::checks
