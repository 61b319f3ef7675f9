// ref_backend.hpp: the reference backend, naive loops over host memory.
//
// Written for clarity, not speed: each kernel is the textbook definition, in the
// element type T, so that RefBackend<double> is the oracle of the finite-
// difference gradient checks and RefBackend<float> the oracle of `cpu` and `cuda`.
#pragma once

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <cstring>

#include "trainer/backend.hpp"

namespace quorum::trainer {

template <typename T>
class RefBackend : public BackendT<T> {
 public:
  std::string name() const override { return "ref"; }
  MemoryKind memory_kind() const override { return MemoryKind::Host; }

  void *alloc(size_t bytes) override {
    size_t rounded = (bytes + 63) / 64 * 64;
    void *p = std::aligned_alloc(64, rounded == 0 ? 64 : rounded);
    if (p != nullptr) std::memset(p, 0, rounded == 0 ? 64 : rounded);
    return p;
  }
  void free(void *ptr) override { std::free(ptr); }
  void copy_to_device(void *dst, const void *src, size_t bytes) override {
    std::memcpy(dst, src, bytes);
  }
  void copy_to_host(void *dst, const void *src, size_t bytes) override {
    std::memcpy(dst, src, bytes);
  }
  void copy_device(void *dst, const void *src, size_t bytes) override {
    std::memmove(dst, src, bytes);
  }
  void fill_zero(void *dst, size_t bytes) override { std::memset(dst, 0, bytes); }

  void conv2d_forward(const Conv2dShape &s, const T *x, const T *w, const T *b, T *y) override {
    const int oh = s.out_h(), ow = s.out_w();
    for (int n = 0; n < s.batch; ++n)
      for (int oc = 0; oc < s.out_c; ++oc)
        for (int i = 0; i < oh; ++i)
          for (int j = 0; j < ow; ++j) {
            T acc = b[oc];
            for (int ic = 0; ic < s.in_c; ++ic)
              for (int ki = 0; ki < s.kernel_h; ++ki)
                for (int kj = 0; kj < s.kernel_w; ++kj) {
                  int yi = i * s.stride - s.pad + ki, xj = j * s.stride - s.pad + kj;
                  if (yi < 0 || yi >= s.in_h || xj < 0 || xj >= s.in_w) continue;
                  acc += x[((size_t(n) * s.in_c + ic) * s.in_h + yi) * s.in_w + xj] *
                         w[((size_t(oc) * s.in_c + ic) * s.kernel_h + ki) * s.kernel_w + kj];
                }
            y[((size_t(n) * s.out_c + oc) * oh + i) * ow + j] = acc;
          }
  }

  void conv2d_backward(const Conv2dShape &s, const T *x, const T *w, const T *dy, T *dx, T *dw,
                       T *db) override {
    const int oh = s.out_h(), ow = s.out_w();
    const size_t wcount = size_t(s.out_c) * s.in_c * s.kernel_h * s.kernel_w;
    std::fill(dw, dw + wcount, T(0));
    std::fill(db, db + s.out_c, T(0));
    if (dx != nullptr) std::fill(dx, dx + size_t(s.batch) * s.in_c * s.in_h * s.in_w, T(0));
    for (int n = 0; n < s.batch; ++n)
      for (int oc = 0; oc < s.out_c; ++oc)
        for (int i = 0; i < oh; ++i)
          for (int j = 0; j < ow; ++j) {
            T g = dy[((size_t(n) * s.out_c + oc) * oh + i) * ow + j];
            db[oc] += g;
            for (int ic = 0; ic < s.in_c; ++ic)
              for (int ki = 0; ki < s.kernel_h; ++ki)
                for (int kj = 0; kj < s.kernel_w; ++kj) {
                  int yi = i * s.stride - s.pad + ki, xj = j * s.stride - s.pad + kj;
                  if (yi < 0 || yi >= s.in_h || xj < 0 || xj >= s.in_w) continue;
                  size_t xi = ((size_t(n) * s.in_c + ic) * s.in_h + yi) * s.in_w + xj;
                  size_t wi = ((size_t(oc) * s.in_c + ic) * s.kernel_h + ki) * s.kernel_w + kj;
                  dw[wi] += g * x[xi];
                  if (dx != nullptr) dx[xi] += g * w[wi];
                }
          }
  }

  void relu_forward(size_t n, const T *x, T *y) override {
    for (size_t i = 0; i < n; ++i) y[i] = x[i] > T(0) ? x[i] : T(0);
  }
  void relu_backward(size_t n, const T *y, const T *dy, T *dx) override {
    for (size_t i = 0; i < n; ++i) dx[i] = y[i] > T(0) ? dy[i] : T(0);
  }

  // Index (within the input plane) of the first maximum of window (i, j).
  static size_t argmax_window(const PoolShape &s, const T *plane, int i, int j) {
    size_t best = size_t(i * s.window) * s.in_w + size_t(j * s.window);
    for (int a = 0; a < s.window; ++a)
      for (int c = 0; c < s.window; ++c) {
        size_t idx = size_t(i * s.window + a) * s.in_w + size_t(j * s.window + c);
        if (plane[idx] > plane[best]) best = idx;
      }
    return best;
  }

  void maxpool_forward(const PoolShape &s, const T *x, T *y) override {
    const int oh = s.out_h(), ow = s.out_w();
    for (size_t p = 0; p < size_t(s.batch) * s.channels; ++p) {
      const T *plane = x + p * s.in_h * s.in_w;
      for (int i = 0; i < oh; ++i)
        for (int j = 0; j < ow; ++j)
          y[(p * oh + i) * ow + j] = plane[argmax_window(s, plane, i, j)];
    }
  }
  void maxpool_backward(const PoolShape &s, const T *x, const T *, const T *dy, T *dx) override {
    const int oh = s.out_h(), ow = s.out_w();
    std::fill(dx, dx + size_t(s.batch) * s.channels * s.in_h * s.in_w, T(0));
    for (size_t p = 0; p < size_t(s.batch) * s.channels; ++p) {
      const T *plane = x + p * s.in_h * s.in_w;
      for (int i = 0; i < oh; ++i)
        for (int j = 0; j < ow; ++j)
          dx[p * s.in_h * s.in_w + argmax_window(s, plane, i, j)] += dy[(p * oh + i) * ow + j];
    }
  }

  void linear_forward(const LinearShape &s, const T *x, const T *w, const T *b, T *y) override {
    for (int n = 0; n < s.batch; ++n)
      for (int o = 0; o < s.out; ++o) {
        T acc = b[o];
        for (int i = 0; i < s.in; ++i) acc += x[size_t(n) * s.in + i] * w[size_t(o) * s.in + i];
        y[size_t(n) * s.out + o] = acc;
      }
  }
  void linear_backward(const LinearShape &s, const T *x, const T *w, const T *dy, T *dx, T *dw,
                       T *db) override {
    for (int o = 0; o < s.out; ++o) {
      T acc = 0;
      for (int n = 0; n < s.batch; ++n) acc += dy[size_t(n) * s.out + o];
      db[o] = acc;
      for (int i = 0; i < s.in; ++i) {
        T g = 0;
        for (int n = 0; n < s.batch; ++n) g += dy[size_t(n) * s.out + o] * x[size_t(n) * s.in + i];
        dw[size_t(o) * s.in + i] = g;
      }
    }
    if (dx == nullptr) return;
    for (int n = 0; n < s.batch; ++n)
      for (int i = 0; i < s.in; ++i) {
        T g = 0;
        for (int o = 0; o < s.out; ++o) g += dy[size_t(n) * s.out + o] * w[size_t(o) * s.in + i];
        dx[size_t(n) * s.in + i] = g;
      }
  }

  void softmax_xent(int batch, int classes, const T *logits, const int32_t *labels, T *dlogits,
                    double *mean_loss, int64_t *correct) override {
    xent(batch, classes, logits, labels, dlogits, mean_loss, correct);
  }
  void softmax_xent_eval(int batch, int classes, const T *logits, const int32_t *labels,
                         double *mean_loss, int64_t *correct) override {
    xent(batch, classes, logits, labels, nullptr, mean_loss, correct);
  }

  void sgd_update(size_t n, const SgdStep &st, T *params, const T *grads, T *momentum) override {
    const T lr = T(st.lr), mu = T(st.momentum), wd = T(st.weight_decay);
    for (size_t i = 0; i < n; ++i) {
      T g = grads[i] + wd * params[i];
      momentum[i] = mu * momentum[i] + g;
      params[i] -= lr * momentum[i];
    }
  }
  void scale(size_t n, double alpha, T *y) override {
    for (size_t i = 0; i < n; ++i) y[i] = T(alpha) * y[i];
  }
  void average_into(size_t n, double decay, T *avg, const T *x) override {
    const T d = T(decay), rest = T(1 - decay);
    for (size_t i = 0; i < n; ++i) avg[i] = d * avg[i] + rest * x[i];
  }
  double sum_squares(size_t n, const T *x) override {
    double acc = 0;
    for (size_t i = 0; i < n; ++i) acc += double(x[i]) * double(x[i]);
    return acc;
  }

 private:
  // Shared by training and evaluation; dlogits may be nullptr or alias logits.
  static void xent(int batch, int classes, const T *logits, const int32_t *labels, T *dlogits,
                   double *mean_loss, int64_t *correct) {
    double loss = 0;
    int64_t hits = 0;
    for (int n = 0; n < batch; ++n) {
      const T *z = logits + size_t(n) * classes;
      int best = 0;
      for (int k = 1; k < classes; ++k)
        if (z[k] > z[best]) best = k;
      if (best == labels[n]) ++hits;
      T zmax = z[best];
      T denom = 0;
      for (int k = 0; k < classes; ++k) denom += std::exp(z[k] - zmax);
      T log_denom = std::log(denom);
      loss += double(log_denom - (z[labels[n]] - zmax));
      if (dlogits == nullptr) continue;
      T *d = dlogits + size_t(n) * classes;
      for (int k = 0; k < classes; ++k) {
        T p = std::exp(z[k] - zmax - log_denom);
        d[k] = (p - (k == labels[n] ? T(1) : T(0))) / T(batch);
      }
    }
    *mean_loss = batch > 0 ? loss / batch : 0.0;
    *correct = hits;
  }
};

}  // namespace quorum::trainer
