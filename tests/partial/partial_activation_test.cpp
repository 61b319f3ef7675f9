// partial_activation_test.cpp: the pure parts of activation (activation.hpp):
// the binomial tree reaches every rank exactly once for any P and root, the
// majority initiator is uniform (chi-square), synchronous rounds, tag fields.
#include <gtest/gtest.h>

#include <queue>
#include <set>
#include <vector>

#include "collectives/partial/activation.hpp"

namespace quorum::partial {
namespace {

TEST(ActivationTree, ReachesEveryRankOnceForAnyPAndRoot) {
  for (int p = 1; p <= 70; ++p) {
    for (int root = 0; root < p; ++root) {
      std::vector<int> hits(p, 0);
      std::queue<int> q;
      q.push(root);
      hits[root] = 1;
      int depth_guard = 0;
      while (!q.empty()) {
        int r = q.front();
        q.pop();
        for (int c : tree_children(r, root, p)) {
          ASSERT_GE(c, 0);
          ASSERT_LT(c, p);
          ++hits[c];
          EXPECT_EQ(tree_parent(c, root, p), r) << "P=" << p << " root=" << root;
          q.push(c);
        }
        ASSERT_LT(++depth_guard, 10 * p + 10);
      }
      for (int r = 0; r < p; ++r) {
        EXPECT_EQ(hits[r], 1) << "P=" << p << " root=" << root << " rank=" << r;
      }
      EXPECT_EQ(tree_parent(root, root, p), -1);
    }
  }
}

TEST(ActivationTree, DepthIsCeilLog2P) {
  for (int p : {2, 3, 5, 8, 13, 64, 100}) {
    int ceil_log = 0;
    while ((1 << ceil_log) < p) ++ceil_log;
    for (int root = 0; root < p; root += 3) {
      int worst = 0;
      for (int r = 0; r < p; ++r) {
        int d = 0;
        for (int x = r; x != root; x = tree_parent(x, root, p)) ++d;
        worst = std::max(worst, d);
      }
      EXPECT_LE(worst, ceil_log) << "P=" << p;
    }
  }
}

TEST(MajorityInitiator, UniformByChiSquare) {
  // Critical values of chi-square at p = 0.001 for P-1 degrees of freedom.
  const std::vector<std::pair<int, double>> cases = {{2, 10.83}, {3, 13.82}, {4, 16.27}, {5, 18.47},
                                                     {6, 20.52}, {8, 24.32}, {16, 37.70}};
  for (auto [p, critical] : cases) {
    for (uint64_t seed : {uint64_t{0}, uint64_t{42}, uint64_t{0xdeadbeef}}) {
      const uint64_t n = 20000;
      std::vector<double> count(p, 0);
      for (uint64_t k = 0; k < n; ++k) ++count[majority_initiator(seed, k, p)];
      double chi = 0, e = static_cast<double>(n) / p;
      for (double c : count) chi += (c - e) * (c - e) / e;
      EXPECT_LT(chi, critical) << "P=" << p << " seed=" << seed;
    }
  }
}

TEST(MajorityInitiator, PureFunctionOfSeedAndRound) {
  EXPECT_EQ(majority_initiator(7, 123456789012345ull, 6),
            majority_initiator(7, 123456789012345ull, 6));
  int differ = 0;
  for (uint64_t k = 0; k < 100; ++k)
    differ += majority_initiator(1, k, 8) != majority_initiator(2, k, 8);
  EXPECT_GT(differ, 50) << "the seed must change the sequence";
  // Consecutive rounds are not correlated (no repeating pattern of period P).
  int same_as_next = 0;
  for (uint64_t k = 0; k < 8000; ++k)
    same_as_next += majority_initiator(3, k, 4) == majority_initiator(3, k + 1, 4);
  EXPECT_NEAR(same_as_next / 8000.0, 0.25, 0.03);
}

TEST(SyncRounds, EveryAPlusOneth) {
  EXPECT_TRUE(scheduled_sync_round(0, 0));
  EXPECT_TRUE(scheduled_sync_round(5, 0));
  EXPECT_FALSE(scheduled_sync_round(0, 3));
  EXPECT_TRUE(scheduled_sync_round(3, 3));
  EXPECT_TRUE(scheduled_sync_round(7, 3));
  EXPECT_FALSE(scheduled_sync_round(8, 3));
}

TEST(Tags, RoundFieldsWrapOnlyBeyondRoundsInFlight) {
  EXPECT_EQ(round_seq(3, 5), (uint64_t{3} << 20) | 5);
  EXPECT_EQ(round_seq(3, (uint64_t{1} << 20) + 5), round_seq(3, 5));
  EXPECT_NE(round_seq(3, 5), round_seq(4, 5));
  EXPECT_EQ(round_seq(256 + 3, 5), round_seq(3, 5));
  EXPECT_LT(round_seq(255, ~uint64_t{0}), uint64_t{1} << 28);
  EXPECT_LT(kMaxStaleness + 2, uint64_t{1} << 20);
}

}  // namespace
}  // namespace quorum::partial
