// kernel_ops.hpp: the element-wise work of the cuda backend, one functor per kernel.
//
// Each functor computes one output element (or one row) from its index, and is
// compiled both for the device (by nvcc, in cuda_kernels.cu, where a grid-stride
// kernel calls it) and for the host (by the C++ compiler, in the emulation test
// that runs the whole backend on the CPU). Keeping the index arithmetic here, in
// one place, is what lets a machine without a GPU check it against `ref`.
//
// No CUDA headers: plain C++ that nvcc also accepts. Comparisons mirror
// ref_backend.hpp exactly (strict >, first maximum wins) so ties and NaNs behave
// the same on every backend.
#pragma once

#include <cmath>
#include <cstddef>
#include <cstdint>

#if defined(__CUDACC__)
#define QUORUM_HD __host__ __device__
#else
#define QUORUM_HD
#endif

namespace quorum::trainer::kernels {

// Geometry of one conv2d call, with the derived sizes the kernels need.
struct ConvGeom {
  int in_c = 0, in_h = 0, in_w = 0;
  int out_c = 0, kernel_h = 0, kernel_w = 0;
  int stride = 1, pad = 0;
  int out_h = 0, out_w = 0;
  QUORUM_HD size_t plane() const { return size_t(out_h) * out_w; }               // P
  QUORUM_HD size_t patch() const { return size_t(in_c) * kernel_h * kernel_w; }  // K
  QUORUM_HD size_t image() const { return size_t(in_c) * in_h * in_w; }
};

// col[K][nb*P] from nb images x[nb][in_c][in_h][in_w]: column (n, p) holds the
// input patch under output pixel p of image n (zero outside the padding).
struct Im2col {
  static constexpr const char *kName = "im2col";
  ConvGeom g;
  int nb = 0;
  const float *x = nullptr;
  float *col = nullptr;
  QUORUM_HD void operator()(size_t i) const {
    const size_t np = size_t(nb) * g.plane();
    const size_t k = i / np, r = i % np;
    const size_t n = r / g.plane(), p = r % g.plane();
    const int oi = int(p / g.out_w), oj = int(p % g.out_w);
    const int kk = int(k % (size_t(g.kernel_h) * g.kernel_w));
    const int c = int(k / (size_t(g.kernel_h) * g.kernel_w));
    const int yi = oi * g.stride - g.pad + kk / g.kernel_w;
    const int xj = oj * g.stride - g.pad + kk % g.kernel_w;
    float v = 0.f;
    if (yi >= 0 && yi < g.in_h && xj >= 0 && xj < g.in_w)
      v = x[((n * g.in_c + c) * g.in_h + yi) * g.in_w + xj];
    col[i] = v;
  }
};

// dx[nb][in_c][in_h][in_w] (overwritten) from dcol[K][nb*P]: each input element
// gathers the patch entries that read it (no atomics, a fixed order).
struct Col2im {
  static constexpr const char *kName = "col2im";
  ConvGeom g;
  int nb = 0;
  const float *dcol = nullptr;
  float *dx = nullptr;
  QUORUM_HD void operator()(size_t i) const {
    const int w = int(i % g.in_w);
    const int h = int((i / g.in_w) % g.in_h);
    const int c = int((i / (size_t(g.in_w) * g.in_h)) % g.in_c);
    const size_t n = i / g.image();
    const size_t np = size_t(nb) * g.plane();
    float acc = 0.f;
    for (int ki = 0; ki < g.kernel_h; ++ki) {
      const int ty = h + g.pad - ki;
      if (ty < 0 || ty % g.stride != 0) continue;
      const int oi = ty / g.stride;
      if (oi >= g.out_h) continue;
      for (int kj = 0; kj < g.kernel_w; ++kj) {
        const int tx = w + g.pad - kj;
        if (tx < 0 || tx % g.stride != 0) continue;
        const int oj = tx / g.stride;
        if (oj >= g.out_w) continue;
        const size_t k = (size_t(c) * g.kernel_h + ki) * g.kernel_w + kj;
        acc += dcol[k * np + n * g.plane() + size_t(oi) * g.out_w + oj];
      }
    }
    dx[i] = acc;
  }
};

// cnp[C][nb*P] from nchw[nb][C][P] (the GEMMs want channels outermost).
struct NchwToCnp {
  static constexpr const char *kName = "nchw_to_cnp";
  int channels = 0, nb = 0;
  size_t plane = 0;
  const float *nchw = nullptr;
  float *cnp = nullptr;
  QUORUM_HD void operator()(size_t i) const {
    const size_t np = size_t(nb) * plane;
    const size_t c = i / np, r = i % np;
    const size_t n = r / plane, p = r % plane;
    cnp[i] = nchw[(n * channels + c) * plane + p];
  }
};

// nchw[nb][C][P] = cnp[C][nb*P] + bias[C] (the conv forward's last step).
struct CnpToNchwBias {
  static constexpr const char *kName = "cnp_to_nchw_bias";
  int channels = 0, nb = 0;
  size_t plane = 0;
  const float *cnp = nullptr;
  const float *bias = nullptr;
  float *nchw = nullptr;
  QUORUM_HD void operator()(size_t i) const {
    const size_t n = i / (size_t(channels) * plane);
    const size_t c = (i / plane) % channels, p = i % plane;
    nchw[i] = cnp[c * (size_t(nb) * plane) + n * plane + p] + bias[c];
  }
};

// y[batch][out] = bias[out] (the linear GEMM then adds x W^T with beta = 1).
struct BroadcastBias {
  static constexpr const char *kName = "broadcast_bias";
  int out = 0;
  const float *bias = nullptr;
  float *y = nullptr;
  QUORUM_HD void operator()(size_t i) const { y[i] = bias[i % size_t(out)]; }
};

// relu(v) as `ref` computes it (NaN and -0 give +0); the fused pool uses it too.
QUORUM_HD inline float relu_value(float v) {
  return v > 0.f ? v : 0.f;
}

struct ReluForward {
  static constexpr const char *kName = "relu_forward";
  const float *x = nullptr;
  float *y = nullptr;
  QUORUM_HD void operator()(size_t i) const { y[i] = relu_value(x[i]); }
};

struct ReluBackward {
  static constexpr const char *kName = "relu_backward";
  const float *y = nullptr, *dy = nullptr;
  float *dx = nullptr;
  QUORUM_HD void operator()(size_t i) const { dx[i] = y[i] > 0.f ? dy[i] : 0.f; }
};

// Pooling geometry: window == stride, no padding, floor on odd sizes.
struct PoolGeom {
  int in_h = 0, in_w = 0, window = 2, out_h = 0, out_w = 0;
  // Index within the input plane of the first maximum (row-major) of window
  // (oi, oj), of relu(plane) where relu is set (the fused relu + max-pool).
  QUORUM_HD size_t argmax(const float *plane, int oi, int oj, bool relu) const {
    size_t best = size_t(oi * window) * in_w + size_t(oj * window);
    float best_v = value(plane[best], relu);
    for (int a = 0; a < window; ++a)
      for (int c = 0; c < window; ++c) {
        const size_t idx = size_t(oi * window + a) * in_w + size_t(oj * window + c);
        const float v = value(plane[idx], relu);
        if (v > best_v) best = idx, best_v = v;
      }
    return best;
  }
  // x, or relu(x) where relu is set.
  static QUORUM_HD float value(float x, bool relu) { return relu ? relu_value(x) : x; }
};

// One output element per index over [planes][out_h][out_w]. With relu set,
// the pool of relu(x) (a ReLU and its max-pool in one pass; relu(x) unwritten).
struct MaxPoolForward {
  static constexpr const char *kName = "maxpool_forward";
  PoolGeom g;
  const float *x = nullptr;
  float *y = nullptr;
  bool relu = false;
  QUORUM_HD void operator()(size_t i) const {
    const size_t out_plane = size_t(g.out_h) * g.out_w;
    const size_t p = i / out_plane, r = i % out_plane;
    const float *plane = x + p * g.in_h * g.in_w;
    y[i] = PoolGeom::value(plane[g.argmax(plane, int(r / g.out_w), int(r % g.out_w), relu)], relu);
  }
};

// One input element per index over [planes][in_h][in_w]: it takes its window's
// gradient if it is the window's first maximum, else zero (every dx written).
// With relu set, through the ReLU too (x: the ReLU's input): zero unless
// relu(x) > 0 there, as ReluBackward after this without relu.
struct MaxPoolBackward {
  static constexpr const char *kName = "maxpool_backward";
  PoolGeom g;
  const float *x = nullptr, *dy = nullptr;
  float *dx = nullptr;
  bool relu = false;
  QUORUM_HD void operator()(size_t i) const {
    const size_t in_plane = size_t(g.in_h) * g.in_w;
    const size_t p = i / in_plane, r = i % in_plane;
    const int oi = int(r / g.in_w) / g.window, oj = int(r % g.in_w) / g.window;
    const float *plane = x + p * in_plane;
    float v = 0.f;
    if (oi < g.out_h && oj < g.out_w && g.argmax(plane, oi, oj, relu) == r &&
        (!relu || plane[r] > 0.f))
      v = dy[(p * g.out_h + oi) * g.out_w + oj];
    dx[i] = v;
  }
};

// Softmax cross-entropy of one row (one index per example), in float like `ref`:
// per-row loss, hit (argmax == label) and bad-label flag go to three double
// arrays that a row reduction then sums. dlogits may be nullptr or alias logits.
struct SoftmaxXentRow {
  static constexpr const char *kName = "softmax_xent_row";
  int classes = 0;
  float batch = 1.f;  // as a float, to divide exactly as `ref` does
  const float *logits = nullptr;
  const int32_t *labels = nullptr;
  float *dlogits = nullptr;
  double *loss = nullptr, *hit = nullptr, *bad = nullptr;
  QUORUM_HD void operator()(size_t n) const {
    const float *z = logits + n * classes;
    const int label = labels[n];
    if (label < 0 || label >= classes) {
      loss[n] = 0.0, hit[n] = 0.0, bad[n] = 1.0;
      if (dlogits != nullptr)
        for (int k = 0; k < classes; ++k) dlogits[n * classes + k] = 0.f;
      return;
    }
    int best = 0;
    for (int k = 1; k < classes; ++k)
      if (z[k] > z[best]) best = k;
    const float zmax = z[best];
    float denom = 0.f;
    for (int k = 0; k < classes; ++k) denom += expf(z[k] - zmax);
    const float log_denom = logf(denom);
    loss[n] = double(log_denom - (z[label] - zmax));
    hit[n] = best == label ? 1.0 : 0.0;
    bad[n] = 0.0;
    if (dlogits == nullptr) return;
    float *d = dlogits + n * classes;
    for (int k = 0; k < classes; ++k) {
      const float p = expf(z[k] - zmax - log_denom);
      d[k] = (p - (k == label ? 1.f : 0.f)) / batch;
    }
  }
};

// PyTorch SGD: g' = g + wd * w; v = mu * v + g'; w -= lr * v.
struct SgdUpdate {
  static constexpr const char *kName = "sgd_update";
  float lr = 0.f, momentum = 0.f, weight_decay = 0.f;
  float *params = nullptr;
  const float *grads = nullptr;
  float *velocity = nullptr;
  QUORUM_HD void operator()(size_t i) const {
    const float g = grads[i] + weight_decay * params[i];
    const float v = momentum * velocity[i] + g;
    velocity[i] = v;
    params[i] -= lr * v;
  }
};

struct Scale {
  static constexpr const char *kName = "scale";
  float alpha = 1.f;
  float *y = nullptr;
  QUORUM_HD void operator()(size_t i) const { y[i] = alpha * y[i]; }
};

// avg = decay * avg + rest * x, rest = 1 - decay (the parameters' moving average).
struct AverageInto {
  static constexpr const char *kName = "average_into";
  float decay = 0.f, rest = 1.f;
  float *avg = nullptr;
  const float *x = nullptr;
  QUORUM_HD void operator()(size_t i) const { avg[i] = decay * avg[i] + rest * x[i]; }
};

// ---- terms of row reductions: out[row] = sum over col of term(row, col), in double ----

// Conv bias gradient: row = channel, col = (n, p) over the whole batch.
struct ConvBiasGradTerm {
  static constexpr const char *kName = "conv_bias_grad";
  int channels = 0;
  size_t plane = 0;
  const float *dy = nullptr;
  QUORUM_HD double operator()(size_t row, size_t col) const {
    const size_t n = col / plane, p = col % plane;
    return double(dy[(n * channels + row) * plane + p]);
  }
};

// Linear bias gradient: row = output, col = example.
struct LinearBiasGradTerm {
  static constexpr const char *kName = "linear_bias_grad";
  int out = 0;
  const float *dy = nullptr;
  QUORUM_HD double operator()(size_t row, size_t col) const {
    return double(dy[col * size_t(out) + row]);
  }
};

struct SquareTerm {
  static constexpr const char *kName = "sum_squares";
  const float *x = nullptr;
  QUORUM_HD double operator()(size_t, size_t col) const {
    const double v = double(x[col]);
    return v * v;
  }
};

// Rows 0, 1, 2: the per-example loss, hit and bad-label arrays of SoftmaxXentRow.
struct XentTotalsTerm {
  static constexpr const char *kName = "xent_totals";
  const double *loss = nullptr, *hit = nullptr, *bad = nullptr;
  QUORUM_HD double operator()(size_t row, size_t col) const {
    return row == 0 ? loss[col] : row == 1 ? hit[col] : bad[col];
  }
};

}  // namespace quorum::trainer::kernels
