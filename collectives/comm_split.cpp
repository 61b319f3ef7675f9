// comm_split.cpp: comm_split and comm_dup (see the header), and the bootstrap
// of a sub-communicator: allgathers as point-to-point messages between its
// ranks, over the parent's transport while it is made, over its own after.
#include "collectives/comm_split.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <cstring>
#include <vector>

#include "collectives/algorithms/algorithm.hpp"
#include "collectives/tasks.hpp"
#include "runtime/knobs.hpp"
#include "runtime/log.hpp"

namespace quorum {
namespace {

class SubgroupBootstrap : public Bootstrap {
 public:
  // members: the parent ranks of the new communicator, in its rank order.
  SubgroupBootstrap(Communicator *parent, std::vector<int> members, int rank, uint64_t id)
      : parent_(parent), members_(std::move(members)), rank_(rank), id_(id) {}

  const char *name() const override { return "split"; }
  int rank() const override { return rank_; }
  int size() const override { return static_cast<int>(members_.size()); }

  // From now on the communicator made over this bootstrap carries it.
  void attach(Communicator *self) { self_ = self; }

  Status allgather(const void *in, void *out, size_t bytes) override {
    auto *dst = static_cast<uint8_t *>(out);
    if (bytes > 0) std::memmove(dst + bytes * static_cast<size_t>(rank_), in, bytes);
    if (size() == 1) return kOk;
    Transport *transport = self_ ? self_->transport() : parent_->transport();
    ProgressEngine &engine = self_ ? self_->engine() : parent_->engine();
    const uint64_t tag = make_tag(CollKind::CommSplit, id_, calls_++);
    std::string what =
        fmt::format("bootstrap allgather of {} B on split communicator {}", bytes, id_);
    auto schedule = std::make_unique<Schedule>(what);
    for (int i = 0; i < size(); ++i) {
      if (i == rank_) continue;
      const int peer = self_ ? i : members_[static_cast<size_t>(i)];
      schedule->add(std::make_unique<SendTask>(transport, peer, tag, in, bytes));
      schedule->add(std::make_unique<RecvTask>(transport, peer, tag,
                                               dst + bytes * static_cast<size_t>(i), bytes));
    }
    auto request = std::make_shared<Request>(std::move(schedule),
                                             Deadline::after_ms(knob_timeout_ms.get()), what);
    engine.submit(request, true);
    return engine.wait(request);
  }

 private:
  Communicator *parent_;
  Communicator *self_ = nullptr;
  std::vector<int> members_;
  int rank_;
  uint64_t id_;
  uint64_t calls_ = 0;
};

struct SplitEntry {
  int32_t color;
  int32_t key;
};

}  // namespace

Status comm_split(Communicator &parent, int color, int key, std::unique_ptr<Communicator> *out) {
  if (!out) return fail(QUORUM_ERR_INVALID_ARG, "api", "comm_split: NULL output pointer");
  out->reset();
  if (color < 0 && color != kSplitUndefined) {
    return fail(QUORUM_ERR_INVALID_ARG, "api",
                "comm_split: color {} is negative (QUORUM_UNDEFINED, -1, joins none)", color);
  }
  // Every parent rank draws the same number here (collectives run in the
  // same order everywhere): it tags the new communicator's bootstrap.
  const uint64_t id = parent.next_sequence();
  const int p = parent.size();
  std::vector<SplitEntry> all(static_cast<size_t>(p));
  SplitEntry mine{color, key};
  QUORUM_CHECK(parent.allgather(&mine, all.data(), sizeof(SplitEntry)));
  if (color == kSplitUndefined) return kOk;

  std::vector<int> members;
  for (int r = 0; r < p; ++r) {
    if (all[static_cast<size_t>(r)].color == color) members.push_back(r);
  }
  std::stable_sort(members.begin(), members.end(), [&](int a, int b) {
    return all[static_cast<size_t>(a)].key < all[static_cast<size_t>(b)].key;
  });
  const int rank =
      static_cast<int>(std::find(members.begin(), members.end(), parent.rank()) - members.begin());
  auto bootstrap = std::make_unique<SubgroupBootstrap>(&parent, members, rank, id);
  SubgroupBootstrap *raw = bootstrap.get();
  CommOptions options;
  if (parent.size() > 1 && members.size() > 1) options.transport = parent.transport_name();
  std::unique_ptr<Communicator> comm;
  Status s = Communicator::create(std::move(bootstrap), &comm, options);
  // Communicator::create names the process's log rank after the new one.
  if (std::string(parent.bootstrap().name()) == "threads") {
    set_log_rank(parent.rank());
  } else {
    set_log_rank_default(parent.rank());
  }
  if (s != kOk) return s;
  raw->attach(comm.get());
  QLOG_DEBUG("comm", "split {}: color {} key {} -> rank {} of {}", id, color, key, rank,
             members.size());
  *out = std::move(comm);
  return kOk;
}

Status comm_dup(Communicator &parent, std::unique_ptr<Communicator> *out) {
  return comm_split(parent, 0, parent.rank(), out);
}

}  // namespace quorum
