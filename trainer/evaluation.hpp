// evaluation.hpp: the test-set evaluation, split across the ranks.
//
// The replicas are identical when the trainer evaluates, so each rank scores
// only its block of the test set and the ranks add up their sums: every rank
// gets the whole set's loss and accuracy for 1/P of the work.
#pragma once

#include <cstdint>

#include "runtime/status.hpp"
#include "trainer/dataset.hpp"
#include "trainer/gradient_reducer.hpp"
#include "trainer/model.hpp"

namespace quorum::trainer {

struct Evaluation {
  double loss = 0, accuracy = 0;  // mean loss and fraction correct over the whole set
  int64_t correct = 0, examples = 0;
  double sum_seconds = 0;  // in the sum over the ranks: mostly waiting for the slowest
};

// The block of `count` examples that `rank` of `world` scores: [*begin, *end).
void evaluation_block(size_t count, int rank, int world, size_t *begin, size_t *end);

// Scores this rank's block of `test` with `model`'s current parameters and adds
// the sums over the ranks through `reducer` (a collective: every rank calls it).
Status evaluate_test_set(Model<float> &model, const Dataset &test, GradientReducer *reducer,
                         Evaluation *out);

}  // namespace quorum::trainer
