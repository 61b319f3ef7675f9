// model.hpp: a ModelSpec bound to a backend: shapes, parameter layout, buffers,
// and the forward and backward passes as a plain sequence of backend calls.
//
// Buffers (all allocated through the backend, sized for max_batch):
//   params / grads : one flat buffer each, same ParamLayout (grads is the
//                    allreduce input); grads has kGradControlSlots more
//                    elements after the layout, which backward never
//                    touches: values the trainer reduces alongside the
//                    gradient (the stop request, trainer.cpp);
//   act[i]         : the input of layer i (act[0] = images, act[L] = logits);
//   dact[i]        : the gradient of act[i] (dact[L] = dlogits).
// Inside a fused call (see Fusion below), and between two conv blocks, act
// and dact are the backend's: in a layout of its own, or unwritten.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <vector>

#include "trainer/backend.hpp"
#include "trainer/model_spec.hpp"
#include "trainer/param_layout.hpp"

namespace quorum::trainer {

// One layer with its shapes resolved.
struct LayerPlan {
  LayerSpec spec;
  std::string name;  // "conv1", "relu1", "pool1", "fc1", ...
  int in_c = 0, in_h = 0, in_w = 0;
  int out_c = 0, out_h = 0, out_w = 0;
  int weight_view = -1, bias_view = -1;  // indices into the layout, -1 if none
  size_t in_size() const { return size_t(in_c) * in_h * in_w; }
  size_t out_size() const { return size_t(out_c) * out_h * out_w; }
};

// Resolves shapes and the parameter layout; INVALID_ARG if the spec does not fit.
Status plan_model(const ModelSpec &spec, std::vector<LayerPlan> *plan, ParamLayout *layout);

template <typename T>
class Model {
 public:
  static Status create(const ModelSpec &spec, BackendT<T> *backend, int max_batch,
                       std::unique_ptr<Model> *out);
  ~Model();
  Model(const Model &) = delete;
  Model &operator=(const Model &) = delete;

  const ModelSpec &spec() const { return spec_; }
  const ParamLayout &layout() const { return layout_; }
  const std::vector<LayerPlan> &plan() const { return plan_; }
  BackendT<T> &backend() { return *backend_; }
  int max_batch() const { return max_batch_; }
  size_t param_count() const { return layout_.total(); }
  // Elements of grads() after param_count() that ride in its reduction.
  static constexpr size_t kGradControlSlots = 1;
  size_t image_size() const { return plan_.front().in_size(); }

  // Backend memory.
  T *params() { return params_; }
  T *grads() { return grads_; }
  T *logits() { return act_.back(); }

  // PyTorch's default initialisation: weights and biases ~ U(-1/sqrt(fan_in), +1/sqrt(fan_in)),
  // each view from its own stream of `seed`.
  void init_params(uint64_t seed);
  void read_params(std::vector<T> *host) { read(params_, host); }
  void write_params(const std::vector<T> &host) { write(params_, host); }
  void read_grads(std::vector<T> *host) { read(grads_, host); }

  // Copies a batch from host memory: images [batch][c][h][w] (normalised), labels [batch].
  void load_batch(int batch, const T *images, const int32_t *labels);
  void forward(int batch);
  // Softmax cross-entropy of the logits; also writes dlogits for backward().
  void loss(int batch, double *mean_loss, int64_t *correct);
  void evaluate(int batch, double *mean_loss, int64_t *correct);
  // Fills grads from dlogits (every gradient overwritten). If given, `ready` is
  // called after each layer with parameters, with the range [offset, offset +
  // count) of grads that is now final: ranges come last layer first, are
  // contiguous and together cover [0, param_count()) (so a reducer can start
  // communicating the last layers while the first are still computing).
  using GradientReady = std::function<void(size_t offset, size_t count)>;
  void backward(int batch, const GradientReady &ready = nullptr);

 private:
  Model() = default;
  void read(const T *src, std::vector<T> *host);
  void write(T *dst, const std::vector<T> &host);
  T *view(T *base, int index) { return index < 0 ? nullptr : base + layout_.views()[index].offset; }
  // Layer i is a relu followed by a 2x2 max-pool.
  bool relu_then_pool2(size_t i) const;
  // The backend calls of a pass: a conv followed by a relu and a 2x2 max-pool
  // runs as one call (conv2d_relu_maxpool2_*), as does a relu followed by such
  // a pool (relu_maxpool2_*): their intermediate outputs are the backend's
  // (it may keep them in a layout of its own, or leave them unwritten).
  enum class Fusion { None, ReluPool2, ConvReluPool2 };
  struct Call {
    size_t first;  // the call's first layer
    Fusion fusion;
  };
  void plan_calls();
  // Whether call k's neighbours are conv blocks too (the tensors between two
  // blocks are the backend's, like those inside one).
  typename BackendT<T>::BlockLinks block_links(size_t k) const;
  static PoolShape pool_shape(int batch, const LayerPlan &p);
  static Conv2dShape conv_shape(int batch, const LayerPlan &p);

  ModelSpec spec_;
  std::vector<LayerPlan> plan_;
  ParamLayout layout_;
  BackendT<T> *backend_ = nullptr;
  int max_batch_ = 0;
  T *params_ = nullptr, *grads_ = nullptr;
  std::vector<T *> act_, dact_;
  std::vector<Call> calls_;
  int32_t *labels_ = nullptr;
};

extern template class Model<float>;
extern template class Model<double>;

}  // namespace quorum::trainer
