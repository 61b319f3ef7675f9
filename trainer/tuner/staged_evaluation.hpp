// staged_evaluation.hpp: whether the model's test accuracy has reached a
// target, scoring no more of the test set than the answer needs (the tuner's
// pilot evaluates often, and far from the target a tenth of the set says
// enough).
//
// The test set is cut into stages, cumulative fractions of it (the last is
// the whole set). After each stage but the last, the accuracy of what was
// scored so far decides when it lies more than `z` standard errors from the
// target (binomial at the target's accuracy, with the finite-population
// correction for the part not yet scored); otherwise the next stage is
// scored as well. Stages under `min_examples` are skipped. Every rank
// scores its block of each stage (a collective, like evaluate_test_set).
#pragma once

#include <vector>

#include "runtime/status.hpp"
#include "trainer/dataset.hpp"
#include "trainer/evaluation.hpp"
#include "trainer/gradient_reducer.hpp"
#include "trainer/model.hpp"

namespace quorum::trainer::tuner {

class StagedEvaluation {
 public:
  // fractions ascending in (0, 1); the whole set is always the last stage.
  StagedEvaluation(const Dataset &test, const std::vector<double> &fractions, double z = 3,
                   size_t min_examples = 200);
  // *out: the accuracy and loss of the part scored (out->examples of them);
  // *early: decided before the whole set.
  Status evaluate(Model<float> &model, GradientReducer *reducer, double target, Evaluation *out,
                  bool *early) const;
  size_t stages() const { return parts_.size(); }

 private:
  std::vector<Dataset> parts_;  // consecutive slices of the test set
  size_t total_ = 0;
  double z_ = 3;
};

}  // namespace quorum::trainer::tuner
