// backend.hpp: the compute interface every trainer backend implements.
//
// A backend owns its memory (host for `ref`/`cpu`, device for `cuda`): every
// buffer the model touches is allocated, copied and freed through it, and every
// layer's forward and backward is one call on buffers it allocated. The model
// (model.hpp) only sequences these calls, so a new backend is one class that
// fills this table; `ref` is the oracle it is checked against (tests/trainer).
//
// Layouts: activations are NCHW, contiguous (except the intermediates of a fused
// call, which are the backend's). Conv weights are [out_c][in_c][kh][kw],
// linear weights are [out][in] (y = x W^T + b). Backward calls OVERWRITE the
// gradients they produce (never accumulate), so the flat gradient buffer needs
// no zeroing between steps. Calls may be asynchronous on devices; synchronize()
// waits for all of them (the trainer calls it before reading timers).
//
// The interface is templated on the element type so that `ref` also runs in
// double for finite-difference gradient checks; fast backends implement
// Backend = BackendT<float> only.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>

#include "runtime/status.hpp"

namespace quorum::trainer {

// Where a backend's buffers live (the gradient reducer must know).
enum class MemoryKind { Host, Cuda };

// Shape of one conv2d call (square stride and padding; any kernel size).
struct Conv2dShape {
  int batch = 0;
  int in_c = 0, in_h = 0, in_w = 0;
  int out_c = 0, kernel_h = 0, kernel_w = 0;
  int stride = 1, pad = 0;
  int out_h() const { return (in_h + 2 * pad - kernel_h) / stride + 1; }
  int out_w() const { return (in_w + 2 * pad - kernel_w) / stride + 1; }
  bool operator==(const Conv2dShape &o) const {
    return batch == o.batch && in_c == o.in_c && in_h == o.in_h && in_w == o.in_w &&
           out_c == o.out_c && kernel_h == o.kernel_h && kernel_w == o.kernel_w &&
           stride == o.stride && pad == o.pad;
  }
};

// Shape of one max-pool call (window == stride, no padding; floor on odd sizes).
struct PoolShape {
  int batch = 0, channels = 0, in_h = 0, in_w = 0;
  int window = 2;
  int out_h() const { return in_h / window; }
  int out_w() const { return in_w / window; }
};

// Shape of one linear call: x [batch][in], W [out][in], y [batch][out].
struct LinearShape {
  int batch = 0, in = 0, out = 0;
};

// Hyper-parameters of one SGD step (PyTorch semantics):
//   g' = g + weight_decay * w;  v = momentum * v + g';  w -= lr * v.
struct SgdStep {
  double lr = 0.0;
  double momentum = 0.0;
  double weight_decay = 0.0;
};

template <typename T>
class BackendT {
 public:
  virtual ~BackendT() = default;

  virtual std::string name() const = 0;  // "ref", "cpu", "cuda"
  virtual MemoryKind memory_kind() const = 0;

  // ---- memory: 64-byte aligned, zero-filled; nullptr on failure ----
  virtual void *alloc(size_t bytes) = 0;
  virtual void free(void *ptr) = 0;
  virtual void copy_to_device(void *dst, const void *host_src, size_t bytes) = 0;
  virtual void copy_to_host(void *host_dst, const void *src, size_t bytes) = 0;
  virtual void copy_device(void *dst, const void *src, size_t bytes) = 0;
  virtual void fill_zero(void *dst, size_t bytes) = 0;
  // Waits until every call issued so far has finished.
  virtual void synchronize() {}

  // ---- conv2d ----
  // y[N][out_c][oh][ow] = conv(x, w) + b
  virtual void conv2d_forward(const Conv2dShape &s, const T *x, const T *w, const T *b, T *y) = 0;
  // From dy: dw and db (overwritten), and dx unless dx == nullptr (first layer).
  virtual void conv2d_backward(const Conv2dShape &s, const T *x, const T *w, const T *dy, T *dx,
                               T *dw, T *db) = 0;

  // ---- ReLU (y may alias x; dx may alias dy) ----
  virtual void relu_forward(size_t n, const T *x, T *y) = 0;
  // dx = dy where y > 0, else 0 (y is the forward output).
  virtual void relu_backward(size_t n, const T *y, const T *dy, T *dx) = 0;

  // ---- max-pool; ties go to the first maximum in row-major window order ----
  virtual void maxpool_forward(const PoolShape &s, const T *x, T *y) = 0;
  // dx is overwritten: dy routed to each window's (first) maximum, zero elsewhere.
  virtual void maxpool_backward(const PoolShape &s, const T *x, const T *y, const T *dy, T *dx) = 0;

  // ---- a ReLU followed by a 2x2 max-pool ----
  // r = relu(x) and y = maxpool(r) (s: the pool's shape). The model reads r
  // nowhere else, so a backend may fuse the two and leave r unwritten.
  virtual void relu_maxpool2_forward(const PoolShape &s, const T *x, T *r, T *y) {
    relu_forward(size_t(s.batch) * s.channels * s.in_h * s.in_w, x, r);
    maxpool_forward(s, r, y);
  }
  // dx (overwritten) from dy through both layers (x, r, y as in the forward);
  // dr: scratch of r's size, which a fused backend leaves unwritten.
  virtual void relu_maxpool2_backward(const PoolShape &s, const T *x, const T *r, const T *y,
                                      const T *dy, T *dr, T *dx) {
    (void)x;
    maxpool_backward(s, r, y, dy, dr);
    relu_backward(size_t(s.batch) * s.channels * s.in_h * s.in_w, r, dr, dx);
  }

  // ---- a conv2d, a ReLU and a 2x2 max-pool (s: the conv's shape) ----
  // y = maxpool2(relu(conv(x, w) + b)). c (the conv's output) and r (the
  // relu's) belong to the backend between this call and the block's backward:
  // the model reads them nowhere else, so a backend may keep c in a layout of
  // its own (the convolutions' blocked one: no reorder between the layers) and
  // leave r unwritten. So may x (and dx) when `links` says they pass from the
  // previous block, and y (and dy) when they pass to the next one; else they
  // are NCHW.
  struct BlockLinks {
    bool from_block = false;  // x is the previous block's y, dx its dy
    bool to_block = false;    // y is the next block's x, dy its dx
  };
  virtual void conv2d_relu_maxpool2_forward(const Conv2dShape &s, BlockLinks links, const T *x,
                                            const T *w, const T *b, T *c, T *r, T *y) {
    (void)links;
    conv2d_forward(s, x, w, b, c);
    relu_maxpool2_forward(pool2_after(s), c, r, y);
  }
  // dw, db (overwritten), and dx unless nullptr, from dy (x, c, r, y as in the
  // forward); dc and dr: scratch of c's and r's size.
  virtual void conv2d_relu_maxpool2_backward(const Conv2dShape &s, BlockLinks links, const T *x,
                                             const T *w, const T *c, const T *r, const T *y,
                                             const T *dy, T *dc, T *dr, T *dx, T *dw, T *db) {
    (void)links;
    relu_maxpool2_backward(pool2_after(s), c, r, y, dy, dr, dc);
    conv2d_backward(s, x, w, dc, dx, dw, db);
  }
  // The shape of the 2x2 max-pool over a conv's output.
  static PoolShape pool2_after(const Conv2dShape &s) {
    return PoolShape{s.batch, s.out_c, s.out_h(), s.out_w(), 2};
  }

  // ---- linear ----
  virtual void linear_forward(const LinearShape &s, const T *x, const T *w, const T *b, T *y) = 0;
  // dw, db overwritten; dx unless nullptr.
  virtual void linear_backward(const LinearShape &s, const T *x, const T *w, const T *dy, T *dx,
                               T *dw, T *db) = 0;

  // ---- softmax + cross-entropy, mean over the batch ----
  // labels: int32 [batch] in backend memory. Writes dlogits = (softmax - onehot) / batch
  // (may alias logits). Returns the mean loss and the number of correct argmax
  // predictions (first maximum wins) through host pointers.
  virtual void softmax_xent(int batch, int classes, const T *logits, const int32_t *labels,
                            T *dlogits, double *mean_loss, int64_t *correct) = 0;
  // Forward only (evaluation): loss and correct count, no gradient.
  virtual void softmax_xent_eval(int batch, int classes, const T *logits, const int32_t *labels,
                                 double *mean_loss, int64_t *correct) = 0;

  // ---- optimizer and reductions over flat buffers ----
  virtual void sgd_update(size_t n, const SgdStep &step, T *params, const T *grads,
                          T *momentum) = 0;
  // y = alpha * y (the reducer's averaging; gradient clipping later).
  virtual void scale(size_t n, double alpha, T *y) = 0;
  // avg = decay * avg + (1 - decay) * x (the parameters' moving average, --ema-decay).
  virtual void average_into(size_t n, double decay, T *avg, const T *x) = 0;
  // sum of x[i]^2 in double (gradient-noise-scale estimates for the tuner).
  virtual double sum_squares(size_t n, const T *x) = 0;
};

using Backend = BackendT<float>;

// Options shared by the backend constructors.
struct BackendOptions {
  int threads = 1;  // compute threads of this rank (cpu backend)
  int device = 0;   // device ordinal (cuda backend)
};

// Creates "ref", "cpu" or "cuda" (the latter only in builds with CUDA and a device);
// QUORUM_ERR_UNSUPPORTED with a message naming the backend otherwise.
Status make_backend(const std::string &name, const BackendOptions &options,
                    std::unique_ptr<Backend> *out);

// The reference backend in double precision (gradient checks).
std::unique_ptr<BackendT<double>> make_ref_backend_double();

}  // namespace quorum::trainer
