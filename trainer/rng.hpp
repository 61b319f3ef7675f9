// rng.hpp: a small, portable, seedable random generator (SplitMix64).
//
// std::uniform_*_distribution differ between standard libraries; the trainer
// needs the same numbers everywhere (initial weights, shuffles, imbalance
// injection shared by all ranks), so it uses this instead.
#pragma once

#include <cstdint>

namespace quorum::trainer {

class Rng {
 public:
  explicit Rng(uint64_t seed) : state_(seed) {}
  // Mixes several values into one seed (e.g. seed, epoch, purpose).
  static uint64_t mix(uint64_t a, uint64_t b) {
    Rng r(a ^ (b * 0x9E3779B97F4A7C15ull));
    r.next();
    return r.next();
  }
  uint64_t next() {
    uint64_t z = (state_ += 0x9E3779B97F4A7C15ull);
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    return z ^ (z >> 31);
  }
  // Uniform in [0, 1) with 53 random bits.
  double uniform() { return double(next() >> 11) * (1.0 / 9007199254740992.0); }
  double uniform(double lo, double hi) { return lo + (hi - lo) * uniform(); }
  // Uniform integer in [0, n) (n > 0); the modulo bias is negligible for n << 2^64.
  uint64_t below(uint64_t n) { return next() % n; }
  uint64_t state() const { return state_; }

 private:
  uint64_t state_;
};

}  // namespace quorum::trainer
