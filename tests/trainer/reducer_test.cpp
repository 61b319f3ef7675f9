// reducer_test.cpp: the trainer's distributed gradient reducer over threads on
// inproc: the factor that turns a partial round's sum into the step's gradient
// (--partial-scale world, sqrt, count), checked on rounds whose contributors
// the test fixes (one fresh gradient; one fresh and one carried; a late one
// dropped), on every rank, with the catch-up count of the ranks that skip.
#include <gtest/gtest.h>

#include <cmath>
#include <vector>

#include "quorum/quorum.h"
#include "tests/support/thread_ranks.hpp"
#include "trainer/distributed/collective_reducer.hpp"

namespace quorum::trainer {
namespace {

TEST(PartialRoundScale, Factors) {
  EXPECT_FLOAT_EQ(partial_round_scale(PartialScale::World, 4, 1), 0.25f);
  EXPECT_FLOAT_EQ(partial_round_scale(PartialScale::World, 4, 7), 0.25f);
  EXPECT_FLOAT_EQ(partial_round_scale(PartialScale::Sqrt, 4, 1), 0.5f);
  EXPECT_FLOAT_EQ(partial_round_scale(PartialScale::Sqrt, 4, 4), 0.25f);  // all fresh: as world
  EXPECT_FLOAT_EQ(partial_round_scale(PartialScale::Sqrt, 2, 8), 0.25f);
  EXPECT_FLOAT_EQ(partial_round_scale(PartialScale::Count, 4, 2), 0.5f);
  EXPECT_FLOAT_EQ(partial_round_scale(PartialScale::Count, 4, 0), 1.0f);  // n < 1 counts as 1
  EXPECT_FLOAT_EQ(partial_round_scale(PartialScale::Sqrt, 3, -2), 1.0f / std::sqrt(3.0f));
}

constexpr size_t kCount = 1000;

// Every element of v equals want.
void expect_all(const std::vector<float> &v, float want, int rank, const char *what) {
  for (size_t i = 0; i < v.size(); ++i) {
    ASSERT_FLOAT_EQ(v[i], want) << "rank " << rank << ", " << what << ", element " << i;
  }
}

// Round 0: rank 0 alone posts 1s. Then rank 1 posts 3s, late for round 0
// (it joined it with nothing), so they ride in round 1 (carry) or are dropped;
// the other ranks catch up on round 0. Round 1: rank 0 alone posts 2s again.
// Every rank must apply 1 x f(1) after round 0, and after round 1 (2 + 3) x f(2)
// with carry or 2 x f(1) with drop.
void run_scenario(int p, PartialScale scale, bool carry) {
  test::run_c_ranks(p, [&](quorum_comm_t comm) {
    const int rank = quorum_comm_rank(comm);
    ReducerOptions o;
    o.mode = "solo";
    o.carry = carry;
    o.scale = scale;
    std::unique_ptr<CollectiveReducer> red;
    ASSERT_EQ(CollectiveReducer::create(comm, o, nullptr, &red), kOk) << last_error();
    ASSERT_EQ(red->prepare(kCount), kOk) << last_error();
    std::vector<float> g(kCount);
    ReduceInfo info;
    // Applies the round the others ran without this rank's post.
    auto catch_up = [&](const char *what) {
      ASSERT_EQ(red->steps_behind(), 1) << "rank " << rank << ", " << what;
      ASSERT_EQ(red->skip_step(g.data(), kCount, MemoryKind::Host, 0, &info), kOk) << last_error();
      EXPECT_EQ(red->steps_behind(), 0) << "rank " << rank << ", " << what;
    };
    const float first = partial_round_scale(scale, p, 1);
    const float second = carry ? 5 * partial_round_scale(scale, p, 2) : 2 * first;

    // Posts `value` everywhere and applies the round it lands in, with only
    // one fresh gradient in that round.
    auto post = [&](float value, int64_t step) {
      std::fill(g.begin(), g.end(), value);
      ASSERT_EQ(red->reduce_gradients(g.data(), kCount, MemoryKind::Host, step, &info), kOk)
          << last_error();
      EXPECT_EQ(info.contributors, 1) << "rank " << rank;
    };
    auto barrier = [&] { ASSERT_EQ(quorum_barrier(comm), QUORUM_OK) << quorum_last_error(); };

    if (rank == 0) post(1.0f, 0);
    barrier();
    if (rank == 1) post(3.0f, 0);  // late: rank 1 joined round 0 in the barrier
    if (rank > 1) catch_up("round 0");
    expect_all(g, first, rank, "round 0");
    barrier();

    if (rank == 0) post(2.0f, 1);
    barrier();
    if (rank > 0) catch_up("round 1");
    if (rank == 1) {
      EXPECT_EQ(info.carried, carry ? 1 : 0);
    }
    expect_all(g, second, rank, "round 1");
    double drained = -1;
    ASSERT_EQ(red->finish(&drained), kOk) << last_error();
    EXPECT_EQ(drained, 0.0);
  });
}

TEST(CollectiveReducer, PartialRoundsScaledByTheirContributors) {
  for (int p : {2, 3, 4}) {
    for (PartialScale scale : {PartialScale::World, PartialScale::Sqrt, PartialScale::Count}) {
      for (bool carry : {true, false}) {
        SCOPED_TRACE(testing::Message() << "P " << p << ", scale " << static_cast<int>(scale)
                                        << (carry ? ", carry" : ", drop"));
        run_scenario(p, scale, carry);
      }
    }
  }
}

}  // namespace
}  // namespace quorum::trainer
