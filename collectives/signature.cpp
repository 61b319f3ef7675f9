// signature.cpp: the dissemination min/max exchange of call descriptions.
#include "collectives/signature.hpp"

#include <cstring>
#include <string>

#include "collectives/reduce/reduce_kernels.hpp"
#include "collectives/tasks.hpp"

namespace quorum {

namespace {

struct MinMax {
  CallRecord lo, hi;
};

// state[step+1] = merge(state[step], received[step])
class MergeTask : public Task {
 public:
  MergeTask(MinMax *out, const MinMax *a, const MinMax *b) : out_(out), a_(a), b_(b) {}
  TaskResult progress(Status *) override {
    MinMax m = *a_;
    if (b_->lo < m.lo) m.lo = b_->lo;
    if (m.hi < b_->hi) m.hi = b_->hi;
    *out_ = m;
    return TaskResult::Done;
  }
  std::string describe() const override { return "merge call signatures"; }

 private:
  MinMax *out_;
  const MinMax *a_;
  const MinMax *b_;
};

class VerdictTask : public Task {
 public:
  VerdictTask(const MinMax *m, int rank, uint64_t seq) : m_(m), rank_(rank), seq_(seq) {}
  TaskResult progress(Status *status) override {
    if (m_->lo.same_call(m_->hi)) return TaskResult::Done;
    *status = mismatch_error(CallRange{m_->lo, m_->hi, 0, -1}, rank_, seq_);
    return TaskResult::Failed;
  }
  std::string describe() const override { return "compare call signatures"; }

 private:
  const MinMax *m_;
  int rank_;
  uint64_t seq_;
};

}  // namespace

bool CallRecord::operator<(const CallRecord &o) const {
  return count != o.count   ? count < o.count
         : kind != o.kind   ? kind < o.kind
         : dtype != o.dtype ? dtype < o.dtype
         : op != o.op       ? op < o.op
                            : root < o.root;
}

bool CallRecord::same_call(const CallRecord &o) const {
  return count == o.count && kind == o.kind && dtype == o.dtype && op == o.op && root == o.root;
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
  return mine;
}

std::string describe_call(const CallRecord &r) {
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
  int p = b.size();
  int steps = 0;
  while ((1 << steps) < p) ++steps;
  auto *state = reinterpret_cast<MinMax *>(b.scratch(sizeof(MinMax) * (2 * steps + 1)));
  if (!state) return fail(QUORUM_ERR_NO_MEMORY, "collective", "signature scratch");
  MinMax *received = state + steps + 1;
  const CallRecord mine = call_record(args, b.rank());
  state[0] = MinMax{mine, mine};
  // The signature exchange uses its own tag kind with the collective's sequence.
  Builder sig(b.schedule(), b.transport(), b.rank(), p, CollKind::Signature, seq, b.scratch_pool());
  TaskId prev = -1;
  for (int s = 0; s < steps; ++s) {
    int to = (b.rank() + (1 << s)) % p;
    int from = (b.rank() - (1 << s) % p + p) % p;
    std::vector<TaskId> deps;
    if (prev >= 0) deps.push_back(prev);
    TaskId snd = sig.send(to, s, &state[s], sizeof(MinMax), deps);
    TaskId rcv = sig.recv(from, s, &received[s], sizeof(MinMax));
    std::vector<TaskId> merge_deps{rcv};
    if (prev >= 0) merge_deps.push_back(prev);
    TaskId merged =
        sig.add(std::make_unique<MergeTask>(&state[s + 1], &state[s], &received[s]), merge_deps);
    // The next step's send reads state[s+1]; this step's send must be done
    // before the buffer it reads could be reused (it is not: one slot per step).
    (void)snd;
    prev = merged;
  }
  std::vector<TaskId> deps;
  if (prev >= 0) deps.push_back(prev);
  *done = sig.add(std::make_unique<VerdictTask>(&state[steps], b.rank(), seq), deps);
  return kOk;
}

}  // namespace quorum
