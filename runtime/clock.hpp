// clock.hpp: monotonic time and deadlines for the timeouts of blocking calls.
#pragma once

#include <algorithm>
#include <chrono>
#include <cstdint>

namespace quorum {

using Clock = std::chrono::steady_clock;

inline uint64_t now_ns() {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(Clock::now().time_since_epoch())
      .count();
}

// A point in time after which a blocking call gives up; timeout_ms <= 0 never expires.
class Deadline {
 public:
  Deadline() = default;
  static Deadline after_ms(int64_t timeout_ms) {
    Deadline d;
    if (timeout_ms > 0) {
      d.infinite_ = false;
      // Capped at about 35 years, so that no timeout overflows the clock.
      d.at_ = Clock::now() + std::chrono::milliseconds(std::min<int64_t>(timeout_ms, 1LL << 40));
    }
    return d;
  }
  static Deadline never() { return Deadline(); }
  bool infinite() const { return infinite_; }
  bool expired() const { return !infinite_ && Clock::now() >= at_; }
  // Milliseconds left (clamped to [0, cap]); cap when infinite.
  int remaining_ms(int cap = 1000) const {
    if (infinite_) return cap;
    auto left = std::chrono::duration_cast<std::chrono::milliseconds>(at_ - Clock::now()).count();
    if (left < 0) return 0;
    return left > cap ? cap : static_cast<int>(left);
  }

 private:
  bool infinite_ = true;
  Clock::time_point at_{};
};

}  // namespace quorum
