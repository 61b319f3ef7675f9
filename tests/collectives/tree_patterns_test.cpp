// tree_patterns_test.cpp: the binomial and k-nomial trees (broadcast and
// reduce level by level, every size up to 33 and every root), simulated in
// memory as in patterns_test.cpp.
#include <gtest/gtest.h>

#include <algorithm>
#include <map>
#include <numeric>
#include <vector>

#include "collectives/patterns/binomial_tree.hpp"
#include "collectives/patterns/knomial_tree.hpp"
#include "tests/collectives/pattern_simulation.hpp"

namespace quorum {
namespace patterns {
namespace {

using namespace simulation;

// A rooted tree given by parent/children functions, checked for consistency.
template <typename ParentFn, typename ChildrenFn, typename DepthFn>
void check_tree(int P, int root, ParentFn parent, ChildrenFn children, DepthFn depth, int max_depth,
                bool full) {
  EXPECT_EQ(parent(root), kNoPeer);
  EXPECT_EQ(depth(root), 0);
  int edges = 0;
  std::vector<int> subtree(P, 1);
  // Subtree sizes by decreasing depth.
  std::vector<int> order(P);
  std::iota(order.begin(), order.end(), 0);
  std::sort(order.begin(), order.end(), [&](int a, int b) { return depth(a) > depth(b); });
  for (int r : order) {
    for (int c : children(r)) subtree[r] += subtree[c];
  }
  for (int r = 0; r < P; ++r) {
    SCOPED_TRACE(testing::Message() << "rank " << r);
    const std::vector<int> kids = children(r);
    edges += int(kids.size());
    for (size_t i = 0; i < kids.size(); ++i) {
      ASSERT_EQ(parent(kids[i]), r) << "child " << kids[i];
      EXPECT_EQ(depth(kids[i]), depth(r) + 1);
      // In a full tree (P a power of the radix) larger subtrees go first.
      if (i > 0 && full) {
        EXPECT_GE(subtree[kids[i - 1]], subtree[kids[i]]);
      }
    }
    if (r != root) {
      const int p = parent(r);
      ASSERT_TRUE(valid_rank(p, P));
      const std::vector<int> siblings = children(p);
      EXPECT_EQ(std::count(siblings.begin(), siblings.end(), r), 1);
    }
    EXPECT_LE(depth(r), max_depth);
  }
  EXPECT_EQ(edges, P - 1);
  EXPECT_EQ(subtree[root], P);
}

// Runs a broadcast and a reduce level by level. bcast_send(r, t) gives the
// ranks r sends to at level t, bcast_recv(r, t) the rank it receives from.
template <typename SendFn, typename RecvFn, typename RSendFn, typename RRecvFn, typename ChildrenFn,
          typename ParentFn>
void simulate_tree(int P, int root, int levels, SendFn bcast_send, RecvFn bcast_recv,
                   RSendFn reduce_send, RRecvFn reduce_recv, ChildrenFn children, ParentFn parent) {
  // Broadcast: only ranks that have the value send; everyone receives once.
  std::vector<int> got(P, 0);
  got[root] = 1;
  std::vector<std::vector<int>> sent_to(P);
  for (int t = 0; t < levels; ++t) {
    SCOPED_TRACE(testing::Message() << "bcast level " << t);
    Step step;
    for (int r = 0; r < P; ++r) {
      for (int q : bcast_send(r, t)) {
        ASSERT_EQ(got[r], 1) << "rank " << r << " sends before it has the value";
        step.send(r, q, {});
        sent_to[r].push_back(q);
      }
    }
    for (int r = 0; r < P; ++r) {
      const int from = bcast_recv(r, t);
      if (from == kNoPeer) continue;
      ASSERT_EQ(from, parent(r)) << "rank " << r;
      ASSERT_NE(step.receive(r, from), nullptr);
      ASSERT_EQ(got[r], 0) << "rank " << r << " receives twice";
      got[r] = 1;
    }
    step.expect_all_received();
  }
  for (int r = 0; r < P; ++r) {
    EXPECT_EQ(got[r], 1) << "rank " << r << " never got the broadcast";
    EXPECT_EQ(sent_to[r], children(r)) << "rank " << r << " sends out of order";
  }
  // Reduce: a rank sends once, after all its children, and then is done.
  std::vector<Contrib> acc(P);
  for (int r = 0; r < P; ++r) acc[r] = unit(P, r);
  std::vector<int> done(P, 0);
  std::vector<std::vector<int>> heard_from(P);
  std::vector<std::map<int, int>> heard_at(P);  // child -> reduce level
  for (int t = 0; t < levels; ++t) {
    SCOPED_TRACE(testing::Message() << "reduce level " << t);
    Step step;
    for (int r = 0; r < P; ++r) {
      const int to = reduce_send(r, t);
      if (to == kNoPeer) continue;
      ASSERT_EQ(to, parent(r));
      ASSERT_EQ(done[r], 0) << "rank " << r << " sends twice";
      ASSERT_EQ(heard_from[r].size(), children(r).size())
          << "rank " << r << " sends before hearing from all children";
      step.send(r, to, {}, {acc[r]});
      done[r] = 1;
    }
    for (int r = 0; r < P; ++r) {
      for (int from : reduce_recv(r, t)) {
        ASSERT_EQ(done[r], 0) << "rank " << r << " receives after it sent";
        const Message *m = step.receive(r, from);
        ASSERT_NE(m, nullptr);
        add(acc[r], m->payload[0]);
        heard_from[r].push_back(from);
        heard_at[r][from] = t;
      }
    }
    step.expect_all_received();
  }
  ASSERT_TRUE(complete(acc[root])) << show(acc[root]);
  for (int r = 0; r < P; ++r) {
    EXPECT_EQ(done[r], r == root ? 0 : 1) << "rank " << r;
    // Every child is heard from, in the reverse of the broadcast send order
    // (children served last in a broadcast finish first in a reduce).
    const std::vector<int> kids = children(r);
    ASSERT_EQ(heard_at[r].size(), kids.size()) << "rank " << r;
    for (size_t i = 1; i < kids.size(); ++i)
      EXPECT_GE(heard_at[r][kids[i - 1]], heard_at[r][kids[i]]) << "rank " << r << " child " << i;
  }
}

TEST(BinomialTree, EverySizeAndRoot) {
  namespace bt = binomial_tree;
  for (int P = 1; P <= kMaxSize; ++P) {
    for (int root = 0; root < P; ++root) {
      SCOPED_TRACE(testing::Message() << "P " << P << " root " << root);
      EXPECT_EQ(bt::steps(P), ceil_log2(P));
      check_tree(
          P, root, [&](int r) { return bt::parent(r, P, root); },
          [&](int r) { return bt::children(r, P, root); },
          [&](int r) { return bt::depth(r, P, root); }, bt::steps(P), is_power_of_two(P));
      auto one = [](int q) { return q == kNoPeer ? std::vector<int>{} : std::vector<int>{q}; };
      simulate_tree(
          P, root, bt::steps(P),
          [&](int r, int t) { return one(bt::bcast_send_to(r, P, root, t)); },
          [&](int r, int t) { return bt::bcast_recv_from(r, P, root, t); },
          [&](int r, int t) { return bt::reduce_send_to(r, P, root, t); },
          [&](int r, int t) { return one(bt::reduce_recv_from(r, P, root, t)); },
          [&](int r) { return bt::children(r, P, root); },
          [&](int r) { return bt::parent(r, P, root); });
      if (HasFatalFailure()) return;
    }
  }
}

TEST(KnomialTree, EverySizeRootAndRadix) {
  namespace kt = knomial_tree;
  for (int k : {2, 3, 4, 5, 8, 40}) {
    for (int P = 1; P <= kMaxSize; ++P) {
      for (int root = 0; root < P; ++root) {
        SCOPED_TRACE(testing::Message() << "k " << k << " P " << P << " root " << root);
        const int L = kt::steps(P, k);
        ASSERT_GE(ipow(k, L), P);
        if (L > 0) {
          ASSERT_LT(ipow(k, L - 1), P);
        }
        check_tree(
            P, root, [&](int r) { return kt::parent(r, P, root, k); },
            [&](int r) { return kt::children(r, P, root, k); },
            [&](int r) { return kt::depth(r, P, root, k); }, L, ipow(k, L) == P);
        simulate_tree(
            P, root, L, [&](int r, int t) { return kt::bcast_send_to(r, P, root, k, t); },
            [&](int r, int t) { return kt::bcast_recv_from(r, P, root, k, t); },
            [&](int r, int t) { return kt::reduce_send_to(r, P, root, k, t); },
            [&](int r, int t) { return kt::reduce_recv_from(r, P, root, k, t); },
            [&](int r) { return kt::children(r, P, root, k); },
            [&](int r) { return kt::parent(r, P, root, k); });
        if (HasFatalFailure()) return;
        // Radix 2 is the binomial tree.
        if (k == 2) {
          for (int r = 0; r < P; ++r) {
            EXPECT_EQ(kt::parent(r, P, root, 2), binomial_tree::parent(r, P, root));
            EXPECT_EQ(kt::children(r, P, root, 2), binomial_tree::children(r, P, root));
          }
        }
      }
    }
  }
}

TEST(Trees, BadArguments) {
  namespace bt = binomial_tree;
  namespace kt = knomial_tree;
  EXPECT_EQ(bt::parent(0, 4, 4), kNoPeer);
  EXPECT_TRUE(bt::children(4, 4, 0).empty());
  EXPECT_EQ(bt::depth(-1, 4, 0), -1);
  EXPECT_EQ(bt::bcast_send_to(0, 4, 0, 2), kNoPeer);
  EXPECT_EQ(bt::reduce_recv_from(0, 1, 0, 0), kNoPeer);
  EXPECT_EQ(kt::steps(10, 1), 0);
  EXPECT_EQ(kt::parent(1, 4, 0, 1), kNoPeer);
  EXPECT_TRUE(kt::children(0, 4, 0, 0).empty());
  EXPECT_EQ(kt::depth(0, 4, 9, 3), -1);
  EXPECT_TRUE(kt::bcast_send_to(0, 9, 0, 3, 2).empty());
  EXPECT_EQ(kt::reduce_send_to(1, 9, 0, 3, -1), kNoPeer);
}

}  // namespace
}  // namespace patterns
}  // namespace quorum
