// knob_override.hpp: sets a knob for the lifetime of a scope (tests).
#pragma once

#include <string>

#include "runtime/knobs.hpp"

namespace quorum::test {

class KnobOverride {
 public:
  KnobOverride(const char *name, const std::string &value) : knob_(find_knob(name)) {
    if (knob_) knob_->set_override(value);
  }
  ~KnobOverride() {
    if (knob_) knob_->set_override(std::nullopt);
  }
  KnobOverride(const KnobOverride &) = delete;
  KnobOverride &operator=(const KnobOverride &) = delete;
  bool found() const { return knob_ != nullptr; }

 private:
  KnobBase *knob_;
};

}  // namespace quorum::test
