// staged_evaluation.cpp: see staged_evaluation.hpp.
#include "trainer/tuner/staged_evaluation.hpp"

#include <cmath>

namespace quorum::trainer::tuner {

namespace {
// Examples [begin, end) of `d` as a data set of their own.
Dataset slice(const Dataset &d, size_t begin, size_t end) {
  Dataset s = d;
  s.count = end - begin;
  s.images.assign(d.images.begin() + long(begin * d.image_size()),
                  d.images.begin() + long(end * d.image_size()));
  s.labels.assign(d.labels.begin() + long(begin), d.labels.begin() + long(end));
  return s;
}
}  // namespace

StagedEvaluation::StagedEvaluation(const Dataset &test, const std::vector<double> &fractions,
                                   double z, size_t min_examples)
    : total_(test.count), z_(z) {
  size_t begin = 0;
  for (double f : fractions) {
    const size_t end = size_t(f * double(test.count));
    if (end < min_examples || end <= begin || end >= test.count) continue;
    parts_.push_back(slice(test, begin, end));
    begin = end;
  }
  parts_.push_back(slice(test, begin, test.count));
}

Status StagedEvaluation::evaluate(Model<float> &model, GradientReducer *reducer, double target,
                                  Evaluation *out, bool *early) const {
  *out = Evaluation{};
  *early = false;
  double loss_sum = 0;
  for (size_t i = 0; i < parts_.size(); ++i) {
    Evaluation part;
    QUORUM_CHECK(evaluate_test_set(model, parts_[i], reducer, &part));
    out->correct += part.correct, out->examples += part.examples;
    out->sum_seconds += part.sum_seconds;
    loss_sum += part.loss * double(part.examples);
    out->loss = out->examples ? loss_sum / double(out->examples) : 0;
    out->accuracy = out->examples ? double(out->correct) / double(out->examples) : 0;
    if (i + 1 == parts_.size()) break;
    const double n = double(out->examples), left = 1 - n / double(total_);
    const double error = std::sqrt(target * (1 - target) / n * left);
    if (std::fabs(out->accuracy - target) > z_ * error) {
      *early = true;
      break;
    }
  }
  return kOk;
}

}  // namespace quorum::trainer::tuner
