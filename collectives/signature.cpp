// signature.cpp: the exchange of call descriptions that detects mismatched
// collective calls (signature.hpp), with or without an allreduce's data.
#include "collectives/signature.hpp"

#include <algorithm>
#include <cstring>
#include <string>
#include <vector>

#include "collectives/patterns/recursive_doubling.hpp"
#include "collectives/reduce/reduce_kernels.hpp"
#include "collectives/tasks.hpp"

namespace quorum {

namespace rd = patterns::recursive_doubling;

namespace {

constexpr size_t kHeader = sizeof(CallRange);  // 56 B
constexpr size_t kSlack = kSignatureInlineBytes;

// Writes the range seen so far, then the data, into a message, and sends it.
class PackSendTask : public SendTask {
 public:
  PackSendTask(Transport *t, int peer, uint64_t tag, uint8_t *msg, const CallRange *range,
               const void *data, size_t bytes)
      : SendTask(t, peer, tag, msg, kHeader + bytes),
        msg_(msg),
        range_(range),
        data_(data),
        data_bytes_(bytes) {}
  TaskResult progress(Status *status) override {
    if (!packed_) {
      std::memcpy(msg_, range_, kHeader);
      if (data_bytes_ > 0) std::memcpy(msg_ + kHeader, data_, data_bytes_);
      packed_ = true;
    }
    return SendTask::progress(status);
  }

 private:
  uint8_t *msg_;
  const CallRange *range_;
  const void *data_;
  size_t data_bytes_;
  bool packed_ = false;
};

// Receives a message with a range at its head and merges the range; a message
// of another size (shorter, or truncated) marks a conflict and still counts
// as received, so that the exchange goes on.
class RangeRecvTask : public TransportTask {
 public:
  RangeRecvTask(Transport *t, int peer, uint64_t tag, uint8_t *msg, size_t room, size_t expected,
                CallRange *range)
      : TransportTask(t, peer, tag, room), msg_(msg), expected_(expected), range_(range) {}
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
    if (r == TaskResult::Failed || req_.bytes != expected_)
      range_->mark_conflict(t_->rank(), peer_);
    return TaskResult::Done;
  }
  std::string describe() const override {
    return fmt::format("recv {} B (signature and data) from rank {} (tag {:#x})", expected_, peer_,
                       tag_);
  }

 private:
  uint8_t *msg_;
  size_t expected_;
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

// A call's kind and arguments, as a user wrote it.
std::string describe_call_arguments(const CallRecord &r) {
  CollKind k = static_cast<CollKind>(r.kind);
  switch (k) {
    case CollKind::Allreduce:
    case CollKind::ReduceScatter:
      return fmt::format("{}(count={}, {}, {})", coll_kind_name(k), r.count,
                         dtype_name(static_cast<quorum_dtype_t>(r.dtype)),
                         op_name(static_cast<quorum_op_t>(r.op)));
    case CollKind::Bcast:
      return fmt::format("bcast(bytes={}, root={})", r.count, r.root);
    case CollKind::Allgather:
      return fmt::format("allgather(bytes_per_rank={})", r.count);
    default:
      return coll_kind_name(k);
  }
}

}  // namespace

bool CallRecord::operator<(const CallRecord &o) const {
  return count != o.count   ? count < o.count
         : kind != o.kind   ? kind < o.kind
         : dtype != o.dtype ? dtype < o.dtype
         : op != o.op       ? op < o.op
         : root != o.root   ? root < o.root
                            : over_shm < o.over_shm;
}

bool CallRecord::same_call(const CallRecord &o) const {
  return count == o.count && kind == o.kind && dtype == o.dtype && op == o.op && root == o.root &&
         over_shm == o.over_shm;
}

CallRecord call_record(const CollArgs &args, int rank) {
  CallRecord mine{};
  mine.count = args.count;
  mine.rank = rank;
  mine.kind = static_cast<uint8_t>(args.kind);
  bool reduction = args.kind == CollKind::Allreduce || args.kind == CollKind::ReduceScatter;
  mine.dtype = reduction ? static_cast<uint8_t>(args.dtype) : 0;
  mine.op = reduction ? static_cast<uint8_t>(args.op) : 0;
  mine.root = args.kind == CollKind::Bcast ? args.root : 0;
  mine.over_shm = args.over_shm ? 1 : 0;
  return mine;
}

std::string describe_call(const CallRecord &r) {
  return describe_call_arguments(r) + (r.over_shm ? " over shared memory" : "");
}

void CallRange::merge(const CallRange &o) {
  if (o.lo < lo) lo = o.lo;
  if (hi < o.hi) hi = o.hi;
  if (conflict == 0 && o.conflict != 0) {
    conflict = o.conflict;
    conflict_peer = o.conflict_peer;
  }
}

void CallRange::mark_conflict(int rank, int peer) {
  if (conflict != 0) return;
  conflict = rank + 1;
  conflict_peer = peer;
}

Status mismatch_error(const CallRange &range, int rank, uint64_t seq) {
  if (!range.lo.same_call(range.hi)) {
    return fail(QUORUM_ERR_MISMATCH, "collective",
                "collective #{} mismatch seen on rank {}: rank {} called {} but rank {} called {}",
                seq, rank, range.lo.rank, describe_call(range.lo), range.hi.rank,
                describe_call(range.hi));
  }
  return fail(QUORUM_ERR_MISMATCH, "collective",
              "collective #{} mismatch seen on rank {}: rank {} received a message of another "
              "size from rank {} (the ranks called the collective with different counts or types)",
              seq, rank, range.conflict - 1, range.conflict_peer);
}

Status add_signature_check(Builder &b, const CollArgs &args, uint64_t seq, TaskId *done) {
  return build_signature_exchange(b, args, seq, false, done);
}

Status build_signature_exchange(Builder &parent, const CollArgs &a, uint64_t seq, bool with_data,
                                TaskId *last) {
  const int p = parent.size(), r = parent.rank();
  // Its own tag kind, so that an allreduce that carries its data here and a
  // header-only check in front of another collective meet (and disagree).
  Builder b(parent.schedule(), parent.transport(), r, p, CollKind::Signature, seq,
            parent.scratch_pool());
  const size_t bytes = with_data ? a.count * dtype_size(a.dtype) : 0;
  const size_t msg = kHeader + bytes;
  // Receives take a little more than expected, so that a message of a
  // mismatched call up to kSlack longer still shows its range.
  const size_t room = kHeader + std::max(bytes, kSlack);
  const int steps = rd::steps(p);
  const int partner = rd::partner(r, p);
  const int unfold_step = steps + 1;
  Transport *t = b.transport();
  // The range, then one outgoing and one incoming message per step (steps,
  // plus fold and unfold), so that every receive can be posted at once and no
  // send's message is rewritten while in flight.
  const size_t slots = static_cast<size_t>(steps) + 2;
  uint8_t *scratch = parent.scratch(kHeader + slots * (msg + room));
  if (!scratch) {
    return fail(QUORUM_ERR_NO_MEMORY, "collective", "signature scratch of {} B",
                slots * (msg + room));
  }
  auto *range = reinterpret_cast<CallRange *>(scratch);
  *range = CallRange::of(call_record(a, r));
  auto out = [&](size_t i) { return scratch + kHeader + i * msg; };
  auto in = [&](size_t i) { return scratch + kHeader + slots * msg + i * room; };
  auto recv = [&](int peer, int step, uint8_t *into) {
    return b.add(std::make_unique<RangeRecvTask>(t, peer, b.tag(step), into, room, msg, range));
  };
  // Every send is a dependency of the verdict: a rank fails only once all
  // its messages are out (the others need them to reach their verdict).
  TaskIds sends;
  auto pack_and_send = [&](int peer, int step, uint8_t *m, TaskId after) {
    sends.push_back(b.add(
        std::make_unique<PackSendTask>(t, peer, b.tag(step), m, range, a.recv, bytes), {after}));
    return sends.back();
  };
  auto reduce_in = [&](const uint8_t *m, TaskIds deps) {
    return with_data ? b.reduce(a.recv, a.recv, m + kHeader, a.count, a.dtype, a.op, deps)
                     : b.nop(deps);
  };

  TaskId prev = with_data && a.send != a.recv ? b.copy(a.recv, a.send, bytes) : b.nop();
  if (rd::role(r, p) == rd::Role::kExtra) {
    pack_and_send(partner, 0, out(0), prev);
    TaskId got = recv(partner, unfold_step, in(0));
    if (with_data) got = b.copy(a.recv, in(0) + kHeader, bytes, {got});
    *last = b.add(std::make_unique<RangeVerdictTask>(range, r, seq), {got, sends.back()});
    return kOk;
  }
  if (partner != patterns::kNoPeer) prev = reduce_in(in(0), {prev, recv(partner, 0, in(0))});
  for (int s = 0; s < steps; ++s) {
    const int peer = rd::peer(r, p, s);
    uint8_t *m_in = in(static_cast<size_t>(s) + 1);
    // The send packs its own copy when it starts; the reduce waits for it to
    // complete (at once: these messages are small enough to go eagerly).
    TaskId sent = pack_and_send(peer, s + 1, out(static_cast<size_t>(s) + 1), prev);
    prev = reduce_in(m_in, {sent, recv(peer, s + 1, m_in)});
  }
  if (with_data && a.op == QUORUM_AVG) prev = b.scale(a.recv, a.count, a.dtype, p, {prev});
  if (partner != patterns::kNoPeer) pack_and_send(partner, unfold_step, out(slots - 1), prev);
  TaskIds deps = sends;
  deps.push_back(prev);
  *last = b.add(std::make_unique<RangeVerdictTask>(range, r, seq), deps);
  return kOk;
}

}  // namespace quorum
