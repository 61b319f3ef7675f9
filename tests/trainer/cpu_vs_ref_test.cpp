// cpu_vs_ref_test.cpp: the cpu backend agrees with the ref backend (float): the
// checks every backend passes (backend_checks.hpp: each layer forward and
// backward, the loss, SGD, the memory calls, whole training steps), plus the
// cpu backend's own paths: the portable max-pool loops beside the AVX-512 ones,
// relu + max-pool on oneDNN's blocked layout, and conv blocks that keep their
// activations blocked between them.
//
// Tolerances are relative to the magnitude of the reference values: the
// backends sum in different orders (oneDNN and OpenBLAS block their loops).
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <memory>
#include <vector>

#include "tests/trainer/backend_checks.hpp"
#include "trainer/cpu_kernels.hpp"

namespace quorum::trainer::checks {
namespace {

// The cpu backend's own paths, on buffers from its allocator.
class CpuPaths : public BackendVsRef {
 protected:
  void SetUp() override {
    BackendVsRef::SetUp();
    buffers_ = std::make_unique<DeviceBuffers>(be_.get());
  }
  void TearDown() override {
    buffers_.reset();
    BackendVsRef::TearDown();
  }
  float *dev(const Vec &host) { return buffers_->put(host); }
  Vec host(const float *p, size_t n) { return buffers_->get(p, n); }
  Backend *cpu() { return be_.get(); }
  std::unique_ptr<DeviceBuffers> buffers_;
};

// 2x2 shapes: fm-s's first pool (rows of 14 outputs), odd sizes, rows of 35
// outputs (more than one 16-lane block and a partial one).
const PoolShape kPoolShapes[] = {PoolShape{3, 4, 28, 28, 2}, PoolShape{2, 3, 7, 9, 2},
                                 PoolShape{1, 2, 6, 70, 2}};

// The portable loops, which the backend takes where the CPU has no AVX-512
// (BackendVsRef checks the path it takes here).
TEST(CpuKernels, PortableMaxPoolEqualsRef) {
  RefBackend<float> ref;
  for (PoolShape s : kPoolShapes) {
    const size_t nx = size_t(s.batch) * s.channels * s.in_h * s.in_w;
    const size_t ny = size_t(s.batch) * s.channels * s.out_h() * s.out_w();
    Vec x = random_vec(nx, 7), dy = random_vec(ny, 8), y(ny), dx(nx);
    for (size_t i = 0; i < nx; i += 3) x[i] = 0.25f;  // many ties: the first maximum must win
    ref.maxpool_forward(s, x.data(), y.data());
    ref.maxpool_backward(s, x.data(), y.data(), dy.data(), dx.data());
    Vec portable_y(ny, 9.f), portable(nx, 9.f);
    cpu_kernels::maxpool2_forward_portable(s, x.data(), portable_y.data());
    expect_close("pool y (portable)", portable_y, y, 0);
    cpu_kernels::maxpool2_backward_portable(s, x.data(), y.data(), dy.data(), portable.data());
    expect_close("pool dx (portable)", portable, dx, 0);
  }
}

// NaN at each of the four places of a 2x2 window (the windows (0, 0), (0, 1),
// (1, 0) and (1, 1) of NCHW plane `plane`), the other three positive, so the
// result shows whether relu turned it into 0 before the maximum, as in `ref`.
void plant_nans(Vec *x, const PoolShape &s, size_t plane) {
  ASSERT_GE(s.in_h, 4);
  ASSERT_GE(s.in_w, 4);
  float *p = x->data() + plane * s.in_h * s.in_w;
  for (int k = 0; k < 4; ++k) {
    float *w00 = p + size_t(2 * (k / 2)) * s.in_w + 2 * (k % 2);
    float *at[4] = {w00, w00 + 1, w00 + s.in_w, w00 + s.in_w + 1};
    for (int q = 0; q < 4; ++q) *at[q] = 0.5f + 0.125f * q;
    *at[k] = NAN;
  }
}

// A relu followed by a 2x2 max-pool, fused on cpu (the relu's output never
// written): what ref's two layers give, with ties, zeros, a NaN and windows
// whose maximum is <= 0 (no gradient passes there).
TEST_F(CpuPaths, ReluMaxPoolFusedEqualsTheTwoLayers) {
  for (PoolShape s : kPoolShapes) {
    const size_t nx = size_t(s.batch) * s.channels * s.in_h * s.in_w;
    const size_t ny = size_t(s.batch) * s.channels * s.out_h() * s.out_w();
    Vec x = random_vec(nx, 13);
    for (size_t i = 0; i < nx; i += 3) x[i] = 0.25f;
    for (size_t i = 1; i < nx; i += 5) x[i] = 0.f;
    for (size_t i = 0; i < nx / 4; ++i) x[i] = -std::fabs(x[i]);  // all <= 0 there
    plant_nans(&x, s, size_t(s.batch) * s.channels / 2);
    Vec dy = random_vec(ny, 14), r(nx), y(ny), dr(nx), dx(nx);
    ref_.relu_forward(nx, x.data(), r.data());
    ref_.maxpool_forward(s, r.data(), y.data());
    ref_.maxpool_backward(s, r.data(), y.data(), dy.data(), dr.data());
    ref_.relu_backward(nx, r.data(), dr.data(), dx.data());
    float *cx = dev(x), *cr = dev(Vec(nx)), *cy = dev(Vec(ny, 9.f)), *cdy = dev(dy);
    float *cdr = dev(Vec(nx)), *cdx = dev(Vec(nx, 9.f));
    cpu()->relu_maxpool2_forward(s, cx, cr, cy);
    cpu()->relu_maxpool2_backward(s, cx, cr, cy, cdy, cdr, cdx);
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
// layers give on the same values in NCHW, with ties, zeros, a NaN, windows <= 0
// and odd sizes (the last row and column get no gradient).
TEST_F(CpuPaths, ReluMaxPoolOnBlockedLayoutEqualsTheTwoLayers) {
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
    plant_nans(&x, s, size_t(s.batch) * s.channels / 2);
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
TEST_F(CpuPaths, ConvReluMaxPoolBlockEqualsTheThreeLayers) {
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
    cpu()->conv2d_relu_maxpool2_forward(s, {}, cx, cw, cb, cc, cr, cy);
    cpu()->conv2d_relu_maxpool2_backward(s, {}, cx, cw, cc, cr, cy, cdy, cdc, cdr, cdx, cdw, cdb);
    expect_close("block y", host(cy, ny), y);
    expect_close("block dx", host(cdx, nx), dx);
    expect_close("block dw", host(cdw, nw), dw);
    expect_close("block db", host(cdb, s.out_c), db);
    // First-block form: no dx.
    cpu()->conv2d_relu_maxpool2_backward(s, {}, cx, cw, cc, cr, cy, cdy, cdc, cdr, nullptr, cdw,
                                         cdb);
    expect_close("block dw (no dx)", host(cdw, nw), dw);
  }
}

// Two conv blocks in a row (fm-s's, and one whose channels are not in blocks
// of 16 between them): the tensors between the blocks may be the backend's
// (on cpu: blocked), what comes out is what ref's layers give.
TEST_F(CpuPaths, ChainedConvBlocksEqualTheLayers) {
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
    cpu()->conv2d_relu_maxpool2_forward(s1, first, cx, cw1, cb1, cc1, cr1, cm);
    cpu()->conv2d_relu_maxpool2_forward(s2, second, cm, cw2, cb2, cc2, cr2, cy);
    cpu()->conv2d_relu_maxpool2_backward(s2, second, cm, cw2, cc2, cr2, cy, cdy, cdc2, cdr2, cdm,
                                         cdw2, cdb2);
    cpu()->conv2d_relu_maxpool2_backward(s1, first, cx, cw1, cc1, cr1, cm, cdm, cdc1, cdr1, cdx,
                                         cdw1, cdb1);
    expect_close("chain y", host(cy, ny), y);
    expect_close("chain dx", host(cdx, nx), dx);
    expect_close("chain dw2", host(cdw2, nw2k), dw2);
    expect_close("chain db2", host(cdb2, s2.out_c), db2);
    expect_close("chain dw1", host(cdw1, nw1k), dw1);
    expect_close("chain db1", host(cdb1, s1.out_c), db1);
  }
}

}  // namespace
}  // namespace quorum::trainer::checks

int main(int argc, char **argv) {
  using namespace quorum::trainer;
  checks::target().make = [](size_t) -> std::unique_ptr<Backend> {
    std::unique_ptr<Backend> be;
    if (make_backend("cpu", BackendOptions{}, &be) != quorum::kOk)
      ADD_FAILURE() << quorum::last_error();
    return be;
  };
  checks::target().error = [](Backend &) { return quorum::kOk; };  // no sticky errors on cpu
  ::testing::InitGoogleTest(&argc, argv);
  return RUN_ALL_TESTS();
}
