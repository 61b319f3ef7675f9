// bootstrap.cpp: the Bootstrap defaults and the single-process bootstrap.
#include "runtime/bootstrap/bootstrap.hpp"

#include <algorithm>
#include <cstdint>
#include <vector>

#include "runtime/knobs.hpp"

namespace quorum {

Status Bootstrap::barrier() {
  uint8_t in = 1;
  std::vector<uint8_t> out(static_cast<size_t>(size()));
  return allgather(&in, out.data(), 1);
}

int64_t Bootstrap::wait_ms() const {
  const int64_t timeout = knob_timeout_ms.get();
  if (wait_limit_ms_ <= 0) return timeout;
  return timeout > 0 ? std::min(timeout, wait_limit_ms_) : wait_limit_ms_;
}

namespace {
class SingleBootstrap : public Bootstrap {
 public:
  const char *name() const override { return "single"; }
  int rank() const override { return 0; }
  int size() const override { return 1; }
  Status allgather(const void *in, void *out, size_t bytes) override {
    if (bytes > 0)
      std::copy_n(static_cast<const uint8_t *>(in), bytes, static_cast<uint8_t *>(out));
    return kOk;
  }
};
}  // namespace

std::unique_ptr<Bootstrap> make_single_bootstrap() {
  return std::make_unique<SingleBootstrap>();
}

}  // namespace quorum
