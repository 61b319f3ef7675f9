// param_layout.cpp: see param_layout.hpp.
#include "trainer/param_layout.hpp"

namespace quorum::trainer {

size_t ParamLayout::add(const std::string &name, std::vector<int> shape, size_t fan_in) {
  ParamView v;
  v.name = name;
  v.count = 1;
  for (int d : shape) v.count *= size_t(d);
  v.shape = std::move(shape);
  v.offset = total_;
  v.fan_in = fan_in;
  total_ += (v.count + kAlignElements - 1) / kAlignElements * kAlignElements;
  views_.push_back(std::move(v));
  return views_.size() - 1;
}

const ParamView *ParamLayout::find(const std::string &name) const {
  for (const auto &v : views_)
    if (v.name == name) return &v;
  return nullptr;
}

}  // namespace quorum::trainer
