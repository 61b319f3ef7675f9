// imbalance.hpp: injected load imbalance, to reproduce eager-SGD's setting.
//
// A model decides, from the step number and a seed shared by all ranks (so
// every rank agrees without talking), how long each rank sleeps before it
// computes a step:
//   none            no delay
//   paper:D[:K]     per step, K (default 2; "1-2" draws 1 or 2) ranks drawn
//                   with the step as the seed sleep D ms (Li et al., PPoPP'20)
//   slow:R:D        rank R sleeps D ms every step (one persistently slow rank)
//   exp:M           every rank sleeps an exponential delay of mean M ms
#pragma once

#include <cstdint>
#include <string>

#include "runtime/status.hpp"

namespace quorum::trainer {

class ImbalanceModel {
 public:
  static Status parse(const std::string &spec, uint64_t seed, ImbalanceModel *out);
  // Whether the model does what it says on `size` ranks: slow:R needs rank R
  // and another rank, paper:D:K at most K = size ranks to draw.
  Status check_world(int size) const;
  // Milliseconds `rank` of `size` sleeps before computing `step`.
  double delay_ms(int rank, int size, int64_t step) const;
  // The expected delay of the slowest rank per step (what a synchronous step waits).
  double expected_max_delay_ms(int size) const;
  const std::string &spec() const { return spec_; }
  bool active() const { return kind_ != Kind::None; }

 private:
  enum class Kind { None, Paper, Slow, Exponential };
  Kind kind_ = Kind::None;
  std::string spec_ = "none";
  double ms_ = 0;
  int min_ranks_ = 0, max_ranks_ = 0;  // paper: how many ranks are delayed
  int slow_rank_ = 0;
  uint64_t seed_ = 0;
};

// A counter-based hash: the same (seed, a, b) gives the same value on every rank.
uint64_t mix64(uint64_t seed, uint64_t a, uint64_t b = 0);

}  // namespace quorum::trainer
