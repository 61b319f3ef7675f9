// device_staging.cpp: host staging of device buffers for collectives.
#include "collectives/device_staging.hpp"

#include "collectives/reduce/reduce_kernels.hpp"
#include "runtime/memory.hpp"

namespace quorum {

namespace {

class DeviceCopyTask : public Task {
 public:
  DeviceCopyTask(void *dst, const void *src, size_t bytes) : dst_(dst), src_(src), bytes_(bytes) {}
  TaskResult progress(Status *status) override {
    Status s = device_copy(dst_, src_, bytes_);
    if (s != kOk) {
      *status = s;
      return TaskResult::Failed;
    }
    return TaskResult::Done;
  }
  std::string describe() const override { return fmt::format("copy {} B to the device", bytes_); }

 private:
  void *dst_;
  const void *src_;
  size_t bytes_;
};

// Bytes read from send and written to recv by one collective.
void buffer_bytes(const CollArgs &a, int size, size_t *in, size_t *out) {
  size_t es = dtype_size(a.dtype);
  switch (a.kind) {
    case CollKind::Allreduce:
      *in = *out = a.count * es;
      break;
    case CollKind::ReduceScatter:
      *in = a.count * es * size, *out = a.count * es;
      break;
    case CollKind::Allgather:
      *in = a.count, *out = a.count * size;
      break;
    case CollKind::Bcast:
      *in = *out = a.count;
      break;
    default:
      *in = *out = 0;
      break;
  }
}

}  // namespace

Status stage_device_buffers(Builder &b, CollArgs *a, const Transport *transport,
                            StagingPlan *plan) {
  *plan = StagingPlan{};
  if (!cuda_available()) return kOk;
  bool send_dev = a->send && buffer_kind(a->send) == BufferKind::Device;
  bool recv_dev = a->recv && buffer_kind(a->recv) == BufferKind::Device;
  if (!send_dev && !recv_dev) return kOk;
  if (transport && transport->supports_memory(MemoryType::Cuda) && send_dev && recv_dev) return kOk;
  size_t in_bytes, out_bytes;
  buffer_bytes(*a, b.size(), &in_bytes, &out_bytes);
  bool in_place = a->send == a->recv;
  uint8_t *host_out = b.scratch(std::max<size_t>(out_bytes, in_place ? in_bytes : 0) + 1);
  if (!host_out) return fail(QUORUM_ERR_NO_MEMORY, "staging", "host scratch of {} B", out_bytes);
  if (in_place) {
    QUORUM_CHECK(device_copy(host_out, a->send, std::max(in_bytes, out_bytes)));
    a->send = host_out;
  } else if (a->kind == CollKind::Allgather && a->send == nullptr) {
    // nothing to read
  } else {
    uint8_t *host_in = send_dev ? b.scratch(in_bytes + 1) : nullptr;
    if (send_dev) {
      if (!host_in) return fail(QUORUM_ERR_NO_MEMORY, "staging", "host scratch of {} B", in_bytes);
      QUORUM_CHECK(device_copy(host_in, a->send, in_bytes));
      a->send = host_in;
    }
  }
  plan->active = recv_dev;
  plan->device_recv = a->recv;
  plan->host_result = host_out;
  plan->result_bytes = out_bytes;
  if (recv_dev) a->recv = host_out;
  if (in_place) a->send = a->recv;
  return kOk;
}

TaskId finish_device_staging(Builder &b, const StagingPlan &plan, TaskId last) {
  if (!plan.active) return last;
  return b.add(
      std::make_unique<DeviceCopyTask>(plan.device_recv, plan.host_result, plan.result_bytes),
      {last});
}

}  // namespace quorum
