// cpu_kernels.cpp: see cpu_kernels.hpp.
#include "trainer/cpu_kernels.hpp"

#include <algorithm>
#include <cstdint>
#include <cstring>

// (Not under ThreadSanitizer: ifunc resolvers run before its runtime starts.)
#if defined(__x86_64__) && defined(__GNUC__) && !defined(__clang__) && !defined(__SANITIZE_THREAD__)
#define QUORUM_MULTIVERSION __attribute__((target_clones("avx512f", "avx2", "default")))
#else
#define QUORUM_MULTIVERSION
#endif

#if defined(__x86_64__) && defined(__GNUC__)
#include <immintrin.h>
#define QUORUM_POOL_AVX512 1
#else
#define QUORUM_POOL_AVX512 0
#endif

namespace quorum::trainer::cpu_kernels {

namespace {
inline uint32_t bits(float f) {
  uint32_t u;
  std::memcpy(&u, &f, sizeof u);
  return u;
}
inline float from_bits(uint32_t u) {
  float f;
  std::memcpy(&f, &u, sizeof f);
  return f;
}

// A 2x2 window's maximum (w0, w1: its top row; w2, w3: its bottom row).
inline float window_max(float w0, float w1, float w2, float w3) {
  return std::max(std::max(w3, w2), std::max(w1, w0));
}

// ReLU as `ref` computes it: v where v > 0, else +0 (also for -0 and NaN).
inline float relu_value(float v) {
  return v > 0.f ? v : 0.f;
}

// The window's maximum after a ReLU: what `ref`'s relu then max-pool give,
// NaN inputs included (they become 0 before the maximum is taken).
inline float relu_window_max(float w0, float w1, float w2, float w3) {
  return window_max(relu_value(w0), relu_value(w1), relu_value(w2), relu_value(w3));
}

// The window's gradient: g on its first element (row-major) equal to mx where
// `passes` is 1, zero elsewhere (the last element takes it when no other
// does, so it is not read). Bit masks, not selects: the compiler turns
// selects into branches that mispredict on real data.
struct WindowGrad {
  float d0, d1, d2, d3;
};
inline WindowGrad route_to_first_max(float g, uint32_t passes, float mx, float w0, float w1,
                                     float w2) {
  const uint32_t gv = bits(g) & (0u - passes);
  const uint32_t t0 = w0 == mx;
  const uint32_t t1 = (t0 ^ 1u) & (w1 == mx);
  const uint32_t t2 = ((t0 | t1) ^ 1u) & (w2 == mx);
  const uint32_t t3 = (t0 | t1 | t2) ^ 1u;
  return {from_bits(gv & (0u - t0)), from_bits(gv & (0u - t1)), from_bits(gv & (0u - t2)),
          from_bits(gv & (0u - t3))};
}
}  // namespace

QUORUM_MULTIVERSION
void relu_forward(size_t n, const float *x, float *y) {
  for (size_t i = 0; i < n; ++i) y[i] = relu_value(x[i]);
}

QUORUM_MULTIVERSION
void relu_backward(size_t n, const float *y, const float *dy, float *dx) {
  for (size_t i = 0; i < n; ++i) dx[i] = y[i] > 0.f ? dy[i] : 0.f;
}

namespace {

// y = the 2x2 windows' maxima of x, or with `relu` those of relu(x): the
// maximum where it is > 0, else 0 (what `ref` gives for a relu layer followed
// by this pool). `row(ow, r0, r1, out, relu)` does one output row.
template <typename Row>
void maxpool2_forward_planes(const PoolShape &s, const float *x, float *y, bool relu, Row row) {
  const int oh = s.out_h(), ow = s.out_w();
  for (size_t p = 0; p < size_t(s.batch) * s.channels; ++p) {
    const float *plane = x + p * s.in_h * s.in_w;
    for (int i = 0; i < oh; ++i) {
      const float *r0 = plane + size_t(2 * i) * s.in_w;
      row(ow, r0, r0 + s.in_w, y + (p * oh + i) * ow, relu);
    }
  }
}

QUORUM_MULTIVERSION
void maxpool2_forward_row(int ow, const float *r0, const float *r1, float *out, bool relu) {
  for (int j = 0; j < ow; ++j) {
    const float a = r0[2 * j], b = r0[2 * j + 1], c = r1[2 * j], d = r1[2 * j + 1];
    out[j] = relu ? relu_window_max(a, b, c, d) : window_max(a, b, c, d);
  }
}

#if QUORUM_POOL_AVX512
// Whether this CPU runs the AVX-512 row kernels below (asked once).
bool has_avx512() {
  static const bool avx512 = __builtin_cpu_supports("avx512f");
  return avx512;
}

__mmask16 first_lanes(int n) {
  return static_cast<__mmask16>((1u << n) - 1);
}

// A row's input pairs (2j, 2j + 1) for j in [j0, j0 + 16): the even and the
// odd elements, masked at the row's end (zeros past it).
struct PairsAvx512 {
  __m512 even, odd;
};
__attribute__((target("avx512f"))) PairsAvx512 load_pairs_avx512(const float *row, int n) {
  const __m512i even = _mm512_setr_epi32(0, 2, 4, 6, 8, 10, 12, 14, 16, 18, 20, 22, 24, 26, 28, 30);
  const __m512i odd = _mm512_setr_epi32(1, 3, 5, 7, 9, 11, 13, 15, 17, 19, 21, 23, 25, 27, 29, 31);
  const __m512 lo = _mm512_maskz_loadu_ps(first_lanes(std::min(16, 2 * n)), row);
  const __m512 hi = _mm512_maskz_loadu_ps(first_lanes(std::max(0, 2 * n - 16)), row + 16);
  return {_mm512_permutex2var_ps(lo, even, hi), _mm512_permutex2var_ps(lo, odd, hi)};
}

// The forward row with AVX-512, 16 outputs at a time (see the backward's).
__attribute__((target("avx512f"))) void maxpool2_forward_row_avx512(int ow, const float *r0,
                                                                    const float *r1, float *out,
                                                                    bool relu) {
  for (int j = 0; j < ow; j += 16) {
    const int n = std::min(16, ow - j);
    const PairsAvx512 a = load_pairs_avx512(r0 + 2 * j, n), b = load_pairs_avx512(r1 + 2 * j, n);
    // maskz_max with every lane, not max: GCC 12 warns that max's undefined
    // pass-through operand may be used uninitialized.
    const __mmask16 all = 0xffff;
    __m512 a0 = a.even, a1 = a.odd, b0 = b.even, b1 = b.odd;
    if (relu) {
      // max(v, 0) gives its second operand where v is NaN: +0, as relu_value.
      const __m512 zero = _mm512_setzero_ps();
      a0 = _mm512_maskz_max_ps(all, a0, zero), a1 = _mm512_maskz_max_ps(all, a1, zero);
      b0 = _mm512_maskz_max_ps(all, b0, zero), b1 = _mm512_maskz_max_ps(all, b1, zero);
    }
    const __m512 m = _mm512_maskz_max_ps(all, _mm512_maskz_max_ps(all, a1, a0),
                                         _mm512_maskz_max_ps(all, b1, b0));
    _mm512_mask_storeu_ps(out + j, first_lanes(n), m);
  }
}
#endif

void maxpool2_forward_dispatch(const PoolShape &s, const float *x, float *y, bool relu) {
#if QUORUM_POOL_AVX512
  if (has_avx512()) return maxpool2_forward_planes(s, x, y, relu, maxpool2_forward_row_avx512);
#endif
  maxpool2_forward_planes(s, x, y, relu, maxpool2_forward_row);
}

}  // namespace

void maxpool2_forward(const PoolShape &s, const float *x, float *y) {
  maxpool2_forward_dispatch(s, x, y, false);
}

void relu_maxpool2_forward(const PoolShape &s, const float *x, float *y) {
  maxpool2_forward_dispatch(s, x, y, true);
}

void maxpool2_forward_portable(const PoolShape &s, const float *x, float *y, bool relu) {
  maxpool2_forward_planes(s, x, y, relu, maxpool2_forward_row);
}

namespace {

// Rows i of one plane's 2x2 max-pool backward: the first element of each
// window (row-major) equal to the forward output takes the gradient, as in
// `ref`; with `relu` (y from relu_maxpool2_forward) only where that output is
// > 0, as relu's backward would leave it. `row(ow, r0, r1, m, g, d0, d1,
// relu)` does one output row (input rows r0, r1).
template <typename Row>
void maxpool2_backward_planes(const PoolShape &s, const float *x, const float *y, const float *dy,
                              float *dx, bool relu, Row row) {
  const int oh = s.out_h(), ow = s.out_w();
  for (size_t p = 0; p < size_t(s.batch) * s.channels; ++p) {
    const float *plane = x + p * s.in_h * s.in_w;
    float *dplane = dx + p * s.in_h * s.in_w;
    const float *g = dy + p * oh * ow, *m = y + p * oh * ow;
    if (s.in_h % 2 || s.in_w % 2)  // odd sizes: the last row/column gets no gradient
      std::memset(dplane, 0, sizeof(float) * s.in_h * s.in_w);
    for (int i = 0; i < oh; ++i) {
      const float *r0 = plane + size_t(2 * i) * s.in_w;
      float *d0 = dplane + size_t(2 * i) * s.in_w;
      row(ow, r0, r0 + s.in_w, m + i * ow, g + i * ow, d0, d0 + s.in_w, relu);
    }
  }
}

// One output row, plain loops for the compiler to vectorise.
QUORUM_MULTIVERSION
void maxpool2_backward_row(int ow, const float *r0, const float *r1, const float *m, const float *g,
                           float *d0, float *d1, bool relu) {
  for (int j = 0; j < ow; ++j) {
    const float mx = m[j];
    const WindowGrad d =
        route_to_first_max(g[j], !relu | (mx > 0.f), mx, r0[2 * j], r0[2 * j + 1], r1[2 * j]);
    d0[2 * j] = d.d0;
    d0[2 * j + 1] = d.d1;
    d1[2 * j] = d.d2;
    d1[2 * j + 1] = d.d3;
  }
}

#if QUORUM_POOL_AVX512
// The same row with AVX-512, 16 outputs at a time and masked at the row's end:
// fm-s's rows are 14 and 7 outputs wide, too short for the vectorised loop
// above (at 16 lanes it runs none of them through its vector body).
__attribute__((target("avx512f"))) void maxpool2_backward_row_avx512(int ow, const float *r0,
                                                                     const float *r1,
                                                                     const float *m, const float *g,
                                                                     float *d0, float *d1,
                                                                     bool relu) {
  const __m512i low = _mm512_setr_epi32(0, 16, 1, 17, 2, 18, 3, 19, 4, 20, 5, 21, 6, 22, 7, 23);
  const __m512i high =
      _mm512_setr_epi32(8, 24, 9, 25, 10, 26, 11, 27, 12, 28, 13, 29, 14, 30, 15, 31);
  for (int j = 0; j < ow; j += 16) {
    const int n = std::min(16, ow - j);
    const __mmask16 k = first_lanes(n);
    const __mmask16 k_lo = first_lanes(std::min(16, 2 * n));
    const __mmask16 k_hi = first_lanes(std::max(0, 2 * n - 16));
    const int at = 2 * j;
    const PairsAvx512 a = load_pairs_avx512(r0 + at, n), b = load_pairs_avx512(r1 + at, n);
    const __m512 mx = _mm512_maskz_loadu_ps(k, m + j);
    const __mmask16 passes =
        relu ? _mm512_cmp_ps_mask(mx, _mm512_setzero_ps(), _CMP_GT_OQ) : __mmask16(0xffff);
    const __m512 gv = _mm512_maskz_loadu_ps(k & passes, g + j);
    const __mmask16 ta = _mm512_cmp_ps_mask(a.even, mx, _CMP_EQ_OQ);
    const __mmask16 tb = static_cast<__mmask16>(~ta & _mm512_cmp_ps_mask(a.odd, mx, _CMP_EQ_OQ));
    const __mmask16 tc =
        static_cast<__mmask16>(~(ta | tb) & _mm512_cmp_ps_mask(b.even, mx, _CMP_EQ_OQ));
    const __mmask16 td = static_cast<__mmask16>(~(ta | tb | tc));
    const __m512 ga = _mm512_maskz_mov_ps(ta, gv), gb = _mm512_maskz_mov_ps(tb, gv);
    const __m512 gc = _mm512_maskz_mov_ps(tc, gv), gd = _mm512_maskz_mov_ps(td, gv);
    _mm512_mask_storeu_ps(d0 + at, k_lo, _mm512_permutex2var_ps(ga, low, gb));
    _mm512_mask_storeu_ps(d0 + at + 16, k_hi, _mm512_permutex2var_ps(ga, high, gb));
    _mm512_mask_storeu_ps(d1 + at, k_lo, _mm512_permutex2var_ps(gc, low, gd));
    _mm512_mask_storeu_ps(d1 + at + 16, k_hi, _mm512_permutex2var_ps(gc, high, gd));
  }
}
#endif

}  // namespace

namespace {

void maxpool2_backward_dispatch(const PoolShape &s, const float *x, const float *y, const float *dy,
                                float *dx, bool relu) {
#if QUORUM_POOL_AVX512
  if (has_avx512())
    return maxpool2_backward_planes(s, x, y, dy, dx, relu, maxpool2_backward_row_avx512);
#endif
  maxpool2_backward_planes(s, x, y, dy, dx, relu, maxpool2_backward_row);
}

}  // namespace

void maxpool2_backward(const PoolShape &s, const float *x, const float *y, const float *dy,
                       float *dx) {
  maxpool2_backward_dispatch(s, x, y, dy, dx, false);
}

void relu_maxpool2_backward(const PoolShape &s, const float *x, const float *y, const float *dy,
                            float *dx) {
  maxpool2_backward_dispatch(s, x, y, dy, dx, true);
}

void maxpool2_backward_portable(const PoolShape &s, const float *x, const float *y, const float *dy,
                                float *dx, bool relu) {
  maxpool2_backward_planes(s, x, y, dy, dx, relu, maxpool2_backward_row);
}

// The blocked layout's 2x2 windows: for output (i, j) of channel block cb of
// image n, the four inputs' 16 channels each start at in + w00 + {0, 16,
// 16 in_w, 16 in_w + 16}; an output in NCHW has one plane per channel, in
// nChw16c 16 channels per position.
namespace {
constexpr int kBlock = 16;
struct BlockedPlanes {
  int blocks, oh, ow;
  size_t in_plane, out_plane;  // one block's input (x 16 channels), one channel's output
  size_t row;                  // one input row of a block
  explicit BlockedPlanes(const PoolShape &s)
      : blocks(s.channels / kBlock),
        oh(s.out_h()),
        ow(s.out_w()),
        in_plane(size_t(s.in_h) * s.in_w * kBlock),
        out_plane(size_t(oh) * ow),
        row(size_t(s.in_w) * kBlock) {}
};
}  // namespace

QUORUM_MULTIVERSION
void relu_maxpool2_forward_nchw16c(const PoolShape &s, const float *x, float *y, bool y_blocked) {
  const BlockedPlanes b(s);
  for (size_t nb = 0; nb < size_t(s.batch) * b.blocks; ++nb) {
    const float *in = x + nb * b.in_plane;
    float *out = y + nb * kBlock * b.out_plane;
    for (int i = 0; i < b.oh; ++i)
      for (int j = 0; j < b.ow; ++j) {
        const float *w00 = in + size_t(2 * i) * b.row + size_t(2 * j) * kBlock;
        const size_t at = size_t(i) * b.ow + j;
        float m[kBlock];
        for (int k = 0; k < kBlock; ++k) {
          m[k] = relu_window_max(w00[k], w00[kBlock + k], w00[b.row + k], w00[b.row + kBlock + k]);
        }
        if (y_blocked) {
          std::memcpy(out + at * kBlock, m, sizeof m);
        } else {
          for (int k = 0; k < kBlock; ++k) out[k * b.out_plane + at] = m[k];
        }
      }
  }
}

QUORUM_MULTIVERSION
void relu_maxpool2_backward_nchw16c(const PoolShape &s, const float *x, const float *dy, float *dx,
                                    bool dy_blocked) {
  const BlockedPlanes b(s);
  for (size_t nb = 0; nb < size_t(s.batch) * b.blocks; ++nb) {
    const float *in = x + nb * b.in_plane;
    const float *grad = dy + nb * kBlock * b.out_plane;
    float *din = dx + nb * b.in_plane;
    if (s.in_h % 2 || s.in_w % 2)  // odd sizes: the last row/column gets no gradient
      std::memset(din, 0, sizeof(float) * b.in_plane);
    for (int i = 0; i < b.oh; ++i)
      for (int j = 0; j < b.ow; ++j) {
        const size_t in_at = size_t(2 * i) * b.row + size_t(2 * j) * kBlock;
        const size_t at = size_t(i) * b.ow + j;
        const float *w00 = in + in_at;
        float *d00 = din + in_at;
        float g[kBlock];
        if (dy_blocked) {
          std::memcpy(g, grad + at * kBlock, sizeof g);
        } else {
          for (int k = 0; k < kBlock; ++k) g[k] = grad[k * b.out_plane + at];
        }
        // As maxpool2_backward_row with relu: the first maximum wins where it is > 0.
        for (int k = 0; k < kBlock; ++k) {
          const float w0 = w00[k], w1 = w00[kBlock + k];
          const float w2 = w00[b.row + k], w3 = w00[b.row + kBlock + k];
          const float mx = relu_window_max(w0, w1, w2, w3);
          const WindowGrad d = route_to_first_max(g[k], mx > 0.f, mx, w0, w1, w2);
          d00[k] = d.d0;
          d00[kBlock + k] = d.d1;
          d00[b.row + k] = d.d2;
          d00[b.row + kBlock + k] = d.d3;
        }
      }
  }
}

QUORUM_MULTIVERSION
void bias_grad(int batch, int out, const float *dy, float *db) {
  std::fill(db, db + out, 0.f);
  for (int n = 0; n < batch; ++n)
    for (int o = 0; o < out; ++o) db[o] += dy[size_t(n) * out + o];
}

QUORUM_MULTIVERSION
void sgd_update(size_t n, float lr, float momentum, float weight_decay, float *params,
                const float *grads, float *velocity) {
  for (size_t i = 0; i < n; ++i) {
    float g = grads[i] + weight_decay * params[i];
    velocity[i] = momentum * velocity[i] + g;
    params[i] -= lr * velocity[i];
  }
}

QUORUM_MULTIVERSION
void scale(size_t n, float alpha, float *y) {
  for (size_t i = 0; i < n; ++i) y[i] *= alpha;
}

QUORUM_MULTIVERSION
void average_into(size_t n, float decay, float rest, float *avg, const float *x) {
  for (size_t i = 0; i < n; ++i) avg[i] = decay * avg[i] + rest * x[i];
}

}  // namespace quorum::trainer::cpu_kernels
