// pattern_simulation.hpp: what the pattern tests simulate with: partial
// reductions as counts of each rank's contribution, and the messages of one
// lock-step step matched against their receivers (patterns_test.cpp,
// tree_patterns_test.cpp).
#pragma once

#include <gtest/gtest.h>

#include <algorithm>
#include <string>
#include <utility>
#include <vector>

#include "collectives/patterns/blocks.hpp"

namespace quorum {
namespace patterns {
namespace simulation {

constexpr int kMaxSize = 33;

// A partial reduction: how many times each rank's contribution is in it.
using Contrib = std::vector<int>;

inline Contrib unit(int size, int rank) {
  Contrib c(size, 0);
  c[rank] = 1;
  return c;
}

inline void add(Contrib &into, const Contrib &from) {
  for (size_t i = 0; i < into.size(); ++i) into[i] += from[i];
}

inline bool complete(const Contrib &c) {
  return std::all_of(c.begin(), c.end(), [](int n) { return n == 1; });
}

inline std::string show(const Contrib &c) {
  std::string s = "[";
  for (int n : c) s += std::to_string(n);
  return s + "]";
}

// One message of a step: who, to whom, which blocks, and the payload.
struct Message {
  int from, to;
  BlockRange blocks;
  std::vector<Contrib> payload;
  bool consumed = false;
};

// The messages of one step, matched against the receivers' view.
class Step {
 public:
  void send(int from, int to, BlockRange blocks, std::vector<Contrib> payload = {}) {
    ASSERT_GE(to, 0) << "rank " << from << " sends to invalid rank";
    messages_.push_back({from, to, blocks, std::move(payload)});
  }
  // The message from `from` to `to`; fails if there is none or it was taken.
  const Message *receive(int to, int from) {
    for (Message &m : messages_) {
      if (m.from == from && m.to == to && !m.consumed) {
        m.consumed = true;
        return &m;
      }
    }
    ADD_FAILURE() << "rank " << to << " expects a message from " << from << " that was not sent";
    return nullptr;
  }
  void expect_all_received() const {
    for (const Message &m : messages_)
      EXPECT_TRUE(m.consumed) << "message " << m.from << " -> " << m.to << " never received";
  }

 private:
  std::vector<Message> messages_;
};

}  // namespace simulation
}  // namespace patterns
}  // namespace quorum
