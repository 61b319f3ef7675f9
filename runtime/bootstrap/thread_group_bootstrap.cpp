// thread_group_bootstrap.cpp: allgather among the threads of a ThreadGroup.
#include "runtime/bootstrap/thread_group_bootstrap.hpp"

#include <cstring>

#include "runtime/clock.hpp"
#include "runtime/knobs.hpp"

namespace quorum {

namespace {
class ThreadGroupBootstrap : public Bootstrap {
 public:
  ThreadGroupBootstrap(std::shared_ptr<ThreadGroup> group, int rank)
      : group_(std::move(group)), rank_(rank) {}
  const char *name() const override { return "threads"; }
  int rank() const override { return rank_; }
  int size() const override { return group_->size(); }
  Status allgather(const void *in, void *out, size_t bytes) override {
    return group_->allgather(rank_, in, out, bytes);
  }

 private:
  std::shared_ptr<ThreadGroup> group_;
  int rank_;
};
}  // namespace

std::shared_ptr<ThreadGroup> ThreadGroup::create(int size) {
  return std::shared_ptr<ThreadGroup>(new ThreadGroup(size));
}

std::unique_ptr<Bootstrap> ThreadGroup::bootstrap(int rank) {
  return std::make_unique<ThreadGroupBootstrap>(shared_from_this(), rank);
}

Status ThreadGroup::allgather(int rank, const void *in, void *out, size_t bytes) {
  Deadline deadline = Deadline::after_ms(knob_timeout_ms.get());
  std::unique_lock<std::mutex> lock(mutex_);
  // Wait for the previous round's readers to finish (arrived_ counts down).
  if (arrived_ == 0) {
    bytes_ = bytes;
    size_mismatch_ = false;
    data_.assign(bytes * size_, 0);
  } else if (bytes != bytes_) {
    size_mismatch_ = true;
  }
  if (bytes == bytes_ && bytes > 0) std::memcpy(data_.data() + rank * bytes, in, bytes);
  uint64_t my_generation = generation_;
  if (++arrived_ == size_) {
    result_ = data_;
    result_mismatch_ = size_mismatch_;
    arrived_ = 0;
    ++generation_;
    cv_.notify_all();
  } else {
    while (generation_ == my_generation) {
      if (deadline.infinite()) {
        cv_.wait(lock);
      } else if (cv_.wait_for(lock, std::chrono::milliseconds(deadline.remaining_ms(100))) ==
                     std::cv_status::timeout &&
                 deadline.expired() && generation_ == my_generation) {
        return fail(QUORUM_ERR_TIMEOUT, "bootstrap",
                    "thread-group allgather: rank {} waited {} ms, only {} of {} ranks arrived",
                    rank, knob_timeout_ms.get(), arrived_, size_);
      }
    }
  }
  if (result_mismatch_) {
    return fail(QUORUM_ERR_MISMATCH, "bootstrap",
                "thread-group allgather: ranks passed different sizes");
  }
  if (bytes > 0) std::memcpy(out, result_.data(), bytes * size_);
  return kOk;
}

}  // namespace quorum
