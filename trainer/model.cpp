// model.cpp: see model.hpp. Forward and backward read top to bottom.
#include "trainer/model.hpp"

#include <cmath>

#include "trainer/rng.hpp"

namespace quorum::trainer {

Status plan_model(const ModelSpec &spec, std::vector<LayerPlan> *plan, ParamLayout *layout) {
  plan->clear();
  *layout = ParamLayout();
  int c = spec.in_c, h = spec.in_h, w = spec.in_w;
  if (c <= 0 || h <= 0 || w <= 0 || spec.layers.empty())
    return fail(QUORUM_ERR_INVALID_ARG, "trainer", "model '{}': empty input or no layers",
                spec.name);
  int convs = 0, relus = 0, pools = 0, fcs = 0;
  for (const LayerSpec &ls : spec.layers) {
    LayerPlan p;
    p.spec = ls;
    p.in_c = c, p.in_h = h, p.in_w = w;
    switch (ls.kind) {
      case LayerKind::Conv2d: {
        p.name = "conv" + std::to_string(++convs);
        Conv2dShape s{1, c, h, w, ls.out, ls.kernel, ls.kernel, ls.stride, ls.pad};
        p.out_c = ls.out, p.out_h = s.out_h(), p.out_w = s.out_w();
        size_t fan_in = size_t(c) * ls.kernel * ls.kernel;
        p.weight_view =
            int(layout->add(p.name + ".weight", {ls.out, c, ls.kernel, ls.kernel}, fan_in));
        p.bias_view = int(layout->add(p.name + ".bias", {ls.out}, fan_in));
        break;
      }
      case LayerKind::Relu:
        p.name = "relu" + std::to_string(++relus);
        p.out_c = c, p.out_h = h, p.out_w = w;
        break;
      case LayerKind::MaxPool:
        p.name = "pool" + std::to_string(++pools);
        p.out_c = c, p.out_h = h / ls.window, p.out_w = w / ls.window;
        break;
      case LayerKind::Linear: {
        p.name = "fc" + std::to_string(++fcs);
        int in = c * h * w;
        p.out_c = ls.out, p.out_h = 1, p.out_w = 1;
        p.weight_view = int(layout->add(p.name + ".weight", {ls.out, in}, size_t(in)));
        p.bias_view = int(layout->add(p.name + ".bias", {ls.out}, size_t(in)));
        break;
      }
    }
    if (p.out_c <= 0 || p.out_h <= 0 || p.out_w <= 0)
      return fail(QUORUM_ERR_INVALID_ARG, "trainer", "model '{}': layer {} has an empty output",
                  spec.name, p.name);
    c = p.out_c, h = p.out_h, w = p.out_w;
    plan->push_back(p);
  }
  if (plan->back().spec.kind != LayerKind::Linear || c != spec.classes)
    return fail(QUORUM_ERR_INVALID_ARG, "trainer",
                "model '{}': must end with a linear layer of {} outputs", spec.name, spec.classes);
  return kOk;
}

template <typename T>
Status Model<T>::create(const ModelSpec &spec, BackendT<T> *backend, int max_batch,
                        std::unique_ptr<Model> *out) {
  if (max_batch <= 0)
    return fail(QUORUM_ERR_INVALID_ARG, "trainer", "batch size must be positive, got {}",
                max_batch);
  std::unique_ptr<Model> m(new Model());
  m->spec_ = spec;
  m->backend_ = backend;
  m->max_batch_ = max_batch;
  QUORUM_CHECK(plan_model(spec, &m->plan_, &m->layout_));
  m->plan_calls();
  const size_t pbytes = m->layout_.total() * sizeof(T);
  m->params_ = static_cast<T *>(backend->alloc(pbytes));
  m->grads_ = static_cast<T *>(backend->alloc(pbytes + kGradControlSlots * sizeof(T)));
  m->labels_ = static_cast<int32_t *>(backend->alloc(sizeof(int32_t) * max_batch));
  bool ok = m->params_ && m->grads_ && m->labels_;
  for (size_t i = 0; i <= m->plan_.size(); ++i) {
    size_t n = i < m->plan_.size() ? m->plan_[i].in_size() : m->plan_.back().out_size();
    m->act_.push_back(static_cast<T *>(backend->alloc(n * max_batch * sizeof(T))));
    m->dact_.push_back(static_cast<T *>(backend->alloc(n * max_batch * sizeof(T))));
    ok = ok && m->act_.back() && m->dact_.back();
  }
  if (!ok)
    return fail(QUORUM_ERR_NO_MEMORY, "trainer", "backend {} could not allocate model '{}'",
                backend->name(), spec.name);
  *out = std::move(m);
  return kOk;
}

template <typename T>
Model<T>::~Model() {
  if (backend_ == nullptr) return;
  for (T *p : act_) backend_->free(p);
  for (T *p : dact_) backend_->free(p);
  backend_->free(params_);
  backend_->free(grads_);
  backend_->free(labels_);
}

template <typename T>
void Model<T>::init_params(uint64_t seed) {
  std::vector<T> host(layout_.total(), T(0));
  for (size_t v = 0; v < layout_.views().size(); ++v) {
    const ParamView &pv = layout_.views()[v];
    Rng rng(Rng::mix(seed, v + 1));
    double bound = 1.0 / std::sqrt(double(pv.fan_in));
    for (size_t i = 0; i < pv.count; ++i) host[pv.offset + i] = T(rng.uniform(-bound, bound));
  }
  write(params_, host);
}

template <typename T>
void Model<T>::read(const T *src, std::vector<T> *host) {
  host->resize(layout_.total());
  backend_->copy_to_host(host->data(), src, host->size() * sizeof(T));
}

template <typename T>
void Model<T>::write(T *dst, const std::vector<T> &host) {
  backend_->copy_to_device(dst, host.data(), std::min(host.size(), layout_.total()) * sizeof(T));
}

template <typename T>
void Model<T>::load_batch(int batch, const T *images, const int32_t *labels) {
  backend_->copy_to_device(act_[0], images, size_t(batch) * image_size() * sizeof(T));
  backend_->copy_to_device(labels_, labels, size_t(batch) * sizeof(int32_t));
}

template <typename T>
bool Model<T>::relu_then_pool2(size_t i) const {
  return i + 1 < plan_.size() && plan_[i].spec.kind == LayerKind::Relu &&
         plan_[i + 1].spec.kind == LayerKind::MaxPool && plan_[i + 1].spec.window == 2;
}

template <typename T>
void Model<T>::plan_calls() {
  calls_.clear();
  for (size_t i = 0; i < plan_.size();) {
    if (plan_[i].spec.kind == LayerKind::Conv2d && relu_then_pool2(i + 1)) {
      calls_.push_back({i, Fusion::ConvReluPool2});
      i += 3;
    } else if (relu_then_pool2(i)) {
      calls_.push_back({i, Fusion::ReluPool2});
      i += 2;
    } else {
      calls_.push_back({i, Fusion::None});
      i += 1;
    }
  }
}

template <typename T>
typename BackendT<T>::BlockLinks Model<T>::block_links(size_t k) const {
  auto block = [this](size_t j) {
    return j < calls_.size() && calls_[j].fusion == Fusion::ConvReluPool2;
  };
  return {k > 0 && block(k - 1), block(k + 1)};
}

template <typename T>
PoolShape Model<T>::pool_shape(int batch, const LayerPlan &p) {
  return PoolShape{batch, p.in_c, p.in_h, p.in_w, p.spec.window};
}

template <typename T>
Conv2dShape Model<T>::conv_shape(int batch, const LayerPlan &p) {
  return Conv2dShape{batch,         p.in_c,        p.in_h,        p.in_w,    p.out_c,
                     p.spec.kernel, p.spec.kernel, p.spec.stride, p.spec.pad};
}

template <typename T>
void Model<T>::forward(int batch) {
  BackendT<T> &be = *backend_;
  for (size_t k = 0; k < calls_.size(); ++k) {
    const Call &call = calls_[k];
    const size_t i = call.first;
    const LayerPlan &p = plan_[i];
    T *const *a = act_.data() + i;  // a[0]: the call's input, a[j]: its j-th layer's output
    switch (call.fusion) {
      case Fusion::ConvReluPool2:
        be.conv2d_relu_maxpool2_forward(conv_shape(batch, p), block_links(k), a[0],
                                        view(params_, p.weight_view), view(params_, p.bias_view),
                                        a[1], a[2], a[3]);
        continue;
      case Fusion::ReluPool2:
        be.relu_maxpool2_forward(pool_shape(batch, plan_[i + 1]), a[0], a[1], a[2]);
        continue;
      case Fusion::None:
        break;
    }
    switch (p.spec.kind) {
      case LayerKind::Conv2d:
        be.conv2d_forward(conv_shape(batch, p), a[0], view(params_, p.weight_view),
                          view(params_, p.bias_view), a[1]);
        break;
      case LayerKind::Relu:
        be.relu_forward(size_t(batch) * p.in_size(), a[0], a[1]);
        break;
      case LayerKind::MaxPool:
        be.maxpool_forward(pool_shape(batch, p), a[0], a[1]);
        break;
      case LayerKind::Linear:
        be.linear_forward(LinearShape{batch, int(p.in_size()), p.out_c}, a[0],
                          view(params_, p.weight_view), view(params_, p.bias_view), a[1]);
        break;
    }
  }
}

template <typename T>
void Model<T>::loss(int batch, double *mean_loss, int64_t *correct) {
  backend_->softmax_xent(batch, spec_.classes, act_.back(), labels_, dact_.back(), mean_loss,
                         correct);
}

template <typename T>
void Model<T>::evaluate(int batch, double *mean_loss, int64_t *correct) {
  forward(batch);
  backend_->softmax_xent_eval(batch, spec_.classes, act_.back(), labels_, mean_loss, correct);
}

template <typename T>
void Model<T>::backward(int batch, const GradientReady &ready) {
  BackendT<T> &be = *backend_;
  size_t ready_end = layout_.total();  // grads at or after this index are final
  for (size_t k = calls_.size(); k-- > 0;) {
    const size_t i = calls_[k].first;
    const LayerPlan &p = plan_[i];  // a call's weights are its first layer's
    T *const *a = act_.data() + i;
    T *const *d = dact_.data() + i;   // the gradients of a
    T *dx = i == 0 ? nullptr : d[0];  // nobody needs the gradient of the images
    T *w = view(params_, p.weight_view), *dw = view(grads_, p.weight_view);
    T *db = view(grads_, p.bias_view);
    switch (calls_[k].fusion) {
      case Fusion::ConvReluPool2:
        be.conv2d_relu_maxpool2_backward(conv_shape(batch, p), block_links(k), a[0], w, a[1], a[2],
                                         a[3], d[3], d[1], d[2], dx, dw, db);
        break;
      case Fusion::ReluPool2:
        if (dx)
          be.relu_maxpool2_backward(pool_shape(batch, plan_[i + 1]), a[0], a[1], a[2], d[2], d[1],
                                    dx);
        break;
      case Fusion::None:
        switch (p.spec.kind) {
          case LayerKind::Conv2d:
            be.conv2d_backward(conv_shape(batch, p), a[0], w, d[1], dx, dw, db);
            break;
          case LayerKind::Relu:
            if (dx) be.relu_backward(size_t(batch) * p.in_size(), a[1], d[1], dx);
            break;
          case LayerKind::MaxPool:
            if (dx) be.maxpool_backward(pool_shape(batch, p), a[0], a[1], d[1], dx);
            break;
          case LayerKind::Linear:
            be.linear_backward(LinearShape{batch, int(p.in_size()), p.out_c}, a[0], w, d[1], dx, dw,
                               db);
            break;
        }
        break;
    }
    if (ready && p.weight_view >= 0) {
      const size_t begin = layout_.views()[size_t(p.weight_view)].offset;
      ready(begin, ready_end - begin);
      ready_end = begin;
    }
  }
}

template class Model<float>;
template class Model<double>;

}  // namespace quorum::trainer
