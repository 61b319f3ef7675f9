// delay_compensation_test.cpp: DC-ASGD-a's correction of carried gradients
// (--delay-compensation):
// - the arithmetic: nothing added while gradients are on time; after a late
//   one, its term L * W * g^2 * (w_now - w_then) / sqrt(meansquare) is added
//   to the next post, once;
// - through the reducer on 2-4 ranks: a late gradient and its correction land
//   in the next round on every rank, the same values everywhere;
// - the refusals: a negative or non-finite lambda, with --drop-late, and
//   gradients without host parameters.
#include <gtest/gtest.h>

#include <cmath>
#include <vector>

#include "quorum/quorum.h"
#include "tests/support/thread_ranks.hpp"
#include "trainer/distributed/collective_reducer.hpp"
#include "trainer/distributed/delay_compensation.hpp"

namespace quorum::trainer {
namespace {

TEST(DelayCompensation, CorrectsOnlyTheGradientAfterALateOne) {
  DelayCompensation dc(/*lambda0=*/2.0, /*carry_weight=*/0.5, 3);
  std::vector<float> w{0, 0, 0};
  std::vector<float> g{1, -2, 0};
  dc.before_post(g.data(), w.data());  // the first: nothing to correct
  EXPECT_EQ(g, (std::vector<float>{1, -2, 0}));
  dc.after_round(true);  // on time
  w = {1, 1, 1};
  std::vector<float> g2{3, 3, 3};
  dc.before_post(g2.data(), w.data());
  EXPECT_EQ(g2, (std::vector<float>{3, 3, 3})) << "corrected after an on-time gradient";

  dc.after_round(false);  // g2 = 3s at w = 1s was late
  EXPECT_TRUE(dc.pending());
  w = {2, 0, 1};
  std::vector<float> g3{1, 1, 1};
  dc.before_post(g3.data(), w.data());
  EXPECT_FALSE(dc.pending());
  // meansquare: 1, 4, 0 after the first; then 0.95 ms + 0.05 * 9; then + 0.05 * 1.
  const float ms1[3] = {1, 4, 0};
  for (int i = 0; i < 3; ++i) {
    const float ms2 = 0.95f * ms1[i] + 0.05f * 9;
    const float ms3 = 0.95f * ms2 + 0.05f * 1;
    const float dw = w[i] - 1.0f;
    const float want = 1 + 2.0f * 0.5f / (std::sqrt(ms3) + 1e-7f) * 9 * dw;
    EXPECT_NEAR(g3[i], want, 1e-5f) << "element " << i;
  }
  // Once only: the next post after an on-time round is left alone.
  dc.after_round(true);
  std::vector<float> g4{5, 5, 5};
  w = {7, 7, 7};
  dc.before_post(g4.data(), w.data());
  EXPECT_EQ(g4, (std::vector<float>{5, 5, 5}));
}

constexpr size_t kCount = 257;

// Round 0: rank 0 alone posts 1s. Rank 1 then posts 3s at parameters 0, late
// (the others ran round 0 without it), so they are carried. Its parameters
// move to 2, and round 1 is rank 1 alone posting 2s: with weight W and lambda
// L its contribution is 2 + W 3 + L W 9 (2 - 0) / sqrt(0.95 9 + 0.05 4), and
// every rank applies it / P (world scale).
void run_late_then_corrected(int p, double weight, double lambda0) {
  test::run_c_ranks(p, [&](quorum_comm_t comm) {
    const int rank = quorum_comm_rank(comm);
    ReducerOptions o;
    o.mode = "solo";
    o.carry_weight = weight;
    o.delay_compensation = lambda0;
    std::unique_ptr<CollectiveReducer> red;
    ASSERT_EQ(CollectiveReducer::create(comm, o, nullptr, &red), kOk) << last_error();
    std::vector<float> params(kCount, 0.0f), g(kCount);
    red->track_parameters(params.data(), kCount);
    ASSERT_EQ(red->prepare(kCount), kOk) << last_error();
    ReduceInfo info;
    auto post = [&](float value, int64_t step) {
      std::fill(g.begin(), g.end(), value);
      ASSERT_EQ(red->reduce_gradients(g.data(), kCount, MemoryKind::Host, step, &info), kOk)
          << last_error();
    };
    auto catch_up = [&] {
      ASSERT_EQ(red->steps_behind(), 1) << "rank " << rank;
      ASSERT_EQ(red->skip_step(g.data(), kCount, MemoryKind::Host, 0, &info), kOk) << last_error();
    };
    auto barrier = [&] { ASSERT_EQ(quorum_barrier(comm), QUORUM_OK) << quorum_last_error(); };

    if (rank == 0) post(1.0f, 0);
    barrier();
    if (rank == 1) post(3.0f, 0);  // late
    if (rank > 1) catch_up();
    barrier();
    std::fill(params.begin(), params.end(), 2.0f);
    if (rank == 1) post(2.0f, 1);
    barrier();
    if (rank != 1) catch_up();
    const double ms = 0.95 * 9 + 0.05 * 4;
    const double own = 2 + weight * 3 + lambda0 * weight * 9 * 2 / (std::sqrt(ms) + 1e-7);
    const float want = static_cast<float>(own / p);
    for (size_t i = 0; i < kCount; ++i)
      ASSERT_NEAR(g[i], want, 1e-5f * want) << "rank " << rank << ", element " << i;
    double drained = -1;
    ASSERT_EQ(red->finish(&drained), kOk) << last_error();
    EXPECT_EQ(drained, 0.0);
  });
}

TEST(CollectiveReducer, LateGradientRidesWithItsCorrection) {
  for (int p : {2, 3, 4}) {
    SCOPED_TRACE(testing::Message() << "P " << p);
    run_late_then_corrected(p, 1.0, 0.5);
    run_late_then_corrected(p, 0.5, 2.0);
  }
}

TEST(CollectiveReducer, DelayCompensationRefusals) {
  test::run_c_ranks(1, [](quorum_comm_t comm) {
    std::unique_ptr<CollectiveReducer> red;
    ReducerOptions o;
    o.mode = "majority";
    for (double l : {-1.0, std::nan(""), HUGE_VAL}) {
      o.delay_compensation = l;
      EXPECT_EQ(CollectiveReducer::create(comm, o, nullptr, &red), QUORUM_ERR_INVALID_ARG) << l;
      EXPECT_NE(std::string(last_error()).find("--delay-compensation"), std::string::npos);
    }
    o.delay_compensation = 1;
    o.carry = false;
    EXPECT_EQ(CollectiveReducer::create(comm, o, nullptr, &red), QUORUM_ERR_INVALID_ARG);
    EXPECT_NE(std::string(last_error()).find("with --drop-late"), std::string::npos);
    // Without track_parameters (device parameters), the first partial step fails.
    o.carry = true;
    ASSERT_EQ(CollectiveReducer::create(comm, o, nullptr, &red), kOk) << last_error();
    std::vector<float> g(8, 1.0f);
    ReduceInfo info;
    EXPECT_EQ(red->reduce_gradients(g.data(), g.size(), MemoryKind::Host, 0, &info),
              QUORUM_ERR_INVALID_ARG);
    EXPECT_NE(std::string(last_error()).find("host memory"), std::string::npos) << last_error();
    red->abandon();
  });
}

}  // namespace
}  // namespace quorum::trainer
