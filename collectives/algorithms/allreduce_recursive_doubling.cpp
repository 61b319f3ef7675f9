// allreduce_recursive_doubling.cpp: latency-optimal allreduce for small messages.
//
// Pattern: patterns/recursive_doubling.hpp (fold of the ranks beyond the
// largest power of two, log2(P') exchange steps, unfold). Per core rank:
// log2(P') messages of n bytes each way (+1 each way with a fold partner).
// Every core rank computes the same reduction tree (the ops are commutative
// bit for bit), so results are bitwise identical across ranks.
//
// With CollArgs::check_signature every message starts with a CallRange (56
// B: the smallest and largest call description seen so far) and carries the
// data after it, copied there (the messages are small). A rank merges every
// range it receives into its own, so after the last step (the unfold for an
// extra rank) each rank's range spans every rank's call, as an allreduce of
// min and max would. A message of an unexpected size (a count that differs)
// cannot be read as a range: its receiver marks a conflict instead, which
// travels on the same way the lost range would have. Nothing fails before the
// end, so every rank sends all its messages; then every rank whose range is
// not one single call fails with QUORUM_ERR_MISMATCH (every rank: the ranges
// agree). The data of a mismatched call is garbage, never read out of bounds:
// each rank reduces its own count from its own buffers.
#include <cstring>

#include "collectives/algorithms/algorithms.hpp"
#include "collectives/patterns/recursive_doubling.hpp"
#include "collectives/reduce/reduce_kernels.hpp"
#include "collectives/signature.hpp"
#include "collectives/tasks.hpp"

namespace quorum {

namespace rd = patterns::recursive_doubling;

namespace {

constexpr size_t kHeader = sizeof(CallRange);  // 56 B

// Writes the range seen so far, then the data, into a message.
class PackTask : public Task {
 public:
  PackTask(uint8_t *msg, const CallRange *range, const void *data, size_t bytes)
      : msg_(msg), range_(range), data_(data), bytes_(bytes) {}
  TaskResult progress(Status *) override {
    std::memcpy(msg_, range_, kHeader);
    if (bytes_ > 0) std::memcpy(msg_ + kHeader, data_, bytes_);
    return TaskResult::Done;
  }
  std::string describe() const override { return "pack call signature and data"; }

 private:
  uint8_t *msg_;
  const CallRange *range_;
  const void *data_;
  size_t bytes_;
};

// Receives a message with a range at its head and merges the range; a message
// of another size (shorter, or truncated) marks a conflict and still counts
// as received, so that the exchange goes on.
class RangeRecvTask : public TransportTask {
 public:
  RangeRecvTask(Transport *t, int peer, uint64_t tag, uint8_t *msg, size_t bytes, CallRange *range)
      : TransportTask(t, peer, tag, bytes), msg_(msg), range_(range) {}
  TaskResult progress(Status *status) override {
    TaskResult r = post_once(
        [this](TransportRequest *req) { return t_->recv(peer_, tag_, msg_, bytes_, req); }, status);
    if (r == TaskResult::Pending) return r;
    if (r == TaskResult::Failed && *status != QUORUM_ERR_MISMATCH) return r;
    if (r == TaskResult::Done && req_.bytes >= kHeader) {
      CallRange theirs;
      std::memcpy(&theirs, msg_, kHeader);
      range_->merge(theirs);
    }
    if (r == TaskResult::Failed || req_.bytes != bytes_) range_->mark_conflict(t_->rank(), peer_);
    return TaskResult::Done;
  }
  std::string describe() const override {
    return fmt::format("recv {} B (signature and data) from rank {} (tag {:#x})", bytes_, peer_,
                       tag_);
  }

 private:
  uint8_t *msg_;
  CallRange *range_;
};

class RangeVerdictTask : public Task {
 public:
  RangeVerdictTask(const CallRange *range, int rank, uint64_t seq)
      : range_(range), rank_(rank), seq_(seq) {}
  TaskResult progress(Status *status) override {
    if (range_->agreed()) return TaskResult::Done;
    *status = mismatch_error(*range_, rank_, seq_);
    return TaskResult::Failed;
  }
  std::string describe() const override { return "compare call signatures"; }

 private:
  const CallRange *range_;
  int rank_;
  uint64_t seq_;
};

Status build_checked(Builder &b, const CollArgs &a, TaskId *last) {
  const int p = b.size(), r = b.rank();
  const size_t bytes = a.count * dtype_size(a.dtype);
  const size_t msg = kHeader + bytes;
  const int steps = rd::steps(p);
  const int partner = rd::partner(r, p);
  const int unfold_step = steps + 1;
  Transport *t = b.transport();
  // The range, then one outgoing and one incoming message per step (steps,
  // plus fold and unfold), so that every receive can be posted at once and no
  // send's message is rewritten while in flight.
  const size_t slots = static_cast<size_t>(steps) + 2;
  uint8_t *scratch = b.scratch(kHeader + 2 * slots * msg);
  if (!scratch) return fail(QUORUM_ERR_NO_MEMORY, "allreduce", "scratch of {} B", 2 * slots * msg);
  auto *range = reinterpret_cast<CallRange *>(scratch);
  *range = CallRange::of(call_record(a, r));
  auto out = [&](size_t i) { return scratch + kHeader + i * msg; };
  auto in = [&](size_t i) { return scratch + kHeader + (slots + i) * msg; };
  auto recv = [&](int peer, int step, uint8_t *into) {
    return b.add(std::make_unique<RangeRecvTask>(t, peer, b.tag(step), into, msg, range));
  };
  // Every send is a dependency of the verdict: a rank fails only once all
  // its messages are out (the others need them to reach their verdict).
  std::vector<TaskId> sends;
  TaskId packed = -1;
  auto pack_and_send = [&](int peer, int step, uint8_t *m, TaskId after) {
    packed = b.add(std::make_unique<PackTask>(m, range, a.recv, bytes), {after});
    sends.push_back(b.send(peer, step, m, msg, {packed}));
  };

  void *acc = a.recv;
  TaskId prev = a.send != a.recv ? b.copy(a.recv, a.send, bytes) : b.nop();
  if (rd::role(r, p) == rd::Role::kExtra) {
    pack_and_send(partner, 0, out(0), prev);
    TaskId rcv = recv(partner, unfold_step, in(0));
    TaskId got = b.copy(acc, in(0) + kHeader, bytes, {rcv, sends.back()});
    *last = b.add(std::make_unique<RangeVerdictTask>(range, r, b.seq()), {got});
    return kOk;
  }
  if (partner != patterns::kNoPeer) {
    TaskId rv = recv(partner, 0, in(0));
    prev = b.reduce(acc, acc, in(0) + kHeader, a.count, a.dtype, a.op, {prev, rv});
  }
  for (int s = 0; s < steps; ++s) {
    const int peer = rd::peer(r, p, s);
    uint8_t *m_in = in(static_cast<size_t>(s) + 1);
    // The send reads its own copy: the reduce waits for the copy, not the send.
    pack_and_send(peer, s + 1, out(static_cast<size_t>(s) + 1), prev);
    TaskId rcv = recv(peer, s + 1, m_in);
    prev = b.reduce(acc, acc, m_in + kHeader, a.count, a.dtype, a.op, {packed, rcv});
  }
  if (a.op == QUORUM_AVG) prev = b.scale(acc, a.count, a.dtype, p, {prev});
  if (partner != patterns::kNoPeer) pack_and_send(partner, unfold_step, out(slots - 1), prev);
  std::vector<TaskId> deps = sends;
  deps.push_back(prev);
  *last = b.add(std::make_unique<RangeVerdictTask>(range, r, b.seq()), deps);
  return kOk;
}

}  // namespace

Status build_allreduce_recursive_doubling(Builder &b, const CollArgs &a, TaskId *last) {
  if (a.check_signature) return build_checked(b, a, last);
  const int p = b.size(), r = b.rank();
  const size_t bytes = a.count * dtype_size(a.dtype);
  const int steps = rd::steps(p);
  const int partner = rd::partner(r, p);
  const int unfold_step = steps + 1;

  void *acc = a.recv;
  TaskId prev = a.send != a.recv ? b.copy(a.recv, a.send, bytes) : b.nop();
  if (rd::role(r, p) == rd::Role::kExtra) {
    TaskId snd = b.send(partner, 0, acc, bytes, {prev});
    *last = b.recv(partner, unfold_step, acc, bytes, {snd});
    return kOk;
  }
  // One scratch slot per step, so every receive can be posted at once.
  uint8_t *tmp = b.scratch(bytes * (steps + 1) + 1);
  if (!tmp) return fail(QUORUM_ERR_NO_MEMORY, "allreduce", "scratch of {} B", bytes * (steps + 1));
  if (partner != patterns::kNoPeer) {
    TaskId rv = b.recv(partner, 0, tmp, bytes);
    prev = b.reduce(acc, acc, tmp, a.count, a.dtype, a.op, {prev, rv});
  }
  for (int s = 0; s < steps; ++s) {
    int peer = rd::peer(r, p, s);
    uint8_t *in = tmp + bytes * (s + 1);
    TaskId snd = b.send(peer, s + 1, acc, bytes, {prev});
    TaskId rcv = b.recv(peer, s + 1, in, bytes);
    prev = b.reduce(acc, acc, in, a.count, a.dtype, a.op, {snd, rcv});
  }
  if (a.op == QUORUM_AVG) prev = b.scale(acc, a.count, a.dtype, p, {prev});
  if (partner != patterns::kNoPeer) prev = b.send(partner, unfold_step, acc, bytes, {prev});
  *last = prev;
  return kOk;
}

}  // namespace quorum
