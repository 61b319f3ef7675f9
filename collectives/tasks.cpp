// tasks.cpp: send, recv, reduce and scale tasks.
#include "collectives/tasks.hpp"

#include "collectives/reduce/reduce_kernels.hpp"

namespace quorum {

TaskResult TransportTask::finish(Status *status) const {
  switch (req_.state.load(std::memory_order_acquire)) {
    case TransportRequest::Pending:
      return TaskResult::Pending;
    case TransportRequest::Done:
      return TaskResult::Done;
    default:
      *status = req_.status;
      return TaskResult::Failed;
  }
}

void TransportTask::cancel(Status /*why*/) {
  if (posted_ && req_.pending()) t_->cancel(&req_);
}

TaskResult SendTask::progress(Status *status) {
  return post_once(
      [this](TransportRequest *req) { return t_->send(peer_, tag_, buf_, bytes_, req); }, status);
}

std::string SendTask::describe() const {
  return fmt::format("send {} B to rank {} (tag {:#x})", bytes_, peer_, tag_);
}

TaskResult RecvTask::progress(Status *status) {
  TaskResult r = post_once(
      [this](TransportRequest *req) { return t_->recv(peer_, tag_, buf_, bytes_, req); }, status);
  if (r == TaskResult::Done && req_.bytes != bytes_) {
    *status = fail(QUORUM_ERR_MISMATCH, "collective",
                   "rank {} sent {} B where rank {} expected {} B (tag {:#x}): the ranks called "
                   "the collective with different counts or types",
                   peer_, req_.bytes, t_->rank(), bytes_, tag_);
    return TaskResult::Failed;
  }
  return r;
}

std::string RecvTask::describe() const {
  return fmt::format("recv {} B from rank {} (tag {:#x})", bytes_, peer_, tag_);
}

TaskResult ReduceTask::progress(Status *status) {
  Status s = reduce_out(out_, a_, b_, count_, dtype_, op_);
  if (s != kOk) {
    *status = s;
    return TaskResult::Failed;
  }
  return TaskResult::Done;
}

std::string ReduceTask::describe() const {
  return fmt::format("reduce {} x {} {}", count_, dtype_name(dtype_), op_name(op_));
}

TaskResult ScaleTask::progress(Status *status) {
  Status s = scale_average(buf_, count_, dtype_, nranks_);
  if (s != kOk) {
    *status = s;
    return TaskResult::Failed;
  }
  return TaskResult::Done;
}

}  // namespace quorum
