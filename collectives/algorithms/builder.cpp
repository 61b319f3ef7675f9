// builder.cpp: adding leaf tasks to a collective's schedule.
#include "collectives/algorithms/algorithm.hpp"
#include "collectives/algorithms/algorithms.hpp"
#include "collectives/patterns/hierarchy.hpp"
#include "collectives/tasks.hpp"

namespace quorum {

const char *coll_kind_name(CollKind kind) {
  switch (kind) {
    case CollKind::Allreduce:
      return "allreduce";
    case CollKind::Bcast:
      return "bcast";
    case CollKind::Barrier:
      return "barrier";
    case CollKind::Allgather:
      return "allgather";
    case CollKind::ReduceScatter:
      return "reduce_scatter";
    case CollKind::Signature:
      return "signature";
    case CollKind::PartialControl:
      return "partial_control";
    case CollKind::PartialData:
      return "partial_data";
    case CollKind::PointToPoint:
      return "point_to_point";
    case CollKind::CommSplit:
      return "comm_split";
    case CollKind::Alltoall:
      return "alltoall";
    case CollKind::Gather:
      return "gather";
    case CollKind::Scatter:
      return "scatter";
    case CollKind::Reduce:
      return "reduce";
  }
  return "unknown";
}

TaskId Builder::add(std::unique_ptr<Task> task, TaskIds deps, Schedule::Join join) {
  return s_.add(std::move(task), deps_or_entry(deps), join);
}

TaskId Builder::send(int peer, int step, const void *buf, size_t bytes, TaskIds deps) {
  return add(std::make_unique<SendTask>(t_, peer, tag(step), buf, bytes), std::move(deps));
}

TaskId Builder::recv(int peer, int step, void *buf, size_t bytes, TaskIds deps) {
  return add(std::make_unique<RecvTask>(t_, peer, tag(step), buf, bytes), std::move(deps));
}

TaskId Builder::reduce(void *out, const void *a, const void *b, size_t count, quorum_dtype_t dtype,
                       quorum_op_t op, TaskIds deps) {
  return add(std::make_unique<ReduceTask>(out, a, b, count, dtype, op), std::move(deps));
}

TaskId Builder::copy(void *dst, const void *src, size_t bytes, TaskIds deps) {
  return add(std::make_unique<CopyTask>(dst, src, bytes), std::move(deps));
}

TaskId Builder::scale(void *buf, size_t count, quorum_dtype_t dtype, int nranks, TaskIds deps) {
  return add(std::make_unique<ScaleTask>(buf, count, dtype, nranks), std::move(deps));
}

TaskId Builder::nop(TaskIds deps, Schedule::Join join) {
  return add(std::make_unique<NopTask>(), std::move(deps), join);
}

uint8_t *Builder::scratch(size_t bytes) {
  leases_.push_back(scratch_.acquire(bytes));
  return leases_.back().data();
}

Status hierarchical_layout(const Builder &b, const HostLayout **out) {
  namespace hier = patterns::hierarchy;
  *out = b.layout();
  if (*out == nullptr || hier::fit((*out)->hosts, b.size()) != hier::Fit::kFits)
    return fail(QUORUM_ERR_INTERNAL, coll_kind_name(b.kind()),
                "hierarchical on a layout that does not fit ({})",
                *out ? hier::fit_reason(hier::fit((*out)->hosts, b.size())) : "no layout");
  return kOk;
}

}  // namespace quorum
