// gradient_buckets.hpp: a synchronous gradient allreduce in buckets that start
// while the backward pass still runs (communication overlaps computation).
//
// Backward makes the gradient final layer by layer, last layer first: ranges
// [offset, offset + n) that go down from the end of the buffer. Once at least
// bucket_bytes are final and not sent yet, they go out as one non-blocking
// allreduce (average, in place). finish() sends the rest and waits for all.
// The bounds depend only on the layer ranges and bucket_bytes, so every rank
// issues the same allreduces in the same order. Ranges out of that order (not
// what Model::backward gives) stop the bucketing for the step: finish() then
// reduces everything not sent yet at once.
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

#include "quorum/quorum.h"
#include "runtime/status.hpp"

namespace quorum::trainer {

class GradientBuckets {
 public:
  GradientBuckets(quorum_comm_t comm, size_t bucket_bytes);
  ~GradientBuckets();  // waits for buckets still in flight
  GradientBuckets(const GradientBuckets &) = delete;
  GradientBuckets &operator=(const GradientBuckets &) = delete;

  // grads[offset, offset + n) of `step` is final; a new step starts over.
  void ready(float *grads, size_t offset, size_t n, int64_t step);
  // Whether ready() saw `step` over grads (finish() must then follow).
  bool started(float *grads, int64_t step) const { return step == step_ && grads == grads_; }
  // Reduces what of grads[0, count) was not sent and waits for every bucket.
  Status finish(size_t count);
  // Allreduces the last finished step took, and the steps started (tests, logs).
  int64_t last_step_allreduces() const { return last_allreduces_; }
  int64_t started_steps() const { return started_steps_; }

 private:
  void launch(size_t lo, size_t hi);
  Status wait_all();

  quorum_comm_t comm_;
  size_t bucket_elems_;
  int64_t step_ = -1;
  float *grads_ = nullptr;
  size_t end_ = 0;          // end of the step's first range (the buffer's end)
  size_t ready_lo_ = 0;     // [ready_lo_, end_) is final
  size_t sent_lo_ = 0;      // [sent_lo_, end_) is sent
  bool in_order_ = true;    // ranges came as Model::backward gives them
  int64_t allreduces_ = 0;  // of the step in flight
  int64_t last_allreduces_ = 0;
  int64_t started_steps_ = 0;
  std::vector<quorum_request_t> requests_;
  Status error_ = kOk;  // first failure of the step in flight
};

}  // namespace quorum::trainer
