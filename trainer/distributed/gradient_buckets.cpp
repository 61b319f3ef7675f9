// gradient_buckets.cpp: bucketed synchronous gradient allreduce (see the header).
#include "trainer/distributed/gradient_buckets.hpp"

#include <algorithm>

namespace quorum::trainer {

GradientBuckets::GradientBuckets(quorum_comm_t comm, size_t bucket_bytes)
    : comm_(comm), bucket_elems_(std::max<size_t>(1, bucket_bytes / sizeof(float))) {}

GradientBuckets::~GradientBuckets() {
  (void)wait_all();
}

void GradientBuckets::ready(float *grads, size_t offset, size_t n, int64_t step) {
  if (!started(grads, step)) {
    // A step never finished (its reduction failed before finish()): drain it.
    (void)wait_all();
    step_ = step;
    grads_ = grads;
    end_ = ready_lo_ = sent_lo_ = offset + n;
    in_order_ = true;
    allreduces_ = 0;
    error_ = kOk;
    ++started_steps_;
  }
  if (!in_order_ || offset + n != ready_lo_) {
    in_order_ = false;
    return;
  }
  ready_lo_ = offset;
  if (sent_lo_ - ready_lo_ >= bucket_elems_) {
    launch(ready_lo_, sent_lo_);
    sent_lo_ = ready_lo_;
  }
}

void GradientBuckets::launch(size_t lo, size_t hi) {
  if (hi <= lo || error_ != kOk) return;
  quorum_request_t req = nullptr;
  quorum_status_t s = quorum_iallreduce(comm_, QUORUM_IN_PLACE, grads_ + lo, hi - lo,
                                        QUORUM_FLOAT32, QUORUM_AVG, &req);
  if (s != QUORUM_OK) {
    error_ = fail(s, "reducer", "gradient bucket [{}, {}): {}", lo, hi, quorum_last_error());
    return;
  }
  requests_.push_back(req);
  ++allreduces_;
}

Status GradientBuckets::finish(size_t count) {
  // The rest, in the same order on every rank: below the sent part, then any
  // part above the first range.
  launch(0, std::min(sent_lo_, count));
  launch(end_, count);
  Status waited = wait_all();
  last_allreduces_ = allreduces_;
  step_ = -1;
  grads_ = nullptr;
  return error_ != kOk ? error_ : waited;
}

Status GradientBuckets::wait_all() {
  Status first = kOk;
  for (quorum_request_t req : requests_) {
    // quorum_wait releases the request either way.
    quorum_status_t s = quorum_wait(req);
    if (s != QUORUM_OK && first == kOk) {
      first = fail(s, "reducer", "gradient bucket allreduce: {}", quorum_last_error());
    }
  }
  requests_.clear();
  return first;
}

}  // namespace quorum::trainer
