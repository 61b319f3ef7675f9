// staged_evaluation_test.cpp: the pilot's staged evaluation scores a part of
// the test set when that part is clearly above or below the target, and the
// whole set (with exactly evaluate_test_set's result) when it is not.
#include <gtest/gtest.h>

#include <memory>

#include "trainer/backend.hpp"
#include "trainer/model_spec.hpp"
#include "trainer/tuner/staged_evaluation.hpp"

namespace qt = quorum::trainer;
namespace tu = quorum::trainer::tuner;

namespace {
// fm-s with seed-3 weights (about one test example in ten right) on a
// synthetic test set of 5,000.
struct Untrained {
  Untrained() {
    qt::SyntheticOptions o;
    o.train_count = 16, o.test_count = 5000;
    qt::make_synthetic(o, &data);
    qt::ModelSpec spec;
    EXPECT_EQ(qt::find_model("fm-s", &spec), quorum::kOk);
    EXPECT_EQ(qt::make_backend("cpu", qt::BackendOptions{}, &backend), quorum::kOk);
    EXPECT_EQ(qt::Model<float>::create(spec, backend.get(), 64, &model), quorum::kOk);
    model->init_params(3);
  }
  qt::DataSplit data;
  std::unique_ptr<qt::Backend> backend;
  std::unique_ptr<qt::Model<float>> model;
  qt::LocalGradientReducer local;
};
}  // namespace

TEST(StagedEvaluation, DecidesOnAPartFarFromTheTargetAndOnTheWholeNearIt) {
  Untrained u;
  qt::Evaluation whole;
  ASSERT_EQ(qt::evaluate_test_set(*u.model, u.data.test, &u.local, &whole), quorum::kOk);
  ASSERT_GT(whole.accuracy, 0.02);
  ASSERT_LT(whole.accuracy, 0.5);
  const tu::StagedEvaluation staged(u.data.test, {0.1, 0.3});
  EXPECT_EQ(staged.stages(), 3u);
  qt::Evaluation e;
  bool early = false;
  // Far below the target: the first tenth says so.
  ASSERT_EQ(staged.evaluate(*u.model, &u.local, 0.9, &e, &early), quorum::kOk);
  EXPECT_TRUE(early);
  EXPECT_EQ(e.examples, 500);
  EXPECT_LT(e.accuracy, 0.9);
  // Far above it: likewise.
  ASSERT_EQ(staged.evaluate(*u.model, &u.local, 0.005, &e, &early), quorum::kOk);
  EXPECT_TRUE(early);
  EXPECT_EQ(e.examples, 500);
  // At the whole set's own accuracy no part decides: the whole set is scored,
  // and the result is evaluate_test_set's.
  ASSERT_EQ(staged.evaluate(*u.model, &u.local, whole.accuracy, &e, &early), quorum::kOk);
  EXPECT_FALSE(early);
  EXPECT_EQ(e.examples, 5000);
  EXPECT_EQ(e.correct, whole.correct);
  EXPECT_NEAR(e.loss, whole.loss, 1e-9 * whole.loss);
}

TEST(StagedEvaluation, StagesUnderTheMinimumOrBeyondTheSetAreSkipped) {
  Untrained u;
  // 0.03 of 5,000 is under 200 examples; 1.0 is the whole set anyway.
  EXPECT_EQ(tu::StagedEvaluation(u.data.test, {0.03, 0.3, 1.0}).stages(), 2u);
  // No stages: one evaluation of the whole set.
  const tu::StagedEvaluation whole_only(u.data.test, {});
  EXPECT_EQ(whole_only.stages(), 1u);
  qt::Evaluation e;
  bool early = true;
  ASSERT_EQ(whole_only.evaluate(*u.model, &u.local, 0.9, &e, &early), quorum::kOk);
  EXPECT_FALSE(early);
  EXPECT_EQ(e.examples, 5000);
}
