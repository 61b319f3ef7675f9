// gradcheck_test.cpp: finite-difference checks of every layer's backward, and of
// whole models, on the ref backend in double precision (the oracle's oracle).
//
// Each layer check uses the scalar L = sum_i r_i * y_i for a fixed random r,
// so dL/dy = r, and compares the analytic dL/dx, dL/dw, dL/db with central
// differences (L(v + h) - L(v - h)) / 2h at every element.
#include <gtest/gtest.h>

#include <cmath>
#include <functional>
#include <vector>

#include "trainer/model.hpp"
#include "trainer/ref_backend.hpp"
#include "trainer/rng.hpp"

namespace quorum::trainer {
namespace {

using Vec = std::vector<double>;
constexpr double kStep = 1e-6;
constexpr double kTol = 1e-6;

Vec random_vec(size_t n, uint64_t seed, double lo = -1, double hi = 1) {
  Rng r(seed);
  Vec v(n);
  for (double &x : v) x = r.uniform(lo, hi);
  return v;
}

double dot(const Vec &a, const Vec &b) {
  double s = 0;
  for (size_t i = 0; i < a.size(); ++i) s += a[i] * b[i];
  return s;
}

// Compares analytic gradient `grad` of `loss` w.r.t. `v` with central differences.
void expect_gradient(const char *what, Vec &v, const Vec &grad,
                     const std::function<double()> &loss) {
  ASSERT_EQ(v.size(), grad.size());
  for (size_t i = 0; i < v.size(); ++i) {
    const double keep = v[i];
    v[i] = keep + kStep;
    const double up = loss();
    v[i] = keep - kStep;
    const double down = loss();
    v[i] = keep;
    const double numeric = (up - down) / (2 * kStep);
    ASSERT_NEAR(grad[i], numeric, kTol * std::max(1.0, std::fabs(numeric)))
        << what << " element " << i;
  }
}

struct ConvCase {
  Conv2dShape s;
};

class ConvGradTest : public ::testing::TestWithParam<ConvCase> {};

TEST_P(ConvGradTest, MatchesFiniteDifferences) {
  RefBackend<double> be;
  const Conv2dShape s = GetParam().s;
  const size_t nx = size_t(s.batch) * s.in_c * s.in_h * s.in_w;
  const size_t nw = size_t(s.out_c) * s.in_c * s.kernel_h * s.kernel_w;
  const size_t ny = size_t(s.batch) * s.out_c * s.out_h() * s.out_w();
  Vec x = random_vec(nx, 1), w = random_vec(nw, 2), b = random_vec(s.out_c, 3);
  const Vec r = random_vec(ny, 4);
  Vec y(ny), dx(nx), dw(nw), db(s.out_c);
  auto loss = [&] {
    be.conv2d_forward(s, x.data(), w.data(), b.data(), y.data());
    return dot(r, y);
  };
  be.conv2d_backward(s, x.data(), w.data(), r.data(), dx.data(), dw.data(), db.data());
  expect_gradient("conv dx", x, dx, loss);
  expect_gradient("conv dw", w, dw, loss);
  expect_gradient("conv db", b, db, loss);
}

INSTANTIATE_TEST_SUITE_P(
    Shapes, ConvGradTest,
    ::testing::Values(ConvCase{{2, 1, 6, 6, 3, 5, 5, 1, 2}},    // fm-s conv1-like
                      ConvCase{{2, 3, 7, 5, 4, 3, 3, 1, 1}},    // non-square input
                      ConvCase{{1, 2, 7, 7, 3, 3, 3, 2, 1}},    // stride 2, odd size
                      ConvCase{{2, 2, 5, 5, 2, 3, 3, 2, 0}}));  // stride 2, no padding

TEST(LayerGrad, Relu) {
  RefBackend<double> be;
  const size_t n = 64;
  Vec x = random_vec(n, 5);
  for (double &v : x)
    if (std::fabs(v) < 1e-3) v = 0.5;  // keep away from the kink
  const Vec r = random_vec(n, 6);
  Vec y(n), dx(n);
  auto loss = [&] {
    be.relu_forward(n, x.data(), y.data());
    return dot(r, y);
  };
  loss();
  be.relu_backward(n, y.data(), r.data(), dx.data());
  expect_gradient("relu dx", x, dx, loss);
}

TEST(LayerGrad, MaxPool) {
  RefBackend<double> be;
  for (PoolShape s :
       {PoolShape{2, 3, 6, 6, 2}, PoolShape{1, 2, 7, 5, 2}, PoolShape{1, 1, 9, 9, 3}}) {
    const size_t nx = size_t(s.batch) * s.channels * s.in_h * s.in_w;
    const size_t ny = size_t(s.batch) * s.channels * s.out_h() * s.out_w();
    Vec x = random_vec(nx, 7);  // distinct values: no ties within kStep
    const Vec r = random_vec(ny, 8);
    Vec y(ny), dx(nx);
    auto loss = [&] {
      be.maxpool_forward(s, x.data(), y.data());
      return dot(r, y);
    };
    loss();
    be.maxpool_backward(s, x.data(), y.data(), r.data(), dx.data());
    expect_gradient("maxpool dx", x, dx, loss);
  }
}

TEST(LayerGrad, Linear) {
  RefBackend<double> be;
  const LinearShape s{3, 7, 5};
  Vec x = random_vec(21, 9), w = random_vec(35, 10), b = random_vec(5, 11);
  const Vec r = random_vec(15, 12);
  Vec y(15), dx(21), dw(35), db(5);
  auto loss = [&] {
    be.linear_forward(s, x.data(), w.data(), b.data(), y.data());
    return dot(r, y);
  };
  be.linear_backward(s, x.data(), w.data(), r.data(), dx.data(), dw.data(), db.data());
  expect_gradient("linear dx", x, dx, loss);
  expect_gradient("linear dw", w, dw, loss);
  expect_gradient("linear db", b, db, loss);
}

TEST(LayerGrad, SoftmaxCrossEntropy) {
  RefBackend<double> be;
  const int batch = 4, classes = 6;
  Vec z = random_vec(24, 13, -3, 3);
  std::vector<int32_t> labels{0, 5, 2, 2};
  Vec dz(24);
  double mean_loss = 0;
  int64_t correct = 0;
  auto loss = [&] {
    double l;
    int64_t c;
    be.softmax_xent_eval(batch, classes, z.data(), labels.data(), &l, &c);
    return l;
  };
  be.softmax_xent(batch, classes, z.data(), labels.data(), dz.data(), &mean_loss, &correct);
  EXPECT_NEAR(mean_loss, loss(), 1e-12);
  expect_gradient("softmax-xent dlogits", z, dz, loss);
  // Known value: uniform logits give log(classes).
  Vec flat(24, 0.25);
  be.softmax_xent_eval(batch, classes, flat.data(), labels.data(), &mean_loss, &correct);
  EXPECT_NEAR(mean_loss, std::log(double(classes)), 1e-12);
}

// The whole model: gradient of the mean loss w.r.t. every parameter (small
// model) or a sample of them (fm-s).
void check_model(const ModelSpec &spec, int batch, size_t stride) {
  auto be = make_ref_backend_double();
  std::unique_ptr<Model<double>> m;
  ASSERT_EQ(Model<double>::create(spec, be.get(), batch, &m), kOk);
  m->init_params(7);
  Vec images = random_vec(size_t(batch) * m->image_size(), 14);
  std::vector<int32_t> labels(batch);
  for (int i = 0; i < batch; ++i) labels[i] = i % spec.classes;
  m->load_batch(batch, images.data(), labels.data());
  double loss = 0;
  int64_t correct = 0;
  m->forward(batch);
  m->loss(batch, &loss, &correct);
  m->backward(batch);
  Vec grads, params;
  m->read_grads(&grads);
  m->read_params(&params);
  for (const ParamView &v : m->layout().views()) {
    for (size_t k = 0; k < v.count; k += stride) {
      const size_t i = v.offset + k;
      const double keep = params[i];
      double up, down;
      int64_t c;
      params[i] = keep + kStep;
      m->write_params(params);
      m->evaluate(batch, &up, &c);
      params[i] = keep - kStep;
      m->write_params(params);
      m->evaluate(batch, &down, &c);
      params[i] = keep;
      const double numeric = (up - down) / (2 * kStep);
      ASSERT_NEAR(grads[i], numeric, 1e-6 * std::max(1.0, std::fabs(numeric)))
          << spec.name << " " << v.name << "[" << k << "]";
    }
  }
  m->write_params(params);
}

TEST(ModelGrad, SmallNetEveryParameter) {
  ModelSpec spec{"tiny",
                 2,
                 8,
                 8,
                 3,
                 {conv(3, 3, 1, 1), relu(), maxpool(2), conv(4, 3, 2, 1), relu(), linear(5), relu(),
                  linear(3)}};
  check_model(spec, 3, 1);
}

TEST(ModelGrad, FmSSampled) {
  ModelSpec spec;
  ASSERT_EQ(find_model("fm-s", &spec), kOk);
  check_model(spec, 2, 1999);  // every 1999th parameter of each view (and each view's first)
}

}  // namespace
}  // namespace quorum::trainer
