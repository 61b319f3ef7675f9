// cpu_backend.cpp: see cpu_backend.hpp.
#include "trainer/cpu_backend.hpp"

#include "trainer/cpu_kernels.hpp"

#include <omp.h>

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <dnnl.hpp>
#include <vector>

namespace quorum::trainer {

namespace {

using dnnl::memory;
using tag = dnnl::memory::format_tag;
using dt = dnnl::memory::data_type;

// A buffer in the layout a primitive wants, wrapping the caller's NCHW buffer
// directly when the layouts agree and a kept scratch buffer otherwise.
class Staged {
 public:
  void bind(const dnnl::engine &eng, const memory::desc &want, const memory::desc &user,
            void *user_ptr) {
    user_ = memory(user, eng, user_ptr);
    if (want == user) {
      mem_ = user_;
      staged_ = false;
      return;
    }
    if (!staged_mem_ || staged_mem_.get_desc() != want) staged_mem_ = memory(want, eng);
    mem_ = staged_mem_;
    staged_ = true;
  }
  // user -> staged (inputs).
  void pull(dnnl::stream &s) {
    if (staged_) dnnl::reorder(user_, mem_).execute(s, user_, mem_);
  }
  // staged -> user (outputs).
  void push(dnnl::stream &s) {
    if (staged_) dnnl::reorder(mem_, user_).execute(s, mem_, user_);
  }
  const memory &mem() const { return mem_; }

 private:
  memory user_, mem_, staged_mem_;
  bool staged_ = false;
};

// The oneDNN primitives of one conv shape, created on first use and kept.
struct ConvPrimitives {
  Conv2dShape shape;
  dnnl::convolution_forward::primitive_desc fwd_pd;
  dnnl::convolution_forward fwd;
  bool has_bwd_data = false;
  dnnl::convolution_backward_data::primitive_desc bwd_data_pd;
  dnnl::convolution_backward_data bwd_data;
  dnnl::convolution_backward_weights::primitive_desc bwd_weights_pd;
  dnnl::convolution_backward_weights bwd_weights;
  // Staging buffers of this shape (kept: fresh pages cost more than the math).
  Staged src, wei, dst, ddst, ddst2, dwei, dsrc, wei_bwd;
};

class CpuBackend : public Backend {
 public:
  explicit CpuBackend(const BackendOptions &options)
      : threads_(std::max(1, options.threads)),
        engine_(dnnl::engine::kind::cpu, 0),
        stream_(engine_) {
    omp_set_num_threads(threads_);
  }

  std::string name() const override { return "cpu"; }
  MemoryKind memory_kind() const override { return MemoryKind::Host; }

  void *alloc(size_t bytes) override {
    size_t rounded = std::max<size_t>(64, (bytes + 63) / 64 * 64);
    void *p = std::aligned_alloc(64, rounded);
    if (p != nullptr) std::memset(p, 0, rounded);
    return p;
  }
  void free(void *ptr) override { std::free(ptr); }
  void copy_to_device(void *dst, const void *src, size_t n) override { std::memcpy(dst, src, n); }
  void copy_to_host(void *dst, const void *src, size_t n) override { std::memcpy(dst, src, n); }
  void copy_device(void *dst, const void *src, size_t n) override { std::memmove(dst, src, n); }
  void fill_zero(void *dst, size_t n) override { std::memset(dst, 0, n); }

  void conv2d_forward(const Conv2dShape &s, const float *x, const float *w, const float *b,
                      float *y) override {
    conv_forward(s, x, w, b, y, user_src(s), user_dst(s));
  }
  void conv2d_backward(const Conv2dShape &s, const float *x, const float *w, const float *dy,
                       float *dx, float *dw, float *db) override {
    conv_backward(s, x, w, dy, dx, dw, db, user_src(s), user_dst(s));
  }

  // The conv's output stays in the blocked layout its primitives use
  // (nChw16c), which the relu + max-pool reads and its backward writes, and so
  // does the pool's output where it feeds the next block's conv: no reorder
  // of the conv's input, its output or their gradients (on fm-s these cost
  // 10-20% of a step). Channels not in blocks of 16: NCHW.
  void conv2d_relu_maxpool2_forward(const Conv2dShape &s, BlockLinks links, const float *x,
                                    const float *w, const float *b, float *c, float *r,
                                    float *y) override {
    (void)r;
    const Layouts l = block_layouts(s, links);
    conv_forward(s, x, w, b, c, l.src, l.dst);
    if (l.dst_blocked) {
      cpu_kernels::relu_maxpool2_forward_nchw16c(pool2_after(s), c, y, links.to_block);
    } else {
      cpu_kernels::relu_maxpool2_forward(pool2_after(s), c, y);
    }
  }
  void conv2d_relu_maxpool2_backward(const Conv2dShape &s, BlockLinks links, const float *x,
                                     const float *w, const float *c, const float *r, const float *y,
                                     const float *dy, float *dc, float *dr, float *dx, float *dw,
                                     float *db) override {
    (void)r, (void)dr;
    const Layouts l = block_layouts(s, links);
    if (l.dst_blocked) {
      cpu_kernels::relu_maxpool2_backward_nchw16c(pool2_after(s), c, dy, dc, links.to_block);
    } else {
      cpu_kernels::relu_maxpool2_backward(pool2_after(s), c, y, dy, dc);
    }
    conv_backward(s, x, w, dc, dx, dw, db, l.src, l.dst);
  }

  void relu_forward(size_t n, const float *x, float *y) override {
    cpu_kernels::relu_forward(n, x, y);
  }
  void relu_backward(size_t n, const float *y, const float *dy, float *dx) override {
    cpu_kernels::relu_backward(n, y, dy, dx);
  }

  void maxpool_forward(const PoolShape &s, const float *x, float *y) override {
    if (s.window == 2) return cpu_kernels::maxpool2_forward(s, x, y);
    pool_generic(s, x, nullptr, y, nullptr);
  }
  void maxpool_backward(const PoolShape &s, const float *x, const float *y, const float *dy,
                        float *dx) override {
    if (s.window == 2) return cpu_kernels::maxpool2_backward(s, x, y, dy, dx);
    pool_generic(s, x, dy, nullptr, dx);
  }

  // Fused: one pass each way, the relu's output never written.
  void relu_maxpool2_forward(const PoolShape &s, const float *x, float *r, float *y) override {
    if (s.window != 2) return Backend::relu_maxpool2_forward(s, x, r, y);
    cpu_kernels::relu_maxpool2_forward(s, x, y);
  }
  void relu_maxpool2_backward(const PoolShape &s, const float *x, const float *r, const float *y,
                              const float *dy, float *dr, float *dx) override {
    if (s.window != 2) return Backend::relu_maxpool2_backward(s, x, r, y, dy, dr, dx);
    cpu_kernels::relu_maxpool2_backward(s, x, y, dy, dx);
  }

  void linear_forward(const LinearShape &s, const float *x, const float *w, const float *b,
                      float *y) override {
    for (int n = 0; n < s.batch; ++n) std::memcpy(y + size_t(n) * s.out, b, sizeof(float) * s.out);
    gemm('N', 'T', s.batch, s.out, s.in, x, s.in, w, s.in, 1.f, y, s.out);
  }
  void linear_backward(const LinearShape &s, const float *x, const float *w, const float *dy,
                       float *dx, float *dw, float *db) override {
    // dW[out][in] = dy^T x ; db = column sums of dy ; dx[batch][in] = dy W
    gemm('T', 'N', s.out, s.in, s.batch, dy, s.out, x, s.in, 0.f, dw, s.in);
    cpu_kernels::bias_grad(s.batch, s.out, dy, db);
    if (dx != nullptr) gemm('N', 'N', s.batch, s.in, s.out, dy, s.out, w, s.in, 0.f, dx, s.in);
  }

  void softmax_xent(int batch, int classes, const float *logits, const int32_t *labels,
                    float *dlogits, double *mean_loss, int64_t *correct) override {
    xent(batch, classes, logits, labels, dlogits, mean_loss, correct);
  }
  void softmax_xent_eval(int batch, int classes, const float *logits, const int32_t *labels,
                         double *mean_loss, int64_t *correct) override {
    xent(batch, classes, logits, labels, nullptr, mean_loss, correct);
  }

  void sgd_update(size_t n, const SgdStep &st, float *params, const float *grads,
                  float *momentum) override {
    cpu_kernels::sgd_update(n, float(st.lr), float(st.momentum), float(st.weight_decay), params,
                            grads, momentum);
  }
  void scale(size_t n, double alpha, float *y) override { cpu_kernels::scale(n, float(alpha), y); }
  void average_into(size_t n, double decay, float *avg, const float *x) override {
    cpu_kernels::average_into(n, float(decay), float(1 - decay), avg, x);
  }
  double sum_squares(size_t n, const float *x) override {
    double acc = 0;
    for (size_t i = 0; i < n; ++i) acc += double(x[i]) * double(x[i]);
    return acc;
  }

 private:
  // Row-major C[m][n] = op(A) op(B) + beta C through oneDNN's sgemm, whose
  // kernels follow the CPU's instruction sets (Debian's OpenBLAS 0.3.21 takes
  // CPU models it does not know, such as recent Xeons, for Prescott and runs
  // its SSE3 kernels: 4-6x slower on fm-s's linear layers, see cpu_backend.hpp).
  static void gemm(char trans_a, char trans_b, int m, int n, int k, const float *a, int lda,
                   const float *b, int ldb, float beta, float *c, int ldc) {
    dnnl::error::wrap_c_api(
        dnnl_sgemm(trans_a, trans_b, m, n, k, 1.f, a, lda, b, ldb, beta, c, ldc), "sgemm");
  }

  // y = conv(x, w) + b, x and y in the layouts `src` and `dst` describe.
  void conv_forward(const Conv2dShape &s, const float *x, const float *w, const float *b, float *y,
                    const memory::desc &src, const memory::desc &dst) {
    ConvPrimitives &p = primitives(s, false);
    p.src.bind(engine_, p.fwd_pd.src_desc(), src, const_cast<float *>(x));
    p.wei.bind(engine_, p.fwd_pd.weights_desc(), user_weights(s), const_cast<float *>(w));
    p.dst.bind(engine_, p.fwd_pd.dst_desc(), dst, y);
    memory bias(p.fwd_pd.bias_desc(), engine_, const_cast<float *>(b));
    p.src.pull(stream_);
    p.wei.pull(stream_);
    p.fwd.execute(stream_, {{DNNL_ARG_SRC, p.src.mem()},
                            {DNNL_ARG_WEIGHTS, p.wei.mem()},
                            {DNNL_ARG_BIAS, bias},
                            {DNNL_ARG_DST, p.dst.mem()}});
    p.dst.push(stream_);
    stream_.wait();
  }

  // dw, db and dx (unless nullptr) from dy, x and dx in the layout `src`
  // describes, dy in the one `dst` does.
  void conv_backward(const Conv2dShape &s, const float *x, const float *w, const float *dy,
                     float *dx, float *dw, float *db, const memory::desc &src,
                     const memory::desc &dst) {
    ConvPrimitives &p = primitives(s, dx != nullptr);
    // Weights gradient (and bias).
    p.src.bind(engine_, p.bwd_weights_pd.src_desc(), src, const_cast<float *>(x));
    p.ddst.bind(engine_, p.bwd_weights_pd.diff_dst_desc(), dst, const_cast<float *>(dy));
    p.dwei.bind(engine_, p.bwd_weights_pd.diff_weights_desc(), user_weights(s), dw);
    memory dbias(p.bwd_weights_pd.diff_bias_desc(), engine_, db);
    p.src.pull(stream_);
    p.ddst.pull(stream_);
    p.bwd_weights.execute(stream_, {{DNNL_ARG_SRC, p.src.mem()},
                                    {DNNL_ARG_DIFF_DST, p.ddst.mem()},
                                    {DNNL_ARG_DIFF_WEIGHTS, p.dwei.mem()},
                                    {DNNL_ARG_DIFF_BIAS, dbias}});
    p.dwei.push(stream_);
    if (dx != nullptr) {
      p.ddst2.bind(engine_, p.bwd_data_pd.diff_dst_desc(), dst, const_cast<float *>(dy));
      // Own staging: backward data wants another weights layout than forward.
      p.wei_bwd.bind(engine_, p.bwd_data_pd.weights_desc(), user_weights(s),
                     const_cast<float *>(w));
      p.dsrc.bind(engine_, p.bwd_data_pd.diff_src_desc(), src, dx);
      if (p.bwd_data_pd.diff_dst_desc() == p.bwd_weights_pd.diff_dst_desc()) {
        p.ddst2 = p.ddst;  // already staged above
      } else {
        p.ddst2.pull(stream_);
      }
      p.wei_bwd.pull(stream_);
      p.bwd_data.execute(stream_, {{DNNL_ARG_DIFF_DST, p.ddst2.mem()},
                                   {DNNL_ARG_WEIGHTS, p.wei_bwd.mem()},
                                   {DNNL_ARG_DIFF_SRC, p.dsrc.mem()}});
      p.dsrc.push(stream_);
    }
    stream_.wait();
  }

  static memory::desc user_src(const Conv2dShape &s) {
    return memory::desc({s.batch, s.in_c, s.in_h, s.in_w}, dt::f32, tag::nchw);
  }
  static memory::desc user_dst(const Conv2dShape &s) {
    return memory::desc({s.batch, s.out_c, s.out_h(), s.out_w()}, dt::f32, tag::nchw);
  }
  // A conv block's layouts: its input's (and its gradient's), and its output's.
  struct Layouts {
    memory::desc src, dst;
    bool dst_blocked;
  };
  static Layouts block_layouts(const Conv2dShape &s, BlockLinks links) {
    auto blocked = [](memory::dims d) { return memory::desc(d, dt::f32, tag::nChw16c); };
    const bool src_blocked = links.from_block && s.in_c % 16 == 0;
    const bool dst_blocked = s.out_c % 16 == 0;
    return {src_blocked ? blocked({s.batch, s.in_c, s.in_h, s.in_w}) : user_src(s),
            dst_blocked ? blocked({s.batch, s.out_c, s.out_h(), s.out_w()}) : user_dst(s),
            dst_blocked};
  }
  static memory::desc user_weights(const Conv2dShape &s) {
    return memory::desc({s.out_c, s.in_c, s.kernel_h, s.kernel_w}, dt::f32, tag::oihw);
  }

  ConvPrimitives &primitives(const Conv2dShape &s, bool need_bwd_data) {
    ConvPrimitives *found = nullptr;
    for (auto &p : convs_)
      if (p->shape == s) found = p.get();
    if (found == nullptr) {
      auto p = std::make_unique<ConvPrimitives>();
      p->shape = s;
      memory::dims strides{s.stride, s.stride}, pad{s.pad, s.pad};
      // Right padding so that the output size is the floor formula's.
      memory::dims pad_r{(s.out_h() - 1) * s.stride + s.kernel_h - s.in_h - s.pad,
                         (s.out_w() - 1) * s.stride + s.kernel_w - s.in_w - s.pad};
      auto any = [](memory::dims d) { return memory::desc(d, dt::f32, tag::any); };
      memory::desc src = any({s.batch, s.in_c, s.in_h, s.in_w});
      memory::desc wei = any({s.out_c, s.in_c, s.kernel_h, s.kernel_w});
      memory::desc bias({s.out_c}, dt::f32, tag::x);
      memory::desc dst = any({s.batch, s.out_c, s.out_h(), s.out_w()});
      dnnl::convolution_forward::desc fd(dnnl::prop_kind::forward_training,
                                         dnnl::algorithm::convolution_direct, src, wei, bias, dst,
                                         strides, pad, pad_r);
      p->fwd_pd = dnnl::convolution_forward::primitive_desc(fd, engine_);
      p->fwd = dnnl::convolution_forward(p->fwd_pd);
      dnnl::convolution_backward_weights::desc wd(dnnl::algorithm::convolution_direct, src, wei,
                                                  bias, dst, strides, pad, pad_r);
      p->bwd_weights_pd =
          dnnl::convolution_backward_weights::primitive_desc(wd, engine_, p->fwd_pd);
      p->bwd_weights = dnnl::convolution_backward_weights(p->bwd_weights_pd);
      found = p.get();
      convs_.push_back(std::move(p));
    }
    if (need_bwd_data && !found->has_bwd_data) {
      memory::dims strides{s.stride, s.stride}, pad{s.pad, s.pad};
      memory::dims pad_r{(s.out_h() - 1) * s.stride + s.kernel_h - s.in_h - s.pad,
                         (s.out_w() - 1) * s.stride + s.kernel_w - s.in_w - s.pad};
      auto any = [](memory::dims d) { return memory::desc(d, dt::f32, tag::any); };
      dnnl::convolution_backward_data::desc bd(
          dnnl::algorithm::convolution_direct, any({s.batch, s.in_c, s.in_h, s.in_w}),
          any({s.out_c, s.in_c, s.kernel_h, s.kernel_w}),
          any({s.batch, s.out_c, s.out_h(), s.out_w()}), strides, pad, pad_r);
      found->bwd_data_pd =
          dnnl::convolution_backward_data::primitive_desc(bd, engine_, found->fwd_pd);
      found->bwd_data = dnnl::convolution_backward_data(found->bwd_data_pd);
      found->has_bwd_data = true;
    }
    return *found;
  }

  // Any window: forward if y != nullptr, else backward into dx.
  static void pool_generic(const PoolShape &s, const float *x, const float *dy, float *y,
                           float *dx) {
    const int oh = s.out_h(), ow = s.out_w();
    if (dx) std::memset(dx, 0, sizeof(float) * size_t(s.batch) * s.channels * s.in_h * s.in_w);
    for (size_t p = 0; p < size_t(s.batch) * s.channels; ++p) {
      const float *plane = x + p * s.in_h * s.in_w;
      for (int i = 0; i < oh; ++i)
        for (int j = 0; j < ow; ++j) {
          size_t best = size_t(i * s.window) * s.in_w + size_t(j * s.window);
          for (int a = 0; a < s.window; ++a)
            for (int c = 0; c < s.window; ++c) {
              size_t idx = size_t(i * s.window + a) * s.in_w + size_t(j * s.window + c);
              if (plane[idx] > plane[best]) best = idx;
            }
          if (y) y[(p * oh + i) * ow + j] = plane[best];
          if (dx) dx[p * s.in_h * s.in_w + best] = dy[(p * oh + i) * ow + j];
        }
    }
  }

  static void xent(int batch, int classes, const float *logits, const int32_t *labels,
                   float *dlogits, double *mean_loss, int64_t *correct) {
    double loss = 0;
    int64_t hits = 0;
    for (int n = 0; n < batch; ++n) {
      const float *z = logits + size_t(n) * classes;
      int best = 0;
      for (int k = 1; k < classes; ++k)
        if (z[k] > z[best]) best = k;
      if (best == labels[n]) ++hits;
      float zmax = z[best], denom = 0.f;
      for (int k = 0; k < classes; ++k) denom += std::exp(z[k] - zmax);
      float log_denom = std::log(denom);
      loss += double(log_denom - (z[labels[n]] - zmax));
      if (dlogits == nullptr) continue;
      float *d = dlogits + size_t(n) * classes;
      for (int k = 0; k < classes; ++k) {
        float p = std::exp(z[k] - zmax - log_denom);
        d[k] = (p - (k == labels[n] ? 1.f : 0.f)) / float(batch);
      }
    }
    *mean_loss = batch > 0 ? loss / batch : 0.0;
    *correct = hits;
  }

  int threads_;
  dnnl::engine engine_;
  dnnl::stream stream_;
  std::vector<std::unique_ptr<ConvPrimitives>> convs_;
};

}  // namespace

std::unique_ptr<Backend> make_cpu_backend(const BackendOptions &options) {
  return std::make_unique<CpuBackend>(options);
}

}  // namespace quorum::trainer
