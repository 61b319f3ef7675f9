// algorithm.hpp: what an algorithm is (a function that fills a Schedule) and
// the Builder it uses to add send/recv/reduce/copy tasks with the right tags.
//
// Tag layout (kTagBits = 44): [kind:4][sequence:28][step:12]. Every rank calls
// collectives in the same order, so the per-communicator sequence number
// matches across ranks; steps wrap at 4096, which is safe because messages of
// one (source, tag) are matched in order.
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "collectives/scratch_pool.hpp"
#include "quorum/quorum.h"
#include "runtime/knobs.hpp"
#include "runtime/progress/schedule.hpp"
#include "runtime/topology.hpp"
#include "transports/transport.hpp"

namespace quorum {

class ShmChannel;

enum class CollKind : uint8_t {
  Allreduce = 1,
  Bcast = 2,
  Barrier = 3,
  Allgather = 4,
  ReduceScatter = 5,
  Signature = 6,       // the mismatch check in front of a collective
  PartialControl = 7,  // partial collectives: activations
  PartialData = 8,     // partial collectives: data phase
  PointToPoint = 9,    // quorum_send/recv: the user's tag in the sequence field
  CommSplit = 10,      // a sub-communicator's bootstrap over its parent (comm_split.cpp)
  Alltoall = 11,       // alltoall and alltoallv (more_collectives.cpp)
  Gather = 12,
  Scatter = 13,
  Reduce = 14,  // rooted reduce
};
const char *coll_kind_name(CollKind kind);

constexpr int kTagStepBits = 12;
constexpr int kTagSeqBits = 28;
inline uint64_t make_tag(CollKind kind, uint64_t seq, uint64_t step) {
  return (uint64_t(kind) << (kTagSeqBits + kTagStepBits)) |
         ((seq & ((uint64_t{1} << kTagSeqBits) - 1)) << kTagStepBits) |
         (step & ((uint64_t{1} << kTagStepBits) - 1));
}

// The arguments of one collective call, already validated.
struct CollArgs {
  CollKind kind = CollKind::Allreduce;
  const void *send = nullptr;  // == recv for in place
  void *recv = nullptr;
  size_t count = 0;  // allreduce: elements; reduce-scatter: elements per rank;
                     // bcast: bytes; allgather: bytes per rank
  quorum_dtype_t dtype = QUORUM_FLOAT32;
  quorum_op_t op = QUORUM_SUM;
  int root = 0;
  // Allreduce through the shm algorithm only: this rank contributes the op's
  // identity and send's bytes are not read (a partial round joined with an
  // empty accumulator). Other algorithms need the identity in the buffer.
  bool send_identity = false;
  // Carry the call's signature in the algorithm's own messages and fail with
  // QUORUM_ERR_MISMATCH on every rank if the ranks' calls differ (only
  // algorithms that say so in algorithm_checks_signature; the communicator
  // puts the separate check of signature.hpp in front of the others).
  bool check_signature = false;
  // The call went through the shared-memory channel: its call record says so
  // (signature.hpp), so that it differs from the same call over messages.
  bool over_shm = false;
};

// The recursive-doubling allreduce carries the signature check in its own
// messages up to this size (a header on each; larger ones take the separate
// check). The limit keeps every message of a mismatched call within the
// receive room (signature.cpp's slack): a longer message is truncated, and a
// truncated rendezvous message ends the smaller rank's call with a peer failure
// instead of the mismatch. (The stall once seen above 4 KiB was UCX's eager
// fragments, ucx_transport.cpp.)
constexpr size_t kSignatureInlineBytes = 4096;

class Builder {
 public:
  Builder(Schedule &schedule, Transport *transport, int rank, int size, CollKind kind, uint64_t seq,
          ScratchPool &scratch)
      : s_(schedule),
        t_(transport),
        rank_(rank),
        size_(size),
        kind_(kind),
        seq_(seq),
        scratch_(scratch) {}

  int rank() const { return rank_; }
  int size() const { return size_; }
  CollKind kind() const { return kind_; }
  uint64_t tag(int step) const { return make_tag(kind_, seq_, static_cast<uint64_t>(step)); }
  uint64_t seq() const { return seq_; }

  // Tasks added without dependencies depend on these (e.g. the signature check).
  void set_entry(TaskIds deps) { entry_ = std::move(deps); }

  TaskId send(int peer, int step, const void *buf, size_t bytes, TaskIds deps = {});
  TaskId recv(int peer, int step, void *buf, size_t bytes, TaskIds deps = {});
  TaskId reduce(void *out, const void *a, const void *b, size_t count, quorum_dtype_t dtype,
                quorum_op_t op, TaskIds deps = {});
  TaskId copy(void *dst, const void *src, size_t bytes, TaskIds deps = {});
  TaskId scale(void *buf, size_t count, quorum_dtype_t dtype, int nranks, TaskIds deps = {});
  TaskId nop(TaskIds deps = {}, Schedule::Join join = Schedule::Join::All);
  TaskId add(std::unique_ptr<Task> task, TaskIds deps = {},
             Schedule::Join join = Schedule::Join::All);

  // A scratch buffer that lives until the collective completes.
  uint8_t *scratch(size_t bytes);
  std::vector<ScratchPool::Lease> take_leases() { return std::move(leases_); }

  Schedule &schedule() { return s_; }
  Transport *transport() { return t_; }
  // The communicator's shared-memory channel (all ranks on this host), or null.
  void set_shm(ShmChannel *shm) { shm_ = shm; }
  ShmChannel *shm() const { return shm_; }
  // Which ranks share a host (hierarchical algorithms), or null when unknown.
  void set_layout(const HostLayout *layout) { layout_ = layout; }
  const HostLayout *layout() const { return layout_; }
  ScratchPool &scratch_pool() { return scratch_; }

 private:
  const TaskIds &deps_or_entry(const TaskIds &deps) const { return deps.empty() ? entry_ : deps; }
  Schedule &s_;
  Transport *t_;
  int rank_;
  int size_;
  CollKind kind_;
  uint64_t seq_;
  ScratchPool &scratch_;
  TaskIds entry_;
  std::vector<ScratchPool::Lease> leases_;
  ShmChannel *shm_ = nullptr;
  const HostLayout *layout_ = nullptr;
};

// Builds the tasks of one collective; returns the id of its last task.
using BuildFn = std::function<Status(Builder &, const CollArgs &, TaskId *last)>;

// What carries an algorithm's data.
enum class AlgorithmMedium : uint8_t {
  Messages,      // the transport
  SharedMemory,  // the communicator's shared-memory channel (collectives/shm/)
};

// Whether an algorithm detects mismatched calls itself when asked
// (CollArgs::check_signature); where it does not, the communicator puts the
// separate check of signature.hpp in front of it.
enum class OwnSignatureCheck : uint8_t {
  None,
  Always,           // the shm allreduce: its flag line
  UpToInlineBytes,  // messages of up to kSignatureInlineBytes: a header on them
};

struct AlgorithmInfo {
  CollKind kind;
  const char *name;
  const char *summary;  // steps and bytes on the wire
  BuildFn build;
  AlgorithmMedium medium = AlgorithmMedium::Messages;
  OwnSignatureCheck signature_check = OwnSignatureCheck::None;
};

// Whether `algo` detects this call's mismatches itself (only allreduces do).
bool algorithm_checks_signature(const CollArgs &args, const AlgorithmInfo &algo);

// QUORUM_ALLREDUCE_ALGO (table.cpp); shared memory's use of it: allreduce_uses_shm
// (collectives/shm/shm.hpp).
extern Knob<std::string> knob_allreduce_algo;

// Whether QUORUM_BARRIER_ALGO names an algorithm (not auto): a checked barrier
// then runs it after the signature exchange instead of the exchange alone.
bool barrier_algorithm_forced();

// Every algorithm, registered in algorithms/table.cpp.
const std::vector<AlgorithmInfo> &algorithm_table();
// The algorithm for this call: the knob QUORUM_<KIND>_ALGO if set, else the
// default rule on message size and number of ranks. shm_ready: shm_usable
// said yes for this call and the caller's Builder has the channel (else "shm"
// is never chosen, and a knob that forces it falls back to the default rule). layout: the
// communicator's hosts (the caller's Builder must carry the same one); "hierarchical" is chosen
// only when it is given and uniform (patterns/hierarchy.hpp).
Status select_algorithm(const CollArgs &args, int size, const AlgorithmInfo **out,
                        bool shm_ready = false, const HostLayout *layout = nullptr);

}  // namespace quorum
