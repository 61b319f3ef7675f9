// model_spec.hpp: models declared as a short list of layers.
//
// A ModelSpec is data only (no buffers); model.hpp turns it into shapes, a
// parameter layout and forward/backward calls on a backend.
#pragma once

#include <string>
#include <vector>

#include "runtime/status.hpp"

namespace quorum::trainer {

enum class LayerKind { Conv2d, Relu, MaxPool, Linear };

struct LayerSpec {
  LayerKind kind = LayerKind::Relu;
  int out = 0;     // conv: output channels; linear: output features
  int kernel = 0;  // conv
  int stride = 1;  // conv
  int pad = 0;     // conv
  int window = 2;  // max-pool (window == stride)
};

inline LayerSpec conv(int out, int kernel, int stride, int pad) {
  return {LayerKind::Conv2d, out, kernel, stride, pad, 0};
}
inline LayerSpec relu() {
  return {LayerKind::Relu, 0, 0, 1, 0, 0};
}
inline LayerSpec maxpool(int window) {
  return {LayerKind::MaxPool, 0, 0, 1, 0, window};
}
inline LayerSpec linear(int out) {
  return {LayerKind::Linear, out, 0, 1, 0, 0};
}

struct ModelSpec {
  std::string name;
  int in_c = 0, in_h = 0, in_w = 0;  // input image
  int classes = 0;                   // the last linear layer's width
  std::vector<LayerSpec> layers;     // ends with a linear layer of `classes` outputs
};

// "fm-s" (Fashion-MNIST) and "cifar-cnn" (3x32x32); INVALID_ARG listing the names otherwise.
Status find_model(const std::string &name, ModelSpec *out);
std::vector<std::string> model_names();

}  // namespace quorum::trainer
