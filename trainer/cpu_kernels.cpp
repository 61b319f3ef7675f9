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
}  // namespace

QUORUM_MULTIVERSION
void relu_forward(size_t n, const float *x, float *y) {
  for (size_t i = 0; i < n; ++i) y[i] = std::max(x[i], 0.f);
}

QUORUM_MULTIVERSION
void relu_backward(size_t n, const float *y, const float *dy, float *dx) {
  for (size_t i = 0; i < n; ++i) dx[i] = y[i] > 0.f ? dy[i] : 0.f;
}

QUORUM_MULTIVERSION
void maxpool2_forward(const PoolShape &s, const float *x, float *y) {
  const int oh = s.out_h(), ow = s.out_w();
  for (size_t p = 0; p < size_t(s.batch) * s.channels; ++p) {
    const float *plane = x + p * s.in_h * s.in_w;
    float *out = y + p * oh * ow;
    for (int i = 0; i < oh; ++i) {
      const float *r0 = plane + size_t(2 * i) * s.in_w, *r1 = r0 + s.in_w;
      for (int j = 0; j < ow; ++j) {
        float m0 = std::max(r0[2 * j + 1], r0[2 * j]);
        float m1 = std::max(r1[2 * j + 1], r1[2 * j]);
        out[i * ow + j] = std::max(m1, m0);
      }
    }
  }
}

QUORUM_MULTIVERSION
void maxpool2_backward(const PoolShape &s, const float *x, const float *y, const float *dy,
                       float *dx) {
  const int oh = s.out_h(), ow = s.out_w();
  for (size_t p = 0; p < size_t(s.batch) * s.channels; ++p) {
    const float *plane = x + p * s.in_h * s.in_w;
    float *dplane = dx + p * s.in_h * s.in_w;
    const float *g = dy + p * oh * ow, *m = y + p * oh * ow;
    if (s.in_h % 2 || s.in_w % 2)  // odd sizes: the last row/column gets no gradient
      std::memset(dplane, 0, sizeof(float) * s.in_h * s.in_w);
    for (int i = 0; i < oh; ++i) {
      const float *r0 = plane + size_t(2 * i) * s.in_w, *r1 = r0 + s.in_w;
      float *d0 = dplane + size_t(2 * i) * s.in_w, *d1 = d0 + s.in_w;
      for (int j = 0; j < ow; ++j) {
        // The forward output is the window's maximum; the first element equal to
        // it (row-major) takes the gradient, as in `ref`. Bit masks, not selects:
        // the compiler turns selects into branches that mispredict on real data.
        const float mx = m[i * ow + j];
        const uint32_t gv = bits(g[i * ow + j]);
        const uint32_t ta = r0[2 * j] == mx;
        const uint32_t tb = (ta ^ 1u) & (r0[2 * j + 1] == mx);
        const uint32_t tc = ((ta | tb) ^ 1u) & (r1[2 * j] == mx);
        const uint32_t td = (ta | tb | tc) ^ 1u;
        d0[2 * j] = from_bits(gv & (0u - ta));
        d0[2 * j + 1] = from_bits(gv & (0u - tb));
        d1[2 * j] = from_bits(gv & (0u - tc));
        d1[2 * j + 1] = from_bits(gv & (0u - td));
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
