// kernel_backend.hpp: the cuda backend's algorithms, written once over an executor.
//
// Every layer is a short sequence of element-wise kernels (kernel_ops.hpp), row
// reductions and column-major SGEMMs:
//   conv forward   im2col -> Yt[oc][n*P] = W col -> y = nchw(Yt) + b
//   conv backward  im2col, dyT = cnp(dy) -> dW = dyT col^T (one GEMM over the whole
//                  batch) -> dcol = W^T dyT -> col2im; db = row sums of dy
//   linear         y = b; y += x W^T;  dW = dy^T x;  dx = dy W;  db = column sums
// Images are processed in chunks so that the im2col workspace stays under a
// budget. The executor supplies memory, `each` (one functor call per index),
// `reduce_rows` and `gemm`: CudaExec (cuda_backend.cpp) runs them on a device
// with cuBLAS; the emulation test runs the very same code on the CPU with a
// host executor, which is how the indexing is checked without a GPU.
//
// Executor errors are sticky: after the first one every call is a no-op,
// allocations return nullptr, and losses read NaN (the executor decides
// whether the process stops; see cuda_backend.hpp).
#pragma once

#include <fmt/format.h>

#include <algorithm>
#include <climits>
#include <cmath>
#include <limits>
#include <memory>
#include <string>

#include "trainer/backend.hpp"
#include "trainer/cuda/kernel_ops.hpp"

namespace quorum::trainer::kernels {

// One column-major SGEMM, C = alpha op(A) op(B) + beta C, exactly as
// cublasSgemm and cblas_sgemm(CblasColMajor, ...) take it.
struct Gemm {
  bool trans_a = false, trans_b = false;
  int m = 0, n = 0, k = 0;
  float alpha = 1.f;
  const float *a = nullptr;
  int lda = 0;
  const float *b = nullptr;
  int ldb = 0;
  float beta = 0.f;
  float *c = nullptr;
  int ldc = 0;
};

// The same product in row-major terms (C[M][N] = op(A)[M][K] op(B)[K][N], leading
// dimensions are row lengths as stored): a row-major matrix is its transpose in
// column-major, so C^T = op(B)^T op(A)^T, which swaps the operands.
inline Gemm row_major_gemm(bool trans_a, bool trans_b, size_t m, size_t n, size_t k, const float *a,
                           size_t lda, const float *b, size_t ldb, float beta, float *c,
                           size_t ldc) {
  Gemm g;
  g.trans_a = trans_b, g.trans_b = trans_a;
  g.m = int(n), g.n = int(m), g.k = int(k);
  g.a = b, g.lda = int(ldb);
  g.b = a, g.ldb = int(lda);
  g.beta = beta;
  g.c = c, g.ldc = int(ldc);
  return g;
}

// What the backend is doing, for error messages (formatted only on error).
struct OpContext {
  enum class Kind { None, Bytes, Count, Conv, Pool, Linear, Xent };
  const char *op = "";
  Kind kind = Kind::None;
  size_t amount = 0;
  Conv2dShape conv;
  PoolShape pool;
  LinearShape linear;
  int batch = 0, classes = 0;

  std::string describe() const {
    switch (kind) {
      case Kind::None:
        return op;
      case Kind::Bytes:
        return fmt::format("{} ({} bytes)", op, amount);
      case Kind::Count:
        return fmt::format("{} ({} elements)", op, amount);
      case Kind::Conv:
        return fmt::format(
            "{} (batch {}, {}x{}x{} -> {} channels, kernel {}x{}, stride {}, pad {})", op,
            conv.batch, conv.in_c, conv.in_h, conv.in_w, conv.out_c, conv.kernel_h, conv.kernel_w,
            conv.stride, conv.pad);
      case Kind::Pool:
        return fmt::format("{} (batch {}, {}x{}x{}, window {})", op, pool.batch, pool.channels,
                           pool.in_h, pool.in_w, pool.window);
      case Kind::Linear:
        return fmt::format("{} (batch {}, {} -> {})", op, linear.batch, linear.in, linear.out);
      case Kind::Xent:
        return fmt::format("{} (batch {}, {} classes)", op, batch, classes);
    }
    return op;
  }
};

// Executor contract (duck-typed; CudaExec and the tests' HostExec):
//   MemoryKind memory_kind() const;   bool ok() const;   Status error() const;
//   void set_context(const OpContext &);
//   void fail(Status, const std::string &what);     // records a sticky error
//   void *alloc(size_t bytes);  // zero-filled, >= 64-byte aligned, nullptr on failure
//   void free(void *);  void to_device(void *, const void *, size_t);
//   void to_host(void *, const void *, size_t);     // complete on return
//   void device_copy(void *, const void *, size_t); // non-overlapping
//   void zero(void *, size_t);  void sync();
//   template <class F> void each(size_t n, const F &f);            // f(i), i < n
//   template <class F, class T> void reduce_rows(int rows, size_t cols, const F &f, T *out);
//                                          // out[r] = sum_c f(r, c), in double
//   void gemm(const Gemm &);
template <class Exec>
class KernelBackend final : public Backend {
 public:
  // workspace_budget_bytes bounds the im2col workspace (one image at least).
  KernelBackend(std::string name, std::unique_ptr<Exec> exec, size_t workspace_budget_bytes)
      : name_(std::move(name)), exec_(std::move(exec)), budget_(workspace_budget_bytes) {}
  ~KernelBackend() override {
    for (Slot &s : slots_)
      if (s.ptr != nullptr) exec_->free(s.ptr);
  }
  KernelBackend(const KernelBackend &) = delete;
  KernelBackend &operator=(const KernelBackend &) = delete;

  Exec &exec() { return *exec_; }
  Status error() const { return exec_->error(); }

  std::string name() const override { return name_; }
  MemoryKind memory_kind() const override { return exec_->memory_kind(); }

  void *alloc(size_t bytes) override {
    if (!begin(bytes_ctx("alloc", bytes))) return nullptr;
    return exec_->alloc(std::max<size_t>(bytes, 64));
  }
  void free(void *ptr) override {
    if (ptr != nullptr) exec_->free(ptr);
  }
  void copy_to_device(void *dst, const void *host_src, size_t bytes) override {
    if (bytes != 0 && begin(bytes_ctx("copy_to_device", bytes)))
      exec_->to_device(dst, host_src, bytes);
  }
  void copy_to_host(void *host_dst, const void *src, size_t bytes) override {
    if (bytes != 0 && begin(bytes_ctx("copy_to_host", bytes))) exec_->to_host(host_dst, src, bytes);
  }
  // memmove semantics: overlapping ranges go through a scratch buffer.
  void copy_device(void *dst, const void *src, size_t bytes) override {
    if (bytes == 0 || dst == src || !begin(bytes_ctx("copy_device", bytes))) return;
    const char *d = static_cast<const char *>(dst), *s = static_cast<const char *>(src);
    if (d < s + bytes && s < d + bytes) {
      void *tmp = scratch(kCopySlot, bytes);
      if (tmp == nullptr) return;
      exec_->device_copy(tmp, src, bytes);
      exec_->device_copy(dst, tmp, bytes);
    } else {
      exec_->device_copy(dst, src, bytes);
    }
  }
  void fill_zero(void *dst, size_t bytes) override {
    if (bytes != 0 && begin(bytes_ctx("fill_zero", bytes))) exec_->zero(dst, bytes);
  }
  void synchronize() override {
    OpContext c;
    c.op = "synchronize";
    if (begin(c)) exec_->sync();
  }

  void conv2d_forward(const Conv2dShape &s, const float *x, const float *w, const float *b,
                      float *y) override {
    OpContext c = conv_ctx("conv2d_forward", s);
    if (!begin(c) || s.batch <= 0) return;
    const ConvGeom g = geom(s);
    const size_t P = g.plane(), K = g.patch(), OC = size_t(s.out_c);
    const int nb = chunk_images(s);
    float *col = static_cast<float *>(scratch(kWorkspaceSlot, (K + OC) * nb * P * sizeof(float)));
    if (col == nullptr) return;
    float *cnp = col + K * nb * P;
    for (int n0 = 0; n0 < s.batch; n0 += nb) {
      const int cur = std::min(nb, s.batch - n0);
      const size_t np = size_t(cur) * P;
      exec_->each(K * np, Im2col{g, cur, x + n0 * g.image(), col});
      exec_->gemm(row_major_gemm(false, false, OC, np, K, w, K, col, np, 0.f, cnp, np));
      exec_->each(OC * np, CnpToNchwBias{s.out_c, cur, P, cnp, b, y + n0 * OC * P});
    }
  }

  void conv2d_backward(const Conv2dShape &s, const float *x, const float *w, const float *dy,
                       float *dx, float *dw, float *db) override {
    OpContext c = conv_ctx("conv2d_backward", s);
    if (!begin(c)) return;
    const ConvGeom g = geom(s);
    const size_t P = g.plane(), K = g.patch(), OC = size_t(s.out_c);
    if (s.batch <= 0) {
      exec_->zero(dw, OC * K * sizeof(float));
      exec_->zero(db, OC * sizeof(float));
      return;
    }
    const int nb = chunk_images(s);
    float *col = static_cast<float *>(scratch(kWorkspaceSlot, (K + OC) * nb * P * sizeof(float)));
    if (col == nullptr) return;
    float *dyt = col + K * nb * P;
    for (int n0 = 0; n0 < s.batch; n0 += nb) {
      const int cur = std::min(nb, s.batch - n0);
      const size_t np = size_t(cur) * P;
      exec_->each(K * np, Im2col{g, cur, x + n0 * g.image(), col});
      exec_->each(OC * np, NchwToCnp{s.out_c, cur, P, dy + n0 * OC * P, dyt});
      // dW accumulates over chunks: one GEMM whose inner dimension is the chunk.
      exec_->gemm(
          row_major_gemm(false, true, OC, K, np, dyt, np, col, np, n0 == 0 ? 0.f : 1.f, dw, K));
      if (dx != nullptr) {
        // col is no longer needed in this chunk: it becomes dcol (same stream order).
        exec_->gemm(row_major_gemm(true, false, K, np, OC, w, K, dyt, np, 0.f, col, np));
        exec_->each(size_t(cur) * g.image(), Col2im{g, cur, col, dx + n0 * g.image()});
      }
    }
    exec_->reduce_rows(s.out_c, size_t(s.batch) * P, ConvBiasGradTerm{s.out_c, P, dy}, db);
  }

  void relu_forward(size_t n, const float *x, float *y) override {
    if (n != 0 && begin(count_ctx("relu_forward", n))) exec_->each(n, ReluForward{x, y});
  }
  void relu_backward(size_t n, const float *y, const float *dy, float *dx) override {
    if (n != 0 && begin(count_ctx("relu_backward", n))) exec_->each(n, ReluBackward{y, dy, dx});
  }

  void maxpool_forward(const PoolShape &s, const float *x, float *y) override {
    pool_forward("maxpool_forward", s, x, y, false);
  }
  void maxpool_backward(const PoolShape &s, const float *x, const float *, const float *dy,
                        float *dx) override {
    pool_backward("maxpool_backward", s, x, dy, dx, false);
  }
  // relu + max-pool as one kernel each way: r and dr are left unwritten.
  void relu_maxpool2_forward(const PoolShape &s, const float *x, float *, float *y) override {
    pool_forward("relu_maxpool2_forward", s, x, y, true);
  }
  void relu_maxpool2_backward(const PoolShape &s, const float *x, const float *, const float *,
                              const float *dy, float *, float *dx) override {
    pool_backward("relu_maxpool2_backward", s, x, dy, dx, true);
  }

  void linear_forward(const LinearShape &s, const float *x, const float *w, const float *b,
                      float *y) override {
    if (!begin(linear_ctx("linear_forward", s)) || s.batch <= 0) return;
    const size_t B = size_t(s.batch), I = size_t(s.in), O = size_t(s.out);
    exec_->each(B * O, BroadcastBias{s.out, b, y});
    exec_->gemm(row_major_gemm(false, true, B, O, I, x, I, w, I, 1.f, y, O));
  }
  void linear_backward(const LinearShape &s, const float *x, const float *w, const float *dy,
                       float *dx, float *dw, float *db) override {
    if (!begin(linear_ctx("linear_backward", s))) return;
    const size_t B = size_t(s.batch), I = size_t(s.in), O = size_t(s.out);
    if (B == 0) {
      exec_->zero(dw, O * I * sizeof(float));
      exec_->zero(db, O * sizeof(float));
      return;
    }
    exec_->gemm(row_major_gemm(true, false, O, I, B, dy, O, x, I, 0.f, dw, I));
    exec_->reduce_rows(s.out, B, LinearBiasGradTerm{s.out, dy}, db);
    if (dx != nullptr) exec_->gemm(row_major_gemm(false, false, B, I, O, dy, O, w, I, 0.f, dx, I));
  }

  void softmax_xent(int batch, int classes, const float *logits, const int32_t *labels,
                    float *dlogits, double *mean_loss, int64_t *correct) override {
    xent("softmax_xent", batch, classes, logits, labels, dlogits, mean_loss, correct);
  }
  void softmax_xent_eval(int batch, int classes, const float *logits, const int32_t *labels,
                         double *mean_loss, int64_t *correct) override {
    xent("softmax_xent_eval", batch, classes, logits, labels, nullptr, mean_loss, correct);
  }

  void sgd_update(size_t n, const SgdStep &st, float *params, const float *grads,
                  float *momentum) override {
    if (n != 0 && begin(count_ctx("sgd_update", n)))
      exec_->each(n, SgdUpdate{float(st.lr), float(st.momentum), float(st.weight_decay), params,
                               grads, momentum});
  }
  void scale(size_t n, double alpha, float *y) override {
    if (n != 0 && begin(count_ctx("scale", n))) exec_->each(n, Scale{float(alpha), y});
  }
  void average_into(size_t n, double decay, float *avg, const float *x) override {
    if (n != 0 && begin(count_ctx("average_into", n)))
      exec_->each(n, AverageInto{float(decay), float(1 - decay), avg, x});
  }
  double sum_squares(size_t n, const float *x) override {
    if (!begin(count_ctx("sum_squares", n))) return std::numeric_limits<double>::quiet_NaN();
    if (n == 0) return 0.0;
    double *out = static_cast<double *>(scratch(kReduceSlot, sizeof(double)));
    if (out == nullptr) return std::numeric_limits<double>::quiet_NaN();
    exec_->reduce_rows(1, n, SquareTerm{x}, out);
    double result = 0;
    exec_->to_host(&result, out, sizeof result);
    return exec_->ok() ? result : std::numeric_limits<double>::quiet_NaN();
  }

 private:
  enum { kWorkspaceSlot, kXentSlot, kReduceSlot, kCopySlot, kSlots };
  struct Slot {
    void *ptr = nullptr;
    size_t bytes = 0;
  };

  bool begin(const OpContext &c) {
    exec_->set_context(c);
    return exec_->ok();
  }
  static OpContext bytes_ctx(const char *op, size_t bytes) {
    OpContext c;
    c.op = op, c.kind = OpContext::Kind::Bytes, c.amount = bytes;
    return c;
  }
  static OpContext count_ctx(const char *op, size_t n) {
    OpContext c;
    c.op = op, c.kind = OpContext::Kind::Count, c.amount = n;
    return c;
  }
  static OpContext conv_ctx(const char *op, const Conv2dShape &s) {
    OpContext c;
    c.op = op, c.kind = OpContext::Kind::Conv, c.conv = s;
    return c;
  }
  static OpContext pool_ctx(const char *op, const PoolShape &s) {
    OpContext c;
    c.op = op, c.kind = OpContext::Kind::Pool, c.pool = s;
    return c;
  }
  static OpContext linear_ctx(const char *op, const LinearShape &s) {
    OpContext c;
    c.op = op, c.kind = OpContext::Kind::Linear, c.linear = s;
    return c;
  }

  static ConvGeom geom(const Conv2dShape &s) {
    ConvGeom g;
    g.in_c = s.in_c, g.in_h = s.in_h, g.in_w = s.in_w;
    g.out_c = s.out_c, g.kernel_h = s.kernel_h, g.kernel_w = s.kernel_w;
    g.stride = s.stride, g.pad = s.pad;
    g.out_h = s.out_h(), g.out_w = s.out_w();
    return g;
  }
  // One max-pool kernel each way, of relu(x) where relu is set (op: the call's name).
  void pool_forward(const char *op, const PoolShape &s, const float *x, float *y, bool relu) {
    if (!begin(pool_ctx(op, s))) return;
    const size_t planes = size_t(s.batch) * s.channels;
    exec_->each(planes * s.out_h() * s.out_w(), MaxPoolForward{pool_geom(s), x, y, relu});
  }
  void pool_backward(const char *op, const PoolShape &s, const float *x, const float *dy, float *dx,
                     bool relu) {
    if (!begin(pool_ctx(op, s))) return;
    const size_t planes = size_t(s.batch) * s.channels;
    exec_->each(planes * s.in_h * s.in_w, MaxPoolBackward{pool_geom(s), x, dy, dx, relu});
  }
  static PoolGeom pool_geom(const PoolShape &s) {
    PoolGeom g;
    g.in_h = s.in_h, g.in_w = s.in_w, g.window = s.window;
    g.out_h = s.out_h(), g.out_w = s.out_w();
    return g;
  }

  // Images per chunk: the workspace holds col [K][nb*P] and one [out_c][nb*P]
  // matrix; GEMM dimensions must also fit in an int.
  int chunk_images(const Conv2dShape &s) const {
    const size_t P = size_t(s.out_h()) * s.out_w();
    const size_t per_image = (size_t(s.in_c) * s.kernel_h * s.kernel_w + s.out_c) * P;
    size_t nb = budget_ / (per_image * sizeof(float));
    nb = std::min(nb, size_t(INT_MAX) / std::max<size_t>(P, 1));
    return int(std::clamp<size_t>(nb, 1, size_t(s.batch)));
  }

  // A kept buffer per purpose, grown on demand; a failure is sticky (the op cannot run).
  void *scratch(int slot, size_t bytes) {
    Slot &s = slots_[slot];
    if (s.bytes >= bytes && s.ptr != nullptr) return s.ptr;
    if (s.ptr != nullptr) exec_->free(s.ptr);
    s = Slot{};
    void *p = exec_->alloc(bytes);
    if (p == nullptr) {
      exec_->fail(QUORUM_ERR_NO_MEMORY, fmt::format("scratch buffer of {} bytes", bytes));
      return nullptr;
    }
    s = Slot{p, bytes};
    return p;
  }

  void xent(const char *op, int batch, int classes, const float *logits, const int32_t *labels,
            float *dlogits, double *mean_loss, int64_t *correct) {
    *mean_loss = std::numeric_limits<double>::quiet_NaN();
    *correct = 0;
    OpContext c;
    c.op = op, c.kind = OpContext::Kind::Xent, c.batch = batch, c.classes = classes;
    if (!begin(c)) return;
    if (batch <= 0) {
      *mean_loss = 0.0;
      return;
    }
    const size_t B = size_t(batch);
    double *rows = static_cast<double *>(scratch(kXentSlot, (3 * B + 3) * sizeof(double)));
    if (rows == nullptr) return;
    double *loss = rows, *hit = rows + B, *bad = rows + 2 * B, *totals = rows + 3 * B;
    exec_->each(B, SoftmaxXentRow{classes, float(batch), logits, labels, dlogits, loss, hit, bad});
    exec_->reduce_rows(3, B, XentTotalsTerm{loss, hit, bad}, totals);
    double host[3] = {0, 0, 0};
    exec_->to_host(host, totals, sizeof host);
    if (!exec_->ok()) return;
    if (host[2] > 0) {
      exec_->fail(QUORUM_ERR_INVALID_ARG,
                  fmt::format("{} of {} labels outside [0, {})", int64_t(host[2]), batch, classes));
      return;
    }
    *mean_loss = host[0] / double(batch);
    *correct = int64_t(std::llround(host[1]));
  }

  std::string name_;
  std::unique_ptr<Exec> exec_;
  size_t budget_;
  Slot slots_[kSlots];
};

}  // namespace quorum::trainer::kernels
