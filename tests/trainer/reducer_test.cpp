// reducer_test.cpp: the trainer's distributed gradient reducer over threads on
// inproc:
// - the factor that turns a partial round's sum into the step's gradient
//   (--partial-scale world, sqrt, count), checked on rounds whose contributors
//   the test fixes (one fresh gradient; one fresh and one carried; a late one
//   dropped), on every rank, with the catch-up count of the ranks that skip;
// - the bucketed synchronous allreduce (--bucket-kb): buckets as the backward
//   pass reports layer ranges, in order, out of order or leaving a part out,
//   always ending on the average of every rank's gradient; a rank drawn to
//   be slow (injected imbalance) holds its buckets until after the delay.
#include <gtest/gtest.h>

#include <cmath>
#include <vector>

#include "quorum/quorum.h"
#include "tests/support/thread_ranks.hpp"
#include "trainer/distributed/collective_reducer.hpp"
#include "trainer/distributed/gradient_buckets.hpp"

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
// with carry or 2 x f(1) with drop; with a carry weight w, (2 + 3w) x f(1 + w).
void run_scenario(int p, PartialScale scale, bool carry, double weight = 1) {
  test::run_c_ranks(p, [&](quorum_comm_t comm) {
    const int rank = quorum_comm_rank(comm);
    ReducerOptions o;
    o.mode = "solo";
    o.carry = carry;
    o.carry_weight = weight;
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
    const float second =
        carry ? float(2 + 3 * weight) * partial_round_scale(scale, p, 1 + weight) : 2 * first;

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
      SCOPED_TRACE(testing::Message()
                   << "P " << p << ", scale " << static_cast<int>(scale) << ", carry weight 0.5");
      run_scenario(p, scale, true, 0.5);
    }
  }
}

TEST(CollectiveReducer, CarryWeightOutsideItsRangeOrWithDropIsRefused) {
  test::run_c_ranks(1, [](quorum_comm_t comm) {
    std::unique_ptr<CollectiveReducer> red;
    ReducerOptions o;
    o.mode = "majority";
    for (double w : {0.0, -1.0, 1.5, std::nan("")}) {
      o.carry_weight = w;
      EXPECT_EQ(CollectiveReducer::create(comm, o, nullptr, &red), QUORUM_ERR_INVALID_ARG) << w;
      EXPECT_NE(std::string(last_error()).find("expected a weight in (0, 1]"), std::string::npos)
          << last_error();
    }
    o.carry_weight = 0.5;
    o.carry = false;
    EXPECT_EQ(CollectiveReducer::create(comm, o, nullptr, &red), QUORUM_ERR_INVALID_ARG);
    EXPECT_NE(std::string(last_error()).find("with --drop-late"), std::string::npos)
        << last_error();
  });
}

// Rank r's gradient: element i is i + 1000 r (exact sums; the average of P
// ranks is i + 500 (P - 1)).
std::vector<float> rank_gradient(int rank, size_t count) {
  std::vector<float> g(count);
  for (size_t i = 0; i < count; ++i) g[i] = static_cast<float>(i) + 1000.0f * rank;
  return g;
}

void expect_average(const std::vector<float> &g, int p, int rank, const char *what) {
  for (size_t i = 0; i < g.size(); ++i) {
    ASSERT_FLOAT_EQ(g[i], static_cast<float>(i) + 500.0f * (p - 1))
        << "rank " << rank << ", " << what << ", element " << i;
  }
}

struct Range {
  size_t offset, n;
};

TEST(GradientBuckets, SendAsRangesGetFinalAndAverageEverything) {
  struct Case {
    const char *what;
    std::vector<Range> ranges;  // in the order backward reports them
    size_t bucket_bytes;
    int64_t allreduces;
  };
  const std::vector<Case> cases = {
      // 256 floats per bucket: [500, 1000) once 500 are final, then [0, 500).
      {"in order", {{900, 100}, {500, 400}, {0, 500}}, 1024, 2},
      {"one bucket per range", {{900, 100}, {500, 400}, {0, 500}}, 4, 3},
      {"larger than the gradient", {{900, 100}, {500, 400}, {0, 500}}, 1 << 20, 1},
      // [0, 500) goes out, [500, 1000) is out of order: sent whole by finish.
      {"out of order", {{0, 500}, {500, 500}}, 1024, 2},
      // The first range does not reach the end: [500, 900), [0, 500), and
      // finish sends [900, 1000).
      {"end left out", {{500, 400}, {0, 500}}, 1024, 3},
      {"nothing reported early", {}, 1024, 0},
  };
  for (int p : {2, 3}) {
    for (const Case &c : cases) {
      SCOPED_TRACE(testing::Message() << "P " << p << ", " << c.what);
      test::run_c_ranks(p, [&](quorum_comm_t comm) {
        const int rank = quorum_comm_rank(comm);
        GradientBuckets buckets(comm, c.bucket_bytes);
        for (int64_t step = 0; step < 3; ++step) {
          std::vector<float> g = rank_gradient(rank, 1000);
          for (const Range &r : c.ranges) buckets.ready(g.data(), r.offset, r.n, step);
          if (c.ranges.empty()) {
            ASSERT_FALSE(buckets.started(g.data(), step));
            continue;
          }
          ASSERT_TRUE(buckets.started(g.data(), step));
          ASSERT_EQ(buckets.finish(g.size()), kOk) << last_error();
          EXPECT_FALSE(buckets.started(g.data(), step));
          EXPECT_EQ(buckets.last_step_allreduces(), c.allreduces);
          expect_average(g, p, rank, c.what);
        }
      });
    }
  }
}

// Through the reducer: synchronous steps use the buckets, partial rounds do not.
TEST(CollectiveReducer, BucketsOnlyInSynchronousSteps) {
  for (const char *mode : {"sync", "solo"}) {
    SCOPED_TRACE(mode);
    test::run_c_ranks(3, [&](quorum_comm_t comm) {
      const int rank = quorum_comm_rank(comm);
      ReducerOptions o;
      o.mode = mode;
      o.bucket_bytes = 1024;
      o.sync_epochs = 1;  // solo: step 0 is synchronous, step 1 a partial round
      std::unique_ptr<CollectiveReducer> red;
      ASSERT_EQ(CollectiveReducer::create(comm, o, nullptr, &red), kOk) << last_error();
      red->set_steps_per_epoch(1);
      for (int64_t step = 0; step < 2; ++step) {
        std::vector<float> g = rank_gradient(rank, 1000);
        red->gradient_ready(g.data(), 500, 500, step);
        red->gradient_ready(g.data(), 0, 500, step);
        ReduceInfo info;
        // A partial round's result depends on who was in time: synchronise
        // the posts so every rank is (solo, step 1).
        ASSERT_EQ(quorum_barrier(comm), QUORUM_OK);
        ASSERT_EQ(red->reduce_gradients(g.data(), g.size(), MemoryKind::Host, step, &info), kOk)
            << last_error();
        const bool bucketed = std::string(mode) == "sync" || step == 0;
        EXPECT_EQ(red->bucketed_steps(), bucketed ? step + 1 : 1) << "step " << step;
        if (bucketed) {
          EXPECT_EQ(red->last_step_allreduces(), 2) << "step " << step;
          expect_average(g, 3, rank, "synchronous step");
        }
      }
      double drained = 0;
      ASSERT_EQ(red->finish(&drained), kOk) << last_error();
    });
  }
}

// Rank 1 is slow at every step (slow:1:5): its buckets leave only after its
// delay, in reduce_gradients, still cut as the others' (same allreduces), and
// every rank ends on the average.
TEST(CollectiveReducer, SlowRankHoldsItsBucketsUntilAfterTheDelay) {
  test::run_c_ranks(3, [&](quorum_comm_t comm) {
    const int rank = quorum_comm_rank(comm);
    ReducerOptions o;
    o.mode = "sync";
    o.bucket_bytes = 1024;
    ASSERT_EQ(ImbalanceModel::parse("slow:1:5", 1, &o.imbalance), kOk) << last_error();
    std::unique_ptr<CollectiveReducer> red;
    ASSERT_EQ(CollectiveReducer::create(comm, o, nullptr, &red), kOk) << last_error();
    for (int64_t step = 0; step < 3; ++step) {
      std::vector<float> g = rank_gradient(rank, 1000);
      red->gradient_ready(g.data(), 500, 500, step);
      red->gradient_ready(g.data(), 0, 500, step);
      EXPECT_EQ(red->bucketed_steps(), rank == 1 ? step : step + 1)
          << "rank " << rank << " step " << step << ": buckets started before the delay";
      const double slept = red->inject_imbalance(step);
      if (rank == 1) {
        EXPECT_GE(slept, 0.004) << "step " << step;
      } else {
        EXPECT_EQ(slept, 0.0) << "rank " << rank;
      }
      ReduceInfo info;
      ASSERT_EQ(red->reduce_gradients(g.data(), g.size(), MemoryKind::Host, step, &info), kOk)
          << last_error();
      EXPECT_EQ(red->bucketed_steps(), step + 1) << "rank " << rank;
      EXPECT_EQ(red->last_step_allreduces(), 2) << "rank " << rank << " step " << step;
      expect_average(g, 3, rank, "slow rank's buckets");
    }
    double drained = 0;
    ASSERT_EQ(red->finish(&drained), kOk) << last_error();
  });
}

}  // namespace
}  // namespace quorum::trainer
