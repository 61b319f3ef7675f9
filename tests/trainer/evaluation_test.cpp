// evaluation_test.cpp: the test-set evaluation split across ranks (threads on
// inproc, with the trainer's collective reducer) gives every rank what one
// rank scoring the whole set gets; the blocks tile the set.
#include <gtest/gtest.h>

#include <cmath>
#include <memory>

#include "quorum/quorum.h"
#include "tests/support/thread_ranks.hpp"
#include "trainer/distributed/collective_reducer.hpp"
#include "trainer/evaluation.hpp"
#include "trainer/model_spec.hpp"

namespace quorum::trainer {
namespace {

TEST(EvaluationBlock, TilesTheSet) {
  for (size_t count : {0, 1, 10, 130, 10000}) {
    for (int world : {1, 2, 3, 4, 7}) {
      size_t next = 0;
      for (int r = 0; r < world; ++r) {
        size_t begin = 0, end = 0;
        evaluation_block(count, r, world, &begin, &end);
        EXPECT_EQ(begin, next) << count << " over " << world << ", rank " << r;
        EXPECT_LE(end - begin, count / size_t(world) + 1);
        next = end;
      }
      EXPECT_EQ(next, count) << count << " over " << world;
    }
  }
}

// fm-s with seed-7 weights on a synthetic test set of 130 (not a multiple of
// the batch or of the ranks).
struct Scorer {
  Scorer() {
    SyntheticOptions o;
    o.train_count = 16, o.test_count = 130;
    make_synthetic(o, &data);
    ModelSpec spec;
    EXPECT_EQ(find_model("fm-s", &spec), kOk);
    EXPECT_EQ(make_backend("cpu", BackendOptions{}, &backend), kOk);
    EXPECT_EQ(Model<float>::create(spec, backend.get(), 16, &model), kOk) << last_error();
    model->init_params(7);
  }
  Status score(GradientReducer *reducer, Evaluation *e) {
    return evaluate_test_set(*model, data.test, reducer, e);
  }
  DataSplit data;
  std::unique_ptr<Backend> backend;
  std::unique_ptr<Model<float>> model;
};

void expect_split_equals_whole(int p, const char *mode) {
  Evaluation whole;
  {
    Scorer one;
    LocalGradientReducer local;
    ASSERT_EQ(one.score(&local, &whole), kOk) << last_error();
  }
  ASSERT_EQ(whole.examples, 130);
  ASSERT_GT(whole.correct, 0);  // the check below must compare something
  test::run_c_ranks(p, [&](quorum_comm_t comm) {
    const int rank = quorum_comm_rank(comm);
    ReducerOptions o;
    o.mode = mode;
    std::unique_ptr<CollectiveReducer> red;
    ASSERT_EQ(CollectiveReducer::create(comm, o, nullptr, &red), kOk) << last_error();
    Scorer mine;
    Evaluation e;
    ASSERT_EQ(mine.score(red.get(), &e), kOk) << last_error();
    EXPECT_EQ(e.examples, whole.examples) << "rank " << rank;
    EXPECT_EQ(e.correct, whole.correct) << "rank " << rank;
    EXPECT_DOUBLE_EQ(e.accuracy, whole.accuracy) << "rank " << rank;
    EXPECT_NEAR(e.loss, whole.loss, 1e-6 * whole.loss) << "rank " << rank;
    double drained = 0;
    ASSERT_EQ(red->finish(&drained), kOk) << last_error();
  });
}

TEST(SplitEvaluation, EqualsOneRankScoringTheWholeSet) {
  expect_split_equals_whole(2, "sync");
  expect_split_equals_whole(3, "sync");
  expect_split_equals_whole(4, "solo");
}

}  // namespace
}  // namespace quorum::trainer
