// model_spec.cpp: the models quorum-train knows, in a few lines each.
#include "trainer/model_spec.hpp"

#include <fmt/format.h>

namespace quorum::trainer {

namespace {

ModelSpec fm_s() {
  // Fashion-MNIST small: two 5x5 convolutions and two linear layers (~0.23 M parameters).
  return {"fm-s",
          1,
          28,
          28,
          10,
          {conv(16, 5, 1, 2), relu(), maxpool(2),  // 16x14x14
           conv(32, 5, 1, 2), relu(), maxpool(2),  // 32x7x7 = 1568
           linear(128), relu(), linear(10)}};
}

ModelSpec cifar_cnn() {
  // CIFAR-sized: three 3x3 conv blocks (32, 64, 128 channels) and two linear layers.
  return {"cifar-cnn",
          3,
          32,
          32,
          10,
          {conv(32, 3, 1, 1), relu(), maxpool(2),   // 32x16x16
           conv(64, 3, 1, 1), relu(), maxpool(2),   // 64x8x8
           conv(128, 3, 1, 1), relu(), maxpool(2),  // 128x4x4 = 2048
           linear(256), relu(), linear(10)}};
}

}  // namespace

std::vector<std::string> model_names() {
  return {"fm-s", "cifar-cnn"};
}

Status find_model(const std::string &name, ModelSpec *out) {
  if (name == "fm-s") {
    *out = fm_s();
  } else if (name == "cifar-cnn") {
    *out = cifar_cnn();
  } else {
    return fail(QUORUM_ERR_INVALID_ARG, "trainer", "unknown model '{}' (known: {})", name,
                fmt::join(model_names(), ", "));
  }
  return kOk;
}

}  // namespace quorum::trainer
