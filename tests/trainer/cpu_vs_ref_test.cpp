// cpu_vs_ref_test.cpp: the cpu backend agrees with the ref backend (float) for
// every layer's forward and backward, and for whole training steps.
//
// Tolerances are relative to the magnitude of the reference values: the
// backends sum in different orders (oneDNN and OpenBLAS block their loops).
#include <gtest/gtest.h>

#include <cmath>
#include <vector>

#include "trainer/cpu_kernels.hpp"
#include "trainer/model.hpp"
#include "trainer/ref_backend.hpp"
#include "trainer/rng.hpp"

namespace quorum::trainer {
namespace {

using Vec = std::vector<float>;

Vec random_vec(size_t n, uint64_t seed, double lo = -1, double hi = 1) {
  Rng r(seed);
  Vec v(n);
  for (float &x : v) x = float(r.uniform(lo, hi));
  return v;
}

// Names the first element that differs by more than tol x (1 + max |ref|).
void expect_close(const char *what, const Vec &got, const Vec &want, double tol = 1e-5) {
  ASSERT_EQ(got.size(), want.size()) << what;
  double scale = 0;
  for (float w : want) scale = std::max(scale, double(std::fabs(w)));
  for (size_t i = 0; i < want.size(); ++i)
    ASSERT_NEAR(got[i], want[i], tol * (1.0 + scale)) << what << ": first difference at " << i;
}

class BackendPair : public ::testing::Test {
 protected:
  void SetUp() override { ASSERT_EQ(make_backend("cpu", BackendOptions{}, &cpu_), kOk); }
  // Buffers on the cpu backend, to exercise its own allocator.
  float *dev(const Vec &host) {
    float *p = static_cast<float *>(cpu_->alloc(host.size() * sizeof(float)));
    cpu_->copy_to_device(p, host.data(), host.size() * sizeof(float));
    owned_.push_back(p);
    return p;
  }
  Vec host(const float *p, size_t n) {
    Vec v(n);
    cpu_->copy_to_host(v.data(), p, n * sizeof(float));
    return v;
  }
  void TearDown() override {
    for (float *p : owned_) cpu_->free(p);
  }
  RefBackend<float> ref_;
  std::unique_ptr<Backend> cpu_;
  std::vector<float *> owned_;
};

TEST_F(BackendPair, Conv2dForwardBackward) {
  const Conv2dShape shapes[] = {
      {4, 1, 28, 28, 16, 5, 5, 1, 2},   // fm-s conv1
      {4, 16, 14, 14, 32, 5, 5, 1, 2},  // fm-s conv2
      {3, 3, 9, 7, 5, 3, 3, 2, 1},      // stride 2, odd sizes
      {2, 4, 8, 8, 6, 3, 3, 1, 0},      // no padding
      {5, 3, 32, 32, 32, 3, 3, 1, 1},   // cifar-cnn conv1
  };
  for (const Conv2dShape &s : shapes) {
    SCOPED_TRACE(::testing::Message()
                 << "in " << s.in_c << "x" << s.in_h << "x" << s.in_w << " out " << s.out_c << " k"
                 << s.kernel_h << " s" << s.stride << " p" << s.pad);
    const size_t nx = size_t(s.batch) * s.in_c * s.in_h * s.in_w;
    const size_t nw = size_t(s.out_c) * s.in_c * s.kernel_h * s.kernel_w;
    const size_t ny = size_t(s.batch) * s.out_c * s.out_h() * s.out_w();
    Vec x = random_vec(nx, 1), w = random_vec(nw, 2, -0.2, 0.2), b = random_vec(s.out_c, 3);
    Vec dy = random_vec(ny, 4);
    Vec y(ny), dx(nx), dw(nw), db(s.out_c);
    ref_.conv2d_forward(s, x.data(), w.data(), b.data(), y.data());
    ref_.conv2d_backward(s, x.data(), w.data(), dy.data(), dx.data(), dw.data(), db.data());

    float *cx = dev(x), *cw = dev(w), *cb = dev(b), *cdy = dev(dy);
    float *cy = dev(Vec(ny)), *cdx = dev(Vec(nx)), *cdw = dev(Vec(nw)), *cdb = dev(Vec(s.out_c));
    cpu_->conv2d_forward(s, cx, cw, cb, cy);
    cpu_->conv2d_backward(s, cx, cw, cdy, cdx, cdw, cdb);
    expect_close("conv y", host(cy, ny), y);
    expect_close("conv dx", host(cdx, nx), dx);
    expect_close("conv dw", host(cdw, nw), dw);
    expect_close("conv db", host(cdb, s.out_c), db);
    // First-layer form: no dx.
    cpu_->conv2d_backward(s, cx, cw, cdy, nullptr, cdw, cdb);
    expect_close("conv dw (no dx)", host(cdw, nw), dw);
  }
}

TEST_F(BackendPair, ReluForwardBackward) {
  const size_t n = 1000;
  Vec x = random_vec(n, 5), dy = random_vec(n, 6), y(n), dx(n);
  x[0] = 0.f, x[1] = -0.f;
  ref_.relu_forward(n, x.data(), y.data());
  ref_.relu_backward(n, y.data(), dy.data(), dx.data());
  float *cx = dev(x), *cy = dev(Vec(n)), *cdy = dev(dy), *cdx = dev(Vec(n));
  cpu_->relu_forward(n, cx, cy);
  cpu_->relu_backward(n, cy, cdy, cdx);
  expect_close("relu y", host(cy, n), y, 0);
  expect_close("relu dx", host(cdx, n), dx, 0);
}

// Shapes: fm-s's first pool (rows of 14 outputs), odd sizes, rows of 35
// outputs (more than one 16-lane block and a partial one), a 3x3 window.
const PoolShape kPoolShapes[] = {PoolShape{3, 4, 28, 28, 2}, PoolShape{2, 3, 7, 9, 2},
                                 PoolShape{1, 2, 6, 70, 2}, PoolShape{2, 2, 9, 9, 3}};

TEST_F(BackendPair, MaxPoolForwardBackwardWithTies) {
  for (PoolShape s : kPoolShapes) {
    const size_t nx = size_t(s.batch) * s.channels * s.in_h * s.in_w;
    const size_t ny = size_t(s.batch) * s.channels * s.out_h() * s.out_w();
    Vec x = random_vec(nx, 7);
    for (size_t i = 0; i < nx; i += 3) x[i] = 0.25f;  // many ties: the first maximum must win
    Vec dy = random_vec(ny, 8), y(ny), dx(nx);
    ref_.maxpool_forward(s, x.data(), y.data());
    ref_.maxpool_backward(s, x.data(), y.data(), dy.data(), dx.data());
    float *cx = dev(x), *cy = dev(Vec(ny)), *cdy = dev(dy), *cdx = dev(Vec(nx, 9.f));
    cpu_->maxpool_forward(s, cx, cy);
    cpu_->maxpool_backward(s, cx, cy, cdy, cdx);
    expect_close("pool y", host(cy, ny), y, 0);
    expect_close("pool dx", host(cdx, nx), dx, 0);
    if (s.window != 2) continue;
    // The portable loops too (the backend takes AVX-512 where the CPU has it).
    Vec portable_y(ny, 9.f), portable(nx, 9.f);
    cpu_kernels::maxpool2_forward_portable(s, x.data(), portable_y.data());
    expect_close("pool y (portable)", portable_y, y, 0);
    cpu_kernels::maxpool2_backward_portable(s, x.data(), y.data(), dy.data(), portable.data());
    expect_close("pool dx (portable)", portable, dx, 0);
  }
}

// A relu followed by a 2x2 max-pool, fused on cpu (the relu's output never
// written): what ref's two layers give, with ties, zeros and windows whose
// maximum is <= 0 (no gradient passes there).
TEST_F(BackendPair, ReluMaxPoolFusedEqualsTheTwoLayers) {
  for (PoolShape s : kPoolShapes) {
    if (s.window != 2) continue;
    const size_t nx = size_t(s.batch) * s.channels * s.in_h * s.in_w;
    const size_t ny = size_t(s.batch) * s.channels * s.out_h() * s.out_w();
    Vec x = random_vec(nx, 13);
    for (size_t i = 0; i < nx; i += 3) x[i] = 0.25f;
    for (size_t i = 1; i < nx; i += 5) x[i] = 0.f;
    for (size_t i = 0; i < nx / 4; ++i) x[i] = -std::fabs(x[i]);  // all <= 0 there
    Vec dy = random_vec(ny, 14), r(nx), y(ny), dr(nx), dx(nx);
    ref_.relu_forward(nx, x.data(), r.data());
    ref_.maxpool_forward(s, r.data(), y.data());
    ref_.maxpool_backward(s, r.data(), y.data(), dy.data(), dr.data());
    ref_.relu_backward(nx, r.data(), dr.data(), dx.data());
    float *cx = dev(x), *cr = dev(Vec(nx)), *cy = dev(Vec(ny, 9.f)), *cdy = dev(dy);
    float *cdr = dev(Vec(nx)), *cdx = dev(Vec(nx, 9.f));
    cpu_->relu_maxpool2_forward(s, cx, cr, cy);
    cpu_->relu_maxpool2_backward(s, cx, cr, cy, cdy, cdr, cdx);
    expect_close("relu+pool y", host(cy, ny), y, 0);
    expect_close("relu+pool dx", host(cdx, nx), dx, 0);
    Vec portable_y(ny, 9.f), portable(nx, 9.f);
    cpu_kernels::maxpool2_forward_portable(s, x.data(), portable_y.data(), true);
    expect_close("relu+pool y (portable)", portable_y, y, 0);
    cpu_kernels::maxpool2_backward_portable(s, x.data(), y.data(), dy.data(), portable.data(),
                                            true);
    expect_close("relu+pool dx (portable)", portable, dx, 0);
    // The backend interface's unfused default (ref's) gives the same.
    Vec ry(ny), rr(nx), rdr(nx), rdx(nx);
    ref_.relu_maxpool2_forward(s, x.data(), rr.data(), ry.data());
    ref_.relu_maxpool2_backward(s, x.data(), rr.data(), ry.data(), dy.data(), rdr.data(),
                                rdx.data());
    expect_close("relu+pool y (default)", ry, y, 0);
    expect_close("relu+pool dx (default)", rdx, dx, 0);
  }
}

// NCHW <-> oneDNN's nChw16c (channels a multiple of 16): `to` says which way.
Vec convert_nchw16c(const Vec &v, int batch, int channels, int hw, bool to) {
  Vec out(v.size());
  for (int n = 0; n < batch; ++n)
    for (int c = 0; c < channels; ++c)
      for (int p = 0; p < hw; ++p) {
        const size_t plain = (size_t(n) * channels + c) * hw + p;
        const size_t blocked = ((size_t(n) * (channels / 16) + c / 16) * hw + p) * 16 + c % 16;
        (to ? out[blocked] : out[plain]) = to ? v[plain] : v[blocked];
      }
  return out;
}
Vec to_nchw16c(const Vec &v, int batch, int channels, int hw) {
  return convert_nchw16c(v, batch, channels, hw, true);
}
Vec from_nchw16c(const Vec &v, int batch, int channels, int hw) {
  return convert_nchw16c(v, batch, channels, hw, false);
}

// The relu + 2x2 max-pool on the conv layers' blocked layout: what ref's two
// layers give on the same values in NCHW, with ties, zeros, windows <= 0 and
// odd sizes (the last row and column get no gradient).
TEST_F(BackendPair, ReluMaxPoolOnBlockedLayoutEqualsTheTwoLayers) {
  const PoolShape shapes[] = {PoolShape{3, 16, 28, 28, 2}, PoolShape{2, 32, 7, 9, 2},
                              PoolShape{1, 48, 6, 5, 2}};
  for (PoolShape s : shapes) {
    const int hw = s.in_h * s.in_w;
    const size_t nx = size_t(s.batch) * s.channels * hw;
    const size_t ny = size_t(s.batch) * s.channels * s.out_h() * s.out_w();
    Vec x = random_vec(nx, 15);
    for (size_t i = 0; i < nx; i += 3) x[i] = 0.25f;
    for (size_t i = 1; i < nx; i += 5) x[i] = 0.f;
    for (size_t i = 0; i < nx / 4; ++i) x[i] = -std::fabs(x[i]);
    Vec dy = random_vec(ny, 16), r(nx), y(ny), dr(nx), dx(nx);
    ref_.relu_maxpool2_forward(s, x.data(), r.data(), y.data());
    ref_.relu_maxpool2_backward(s, x.data(), r.data(), y.data(), dy.data(), dr.data(), dx.data());
    const Vec blocked = to_nchw16c(x, s.batch, s.channels, hw);
    Vec got_y(ny, 9.f), got_dx(nx, 9.f);
    cpu_kernels::relu_maxpool2_forward_nchw16c(s, blocked.data(), got_y.data(), false);
    cpu_kernels::relu_maxpool2_backward_nchw16c(s, blocked.data(), dy.data(), got_dx.data(), false);
    expect_close("blocked relu+pool y", got_y, y, 0);
    expect_close("blocked relu+pool dx", from_nchw16c(got_dx, s.batch, s.channels, hw), dx, 0);
    // With y and dy blocked too.
    const int out_hw = s.out_h() * s.out_w();
    const Vec blocked_dy = to_nchw16c(dy, s.batch, s.channels, out_hw);
    std::fill(got_y.begin(), got_y.end(), 9.f);
    std::fill(got_dx.begin(), got_dx.end(), 9.f);
    cpu_kernels::relu_maxpool2_forward_nchw16c(s, blocked.data(), got_y.data(), true);
    cpu_kernels::relu_maxpool2_backward_nchw16c(s, blocked.data(), blocked_dy.data(), got_dx.data(),
                                                true);
    expect_close("blocked relu+pool y (blocked)", from_nchw16c(got_y, s.batch, s.channels, out_hw),
                 y, 0);
    expect_close("blocked relu+pool dx (blocked dy)", from_nchw16c(got_dx, s.batch, s.channels, hw),
                 dx, 0);
  }
}

// A conv followed by a relu and a 2x2 max-pool as one call (on cpu the conv's
// output stays blocked where out_c is a multiple of 16; else the layers one
// by one): what ref's three layers give.
TEST_F(BackendPair, ConvReluMaxPoolBlockEqualsTheThreeLayers) {
  const Conv2dShape shapes[] = {
      {4, 1, 28, 28, 16, 5, 5, 1, 2},   // fm-s conv1
      {4, 16, 14, 14, 32, 5, 5, 1, 2},  // fm-s conv2
      {3, 3, 9, 7, 16, 3, 3, 1, 0},     // odd output (7 x 5)
      {2, 4, 8, 8, 6, 3, 3, 1, 1},      // channels not in blocks of 16
  };
  for (const Conv2dShape &s : shapes) {
    SCOPED_TRACE(::testing::Message()
                 << "in " << s.in_c << "x" << s.in_h << "x" << s.in_w << " out " << s.out_c);
    const PoolShape ps = Backend::pool2_after(s);
    const size_t nx = size_t(s.batch) * s.in_c * s.in_h * s.in_w;
    const size_t nw = size_t(s.out_c) * s.in_c * s.kernel_h * s.kernel_w;
    const size_t nc = size_t(s.batch) * s.out_c * s.out_h() * s.out_w();
    const size_t ny = size_t(s.batch) * s.out_c * ps.out_h() * ps.out_w();
    Vec x = random_vec(nx, 17), w = random_vec(nw, 18, -0.2, 0.2), b = random_vec(s.out_c, 19);
    Vec dy = random_vec(ny, 20);
    Vec c(nc), r(nc), y(ny), dc(nc), dr(nc), dx(nx), dw(nw), db(s.out_c);
    ref_.conv2d_relu_maxpool2_forward(s, {}, x.data(), w.data(), b.data(), c.data(), r.data(),
                                      y.data());
    ref_.conv2d_relu_maxpool2_backward(s, {}, x.data(), w.data(), c.data(), r.data(), y.data(),
                                       dy.data(), dc.data(), dr.data(), dx.data(), dw.data(),
                                       db.data());
    float *cx = dev(x), *cw = dev(w), *cb = dev(b), *cdy = dev(dy);
    float *cc = dev(Vec(nc)), *cr = dev(Vec(nc)), *cy = dev(Vec(ny, 9.f));
    float *cdc = dev(Vec(nc)), *cdr = dev(Vec(nc)), *cdx = dev(Vec(nx, 9.f));
    float *cdw = dev(Vec(nw)), *cdb = dev(Vec(s.out_c));
    cpu_->conv2d_relu_maxpool2_forward(s, {}, cx, cw, cb, cc, cr, cy);
    cpu_->conv2d_relu_maxpool2_backward(s, {}, cx, cw, cc, cr, cy, cdy, cdc, cdr, cdx, cdw, cdb);
    expect_close("block y", host(cy, ny), y);
    expect_close("block dx", host(cdx, nx), dx);
    expect_close("block dw", host(cdw, nw), dw);
    expect_close("block db", host(cdb, s.out_c), db);
    // First-block form: no dx.
    cpu_->conv2d_relu_maxpool2_backward(s, {}, cx, cw, cc, cr, cy, cdy, cdc, cdr, nullptr, cdw,
                                        cdb);
    expect_close("block dw (no dx)", host(cdw, nw), dw);
  }
}

// Two conv blocks in a row (fm-s's, and one whose channels are not in blocks
// of 16 between them): the tensors between the blocks may be the backend's
// (on cpu: blocked), what comes out is what ref's layers give.
TEST_F(BackendPair, ChainedConvBlocksEqualTheLayers) {
  struct Chain {
    Conv2dShape first, second;
  };
  const Chain chains[] = {
      {{4, 1, 28, 28, 16, 5, 5, 1, 2}, {4, 16, 14, 14, 32, 5, 5, 1, 2}},
      {{3, 2, 12, 12, 8, 3, 3, 1, 1}, {3, 8, 6, 6, 16, 3, 3, 1, 1}},
  };
  using Links = Backend::BlockLinks;
  for (const Chain &chain : chains) {
    const Conv2dShape &s1 = chain.first, &s2 = chain.second;
    SCOPED_TRACE(::testing::Message()
                 << "channels " << s1.in_c << " " << s1.out_c << " " << s2.out_c);
    auto size = [](int n, int c, int h, int w) { return size_t(n) * c * h * w; };
    const size_t nx = size(s1.batch, s1.in_c, s1.in_h, s1.in_w);
    const size_t nc1 = size(s1.batch, s1.out_c, s1.out_h(), s1.out_w());
    const size_t nm = size(s2.batch, s2.in_c, s2.in_h, s2.in_w);  // between the blocks
    const size_t nc2 = size(s2.batch, s2.out_c, s2.out_h(), s2.out_w());
    const size_t ny = nc2 / 4;
    const size_t nw1k = size_t(s1.out_c) * s1.in_c * s1.kernel_h * s1.kernel_w;
    const size_t nw2k = size_t(s2.out_c) * s2.in_c * s2.kernel_h * s2.kernel_w;
    Vec x = random_vec(nx, 21), w1 = random_vec(nw1k, 22, -0.3, 0.3), b1 = random_vec(s1.out_c, 23);
    Vec w2 = random_vec(nw2k, 24, -0.2, 0.2), b2 = random_vec(s2.out_c, 25);
    Vec dy = random_vec(ny, 26);
    // ref, NCHW throughout.
    Vec c1(nc1), r1(nc1), m(nm), c2(nc2), r2(nc2), y(ny);
    Vec dc1(nc1), dr1(nc1), dm(nm), dc2(nc2), dr2(nc2), dx(nx);
    Vec dw1(nw1k), db1(s1.out_c), dw2(nw2k), db2(s2.out_c);
    ref_.conv2d_relu_maxpool2_forward(s1, {}, x.data(), w1.data(), b1.data(), c1.data(), r1.data(),
                                      m.data());
    ref_.conv2d_relu_maxpool2_forward(s2, {}, m.data(), w2.data(), b2.data(), c2.data(), r2.data(),
                                      y.data());
    ref_.conv2d_relu_maxpool2_backward(s2, {}, m.data(), w2.data(), c2.data(), r2.data(), y.data(),
                                       dy.data(), dc2.data(), dr2.data(), dm.data(), dw2.data(),
                                       db2.data());
    ref_.conv2d_relu_maxpool2_backward(s1, {}, x.data(), w1.data(), c1.data(), r1.data(), m.data(),
                                       dm.data(), dc1.data(), dr1.data(), dx.data(), dw1.data(),
                                       db1.data());
    // cpu, linked.
    float *cx = dev(x), *cw1 = dev(w1), *cb1 = dev(b1), *cw2 = dev(w2), *cb2 = dev(b2);
    float *cdy = dev(dy), *cc1 = dev(Vec(nc1)), *cr1 = dev(Vec(nc1)), *cm = dev(Vec(nm));
    float *cc2 = dev(Vec(nc2)), *cr2 = dev(Vec(nc2)), *cy = dev(Vec(ny, 9.f));
    float *cdc1 = dev(Vec(nc1)), *cdr1 = dev(Vec(nc1)), *cdm = dev(Vec(nm));
    float *cdc2 = dev(Vec(nc2)), *cdr2 = dev(Vec(nc2)), *cdx = dev(Vec(nx, 9.f));
    float *cdw1 = dev(Vec(nw1k)), *cdb1 = dev(Vec(s1.out_c));
    float *cdw2 = dev(Vec(nw2k)), *cdb2 = dev(Vec(s2.out_c));
    const Links first{false, true}, second{true, false};
    cpu_->conv2d_relu_maxpool2_forward(s1, first, cx, cw1, cb1, cc1, cr1, cm);
    cpu_->conv2d_relu_maxpool2_forward(s2, second, cm, cw2, cb2, cc2, cr2, cy);
    cpu_->conv2d_relu_maxpool2_backward(s2, second, cm, cw2, cc2, cr2, cy, cdy, cdc2, cdr2, cdm,
                                        cdw2, cdb2);
    cpu_->conv2d_relu_maxpool2_backward(s1, first, cx, cw1, cc1, cr1, cm, cdm, cdc1, cdr1, cdx,
                                        cdw1, cdb1);
    expect_close("chain y", host(cy, ny), y);
    expect_close("chain dx", host(cdx, nx), dx);
    expect_close("chain dw2", host(cdw2, nw2k), dw2);
    expect_close("chain db2", host(cdb2, s2.out_c), db2);
    expect_close("chain dw1", host(cdw1, nw1k), dw1);
    expect_close("chain db1", host(cdb1, s1.out_c), db1);
  }
}

TEST_F(BackendPair, LinearForwardBackward) {
  const LinearShape s{7, 1568, 128};
  Vec x = random_vec(size_t(s.batch) * s.in, 9),
      w = random_vec(size_t(s.out) * s.in, 10, -.05, .05);
  Vec b = random_vec(s.out, 11), dy = random_vec(size_t(s.batch) * s.out, 12);
  Vec y(dy.size()), dx(x.size()), dw(w.size()), db(s.out);
  ref_.linear_forward(s, x.data(), w.data(), b.data(), y.data());
  ref_.linear_backward(s, x.data(), w.data(), dy.data(), dx.data(), dw.data(), db.data());
  float *cx = dev(x), *cw = dev(w), *cb = dev(b), *cdy = dev(dy);
  float *cy = dev(Vec(y.size())), *cdx = dev(Vec(x.size())), *cdw = dev(Vec(w.size())),
        *cdb = dev(Vec(s.out));
  cpu_->linear_forward(s, cx, cw, cb, cy);
  cpu_->linear_backward(s, cx, cw, cdy, cdx, cdw, cdb);
  expect_close("linear y", host(cy, y.size()), y);
  expect_close("linear dx", host(cdx, x.size()), dx);
  expect_close("linear dw", host(cdw, w.size()), dw);
  expect_close("linear db", host(cdb, s.out), db);
}

TEST_F(BackendPair, SoftmaxCrossEntropy) {
  const int batch = 9, classes = 10;
  Vec z = random_vec(size_t(batch) * classes, 13, -5, 5);
  std::vector<int32_t> labels{0, 1, 2, 3, 4, 5, 6, 7, 9};
  Vec dz(z.size());
  double rl = 0, cl = 0;
  int64_t rc = 0, cc = 0;
  ref_.softmax_xent(batch, classes, z.data(), labels.data(), dz.data(), &rl, &rc);
  float *cz = dev(z), *cdz = dev(Vec(z.size()));
  int32_t *clab = static_cast<int32_t *>(cpu_->alloc(sizeof(int32_t) * batch));
  cpu_->copy_to_device(clab, labels.data(), sizeof(int32_t) * batch);
  cpu_->softmax_xent(batch, classes, cz, clab, cdz, &cl, &cc);
  EXPECT_NEAR(cl, rl, 1e-6 * rl);
  EXPECT_EQ(cc, rc);
  expect_close("dlogits", host(cdz, z.size()), dz);
  cpu_->softmax_xent_eval(batch, classes, cz, clab, &cl, &cc);
  EXPECT_NEAR(cl, rl, 1e-6 * rl);
  cpu_->free(clab);
}

TEST_F(BackendPair, SgdScaleSumSquares) {
  const size_t n = 1003;
  Vec p = random_vec(n, 14), g = random_vec(n, 15), v = random_vec(n, 16);
  Vec rp = p, rv = v;
  SgdStep st{0.1, 0.9, 5e-4};
  ref_.sgd_update(n, st, rp.data(), g.data(), rv.data());
  float *cp = dev(p), *cg = dev(g), *cv = dev(v);
  cpu_->sgd_update(n, st, cp, cg, cv);
  expect_close("sgd params", host(cp, n), rp, 1e-6);
  expect_close("sgd momentum", host(cv, n), rv, 1e-6);
  cpu_->scale(n, 0.5, cg);
  ref_.scale(n, 0.5, g.data());
  expect_close("scale", host(cg, n), g, 0);
  EXPECT_NEAR(cpu_->sum_squares(n, cg), ref_.sum_squares(n, g.data()), 1e-9);
  cpu_->average_into(n, 0.9, cv, cp);
  ref_.average_into(n, 0.9, rv.data(), rp.data());
  expect_close("average_into", host(cv, n), rv, 1e-6);
}

// A few SGD steps of a whole model give the same parameters on both backends.
void expect_same_training(const std::string &model_name, int batch, int steps) {
  ModelSpec spec;
  ASSERT_EQ(find_model(model_name, &spec), kOk);
  RefBackend<float> ref;
  std::unique_ptr<Backend> cpu;
  ASSERT_EQ(make_backend("cpu", BackendOptions{}, &cpu), kOk);
  std::unique_ptr<Model<float>> mr, mc;
  ASSERT_EQ(Model<float>::create(spec, &ref, batch, &mr), kOk);
  ASSERT_EQ(Model<float>::create(spec, cpu.get(), batch, &mc), kOk);
  mr->init_params(3);
  mc->init_params(3);
  const size_t n = mr->param_count();
  float *vr = static_cast<float *>(ref.alloc(n * 4)), *vc = static_cast<float *>(cpu->alloc(n * 4));
  for (int step = 0; step < steps; ++step) {
    Vec images = random_vec(size_t(batch) * mr->image_size(), 100 + step);
    std::vector<int32_t> labels(batch);
    for (int i = 0; i < batch; ++i) labels[i] = (i * 7 + step) % spec.classes;
    double lr_, lc;
    int64_t cr, cc;
    for (auto *m : {mr.get(), mc.get()}) {
      m->load_batch(batch, images.data(), labels.data());
      m->forward(batch);
    }
    mr->loss(batch, &lr_, &cr);
    mc->loss(batch, &lc, &cc);
    EXPECT_NEAR(lc, lr_, 1e-5 * (1 + lr_)) << "loss at step " << step;
    mr->backward(batch);
    mc->backward(batch);
    Vec gr, gc;
    mr->read_grads(&gr);
    mc->read_grads(&gc);
    for (const ParamView &v : mr->layout().views()) {
      Vec a(gc.begin() + v.offset, gc.begin() + v.offset + v.count);
      Vec b(gr.begin() + v.offset, gr.begin() + v.offset + v.count);
      expect_close((model_name + " grad " + v.name).c_str(), a, b, 1e-4);
    }
    SgdStep st{0.05, 0.9, 1e-4};
    ref.sgd_update(n, st, mr->params(), mr->grads(), vr);
    cpu->sgd_update(n, st, mc->params(), mc->grads(), vc);
  }
  Vec pr, pc;
  mr->read_params(&pr);
  mc->read_params(&pc);
  expect_close((model_name + " params after training").c_str(), pc, pr, 1e-4);
  ref.free(vr);
  cpu->free(vc);
}

TEST(WholeModel, FmSTrainingStepsAgree) {
  expect_same_training("fm-s", 8, 3);
}
TEST(WholeModel, CifarCnnTrainingStepsAgree) {
  expect_same_training("cifar-cnn", 4, 2);
}

}  // namespace
}  // namespace quorum::trainer
