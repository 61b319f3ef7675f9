// param_layout.hpp: the table of named views into one flat parameter buffer.
//
// Parameters, gradients and optimizer state all use this one layout, so each
// is a single contiguous buffer (the gradient is then one allreduce input) and
// a view is just (offset, count). Offsets are rounded up to 16 elements so every
// view starts 64-byte aligned in float buffers.
#pragma once

#include <cstddef>
#include <string>
#include <vector>

namespace quorum::trainer {

struct ParamView {
  std::string name;        // "conv1.weight", "fc2.bias", ...
  std::vector<int> shape;  // e.g. {16, 1, 5, 5}
  size_t offset = 0;       // in elements, from the start of the buffer
  size_t count = 0;        // product of shape
  size_t fan_in = 0;       // inputs per output (initialisation bound)
};

class ParamLayout {
 public:
  static constexpr size_t kAlignElements = 16;

  // Appends a view; returns its index.
  size_t add(const std::string &name, std::vector<int> shape, size_t fan_in);
  const std::vector<ParamView> &views() const { return views_; }
  const ParamView *find(const std::string &name) const;
  // Elements in the buffer, padding included (a multiple of kAlignElements).
  size_t total() const { return total_; }

 private:
  std::vector<ParamView> views_;
  size_t total_ = 0;
};

}  // namespace quorum::trainer
