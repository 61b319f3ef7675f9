// evaluation.cpp: see evaluation.hpp.
#include "trainer/evaluation.hpp"

#include <algorithm>
#include <chrono>
#include <vector>

namespace quorum::trainer {

void evaluation_block(size_t count, int rank, int world, size_t *begin, size_t *end) {
  *begin = count * size_t(rank) / size_t(world);
  *end = count * size_t(rank + 1) / size_t(world);
}

Status evaluate_test_set(Model<float> &model, const Dataset &test, GradientReducer *reducer,
                         Evaluation *out) {
  size_t begin = 0, end = 0;
  evaluation_block(test.count, reducer->rank(), reducer->size(), &begin, &end);
  const int b = model.max_batch();
  std::vector<uint32_t> idx(static_cast<size_t>(b));
  std::vector<float> images(size_t(b) * model.image_size());
  std::vector<int32_t> labels(static_cast<size_t>(b));
  // {loss sum, correct, examples}: the counts stay exact in a double.
  double sums[3] = {0, 0, 0};
  for (size_t start = begin; start < end; start += size_t(b)) {
    const int n = int(std::min<size_t>(size_t(b), end - start));
    for (int i = 0; i < n; ++i) idx[size_t(i)] = uint32_t(start + size_t(i));
    assemble_batch(test, idx.data(), n, images.data(), labels.data());
    model.load_batch(n, images.data(), labels.data());
    double loss = 0;
    int64_t correct = 0;
    model.evaluate(n, &loss, &correct);
    sums[0] += loss * n;
    sums[1] += double(correct);
    sums[2] += n;
  }
  const auto sum_start = std::chrono::steady_clock::now();
  QUORUM_CHECK(reducer->sum_over_ranks(sums, 3));
  out->sum_seconds =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - sum_start).count();
  out->correct = int64_t(sums[1]);
  out->examples = int64_t(sums[2]);
  out->loss = out->examples ? sums[0] / sums[2] : 0.0;
  out->accuracy = out->examples ? sums[1] / sums[2] : 0.0;
  return kOk;
}

}  // namespace quorum::trainer
