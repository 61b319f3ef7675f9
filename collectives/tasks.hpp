// tasks.hpp: the leaf tasks collectives are built from: send, recv, reduce.
// Each is a resumable state machine run by a Schedule (runtime/progress).
#pragma once

#include <cstdint>
#include <string>

#include "quorum/quorum.h"
#include "runtime/progress/schedule.hpp"
#include "transports/transport.hpp"

namespace quorum {

// What a send and a receive share: one transport request to or from one peer,
// posted on the first progress call.
class TransportTask : public Task {
 public:
  void cancel(Status why) override;
  bool quiescent() const override { return !posted_ || !req_.pending(); }
  int peer() const override { return peer_; }

 protected:
  TransportTask(Transport *t, int peer, uint64_t tag, size_t bytes)
      : t_(t), peer_(peer), tag_(tag), bytes_(bytes) {}
  // Posts through `post(&req_)` once (a failure to post fails the task), then
  // reports the request's state.
  template <typename Post>
  TaskResult post_once(Post post, Status *status) {
    if (!posted_) {
      posted_ = true;
      if (Status s = post(&req_); s != kOk) {
        *status = s;
        return TaskResult::Failed;
      }
    }
    return finish(status);
  }

  Transport *t_;
  int peer_;
  uint64_t tag_;
  size_t bytes_;
  TransportRequest req_;

 private:
  TaskResult finish(Status *status) const;
  bool posted_ = false;
};

class SendTask : public TransportTask {
 public:
  SendTask(Transport *t, int peer, uint64_t tag, const void *buf, size_t bytes)
      : TransportTask(t, peer, tag, bytes), buf_(buf) {}
  TaskResult progress(Status *status) override;
  std::string describe() const override;

 private:
  const void *buf_;
};

// Receives exactly `bytes` bytes; a shorter message is a mismatch between ranks.
class RecvTask : public TransportTask {
 public:
  RecvTask(Transport *t, int peer, uint64_t tag, void *buf, size_t bytes)
      : TransportTask(t, peer, tag, bytes), buf_(buf) {}
  TaskResult progress(Status *status) override;
  std::string describe() const override;

 private:
  void *buf_;
};

// out = a op b (out may alias a or b), over count elements.
class ReduceTask : public Task {
 public:
  ReduceTask(void *out, const void *a, const void *b, size_t count, quorum_dtype_t dtype,
             quorum_op_t op)
      : out_(out), a_(a), b_(b), count_(count), dtype_(dtype), op_(op) {}
  TaskResult progress(Status *status) override;
  std::string describe() const override;

 private:
  void *out_;
  const void *a_;
  const void *b_;
  size_t count_;
  quorum_dtype_t dtype_;
  quorum_op_t op_;
};

// buf /= nranks (the last step of AVG).
class ScaleTask : public Task {
 public:
  ScaleTask(void *buf, size_t count, quorum_dtype_t dtype, int nranks)
      : buf_(buf), count_(count), dtype_(dtype), nranks_(nranks) {}
  TaskResult progress(Status *status) override;
  std::string describe() const override { return "scale for avg"; }

 private:
  void *buf_;
  size_t count_;
  quorum_dtype_t dtype_;
  int nranks_;
};

}  // namespace quorum
