// communicator.hpp: a group of ranks connected by one transport, with its
// progress engine and scratch pool; the collectives' entry points.
//
// A collective call validates its arguments, builds a Schedule from the
// selected algorithm (behind an optional signature check that detects
// mismatched calls), and hands it to the progress engine as a Request.
#pragma once

#include <atomic>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <string>

#include "collectives/algorithms/algorithm.hpp"
#include "collectives/live_requests.hpp"
#include "collectives/object_ids.hpp"
#include "collectives/scratch_pool.hpp"
#include "collectives/shm/shm.hpp"
#include "runtime/bootstrap/bootstrap.hpp"
#include "runtime/memory.hpp"
#include "runtime/progress/engine.hpp"
#include "runtime/topology.hpp"
#include "transports/transport.hpp"

namespace quorum {

struct CommOptions {
  std::string transport;        // "" = QUORUM_TRANSPORT
  std::string progress_thread;  // "" = QUORUM_PROGRESS_THREAD (auto|on|off)
  // "" = QUORUM_HOST_ID, else this rank's host identity as that knob would
  // give it, for this communicator only (tests: ranks as threads on
  // simulated hosts; its sub-communicators see the real host).
  std::string host_id;
};

class Communicator {
 public:
  static Status create(std::unique_ptr<Bootstrap> bootstrap, std::unique_ptr<Communicator> *out,
                       const CommOptions &options = {});
  ~Communicator();
  Communicator(const Communicator &) = delete;
  Communicator &operator=(const Communicator &) = delete;

  // Waits for nothing. While requests from the non-blocking calls are live
  // (in flight, or done but not yet released by wait() or a test() that saw
  // them done) it fails with INVALID_ARG naming how many and changes
  // nothing: wait for them, then finalize again. Otherwise it releases the
  // persistent objects still alive and closes the transport (a barrier with
  // the peers). force (the destructor's): requests still in flight are
  // aborted (they complete with INVALID_ARG) and driven until their transfers
  // stop, so none outlives the engine, scratch buffers or transport it uses;
  // a caller still holding one finds it complete, and must not wait on it
  // through this communicator once it is destroyed.
  Status finalize(bool force = false);
  bool finalized() const { return finalized_; }
  // A collective (or a persistent object) of this communicator failed with
  // `status`; after a failure of the job (a dead or stalled peer, a
  // mismatch, a transport error) finalize waits for the peers only for
  // QUORUM_FINALIZE_GRACE_MS.
  void note_failure(Status status);
  bool job_failed() const { return job_failed_.load(std::memory_order_relaxed); }
  // Requests handed out and not yet released (see finalize).
  size_t live_requests() { return live_.count(); }

  int rank() const { return rank_; }
  int size() const { return size_; }
  const char *transport_name() const { return transport_ ? transport_->name() : "self"; }
  std::string transport_description() const;
  Transport *transport() { return transport_.get(); }
  Bootstrap &bootstrap() { return *bootstrap_; }
  ProgressEngine &engine() { return *engine_; }
  ScratchPool &scratch() { return scratch_; }
  // Which ranks share this rank's host (hierarchical algorithms, binding).
  const HostLayout &layout() const { return layout_; }
  // The cores this host's ranks can use together (0: unknown).
  int local_cores() const { return local_cores_; }

  // Non-blocking collectives: *req completes through wait()/test().
  Status iallreduce(const void *send, void *recv, size_t count, quorum_dtype_t dtype,
                    quorum_op_t op, RequestPtr *req);
  // blocking: the caller waits at once (internal: the progress thread stays asleep).
  Status ibcast(void *buf, size_t bytes, int root, RequestPtr *req, bool blocking = false);
  Status ibarrier(RequestPtr *req, bool blocking = false);
  Status iallgather(const void *send, void *recv, size_t bytes_per_rank, RequestPtr *req,
                    bool blocking = false);
  Status ireduce_scatter(const void *send, void *recv, size_t count_per_rank, quorum_dtype_t dtype,
                         quorum_op_t op, RequestPtr *req, bool blocking = false);

  Status allreduce(const void *send, void *recv, size_t count, quorum_dtype_t dtype,
                   quorum_op_t op);
  Status bcast(void *buf, size_t bytes, int root);
  Status barrier();
  Status allgather(const void *send, void *recv, size_t bytes_per_rank);
  Status reduce_scatter(const void *send, void *recv, size_t count_per_rank, quorum_dtype_t dtype,
                        quorum_op_t op);

  // Collective: *ptr = `bytes` (equal on every rank), zeroed. With a
  // shared-memory channel the memory is symmetric (every rank of the host maps
  // every rank's buffer), and allreduces whose buffers every rank allocated
  // here skip the copies in and out; otherwise it is plain host memory.
  Status mem_alloc(size_t bytes, void **ptr);
  // Local; ptr must come from mem_alloc on this communicator and be in no
  // collective in flight on any rank.
  Status mem_free(void *ptr);
  // Collective: a symmetric buffer in `channel`'s regions (this communicator's
  // shm channel or a persistent object's), nullptr on every rank when no
  // segment can be made.
  Status alloc_symmetric(ShmChannel &channel, size_t bytes, void **out);
  // Allreduces that took the zero-copy path on this rank (tests, statistics).
  uint64_t zero_copy_allreduces() const { return shm_ ? shm_->zero_copy_ops() : 0; }
  // Allreduces that took the cross-memory path on this rank, and the size from
  // which that path is offered (SIZE_MAX: never, or no shm channel).
  uint64_t cross_memory_allreduces() const { return shm_ ? shm_->cross_memory_ops() : 0; }
  size_t cross_memory_min_bytes() const { return shm_ ? shm_->cross_memory_bytes() : SIZE_MAX; }
  // What the probe of the cross-memory path against the copy path measured
  // when the communicator was made (ran: false where it did not run).
  ShmChannel::PathProbe cross_memory_path_probe() const {
    return shm_ ? shm_->path_probe() : ShmChannel::PathProbe{};
  }
  // Out of place, messages above this size copy instead (SIZE_MAX: no limit).
  size_t cross_memory_out_of_place_max_bytes() const {
    return shm_ ? shm_->cross_memory_out_of_place_max_bytes() : SIZE_MAX;
  }
  bool has_shm_channel() const { return shm_ != nullptr; }

  Status wait(const RequestPtr &req);
  Status test(const RequestPtr &req, bool *done);

  // Starts the progress thread unless QUORUM_PROGRESS_THREAD=off.
  void want_progress_thread();
  // Sequence numbers of ordinary collectives (same order on every rank).
  uint64_t next_sequence() { return next_seq_++; }
  // Ids of persistent objects (partial collectives), the same on every rank.
  ObjectIds &object_ids() { return object_ids_; }
  bool signature_check() const { return signature_check_; }
  // Collective `seq` runs over messages with its signature check: said on the
  // shm channel, where a rank that waits there for this one looks (it then
  // joins the check; shm/shm_mismatch.cpp).
  void note_message_call(uint64_t seq) {
    if (shm_ && signature_check_) shm_->note_message_call(seq);
  }

  // Persistent objects (partial collectives) register what lets go of this
  // communicator should it be finalized before they are destroyed; finalize
  // runs what is still registered, first.
  int add_finalize_hook(std::function<void()> hook);
  void remove_finalize_hook(int id);

  // A shared-memory channel of its own for a persistent object (collective
  // over this communicator); empty when this communicator has none.
  Status make_shm_channel(std::unique_ptr<ShmChannel> *out);

  // Starts a validated collective (used by the entry points above). A
  // non-blocking one stays live (see finalize) until wait/test releases it.
  Status start(const CollArgs &args, RequestPtr *req, bool blocking);
  // Runs a schedule built outside start(): point-to-point transfers, the
  // collectives of collectives/more_collectives.cpp (communicator_submit.cpp).
  // Takes no sequence number; keeps `leases` until it completes. Live as above.
  Status submit(std::unique_ptr<Schedule> schedule, const std::string &what, RequestPtr *req,
                bool blocking, std::vector<ScratchPool::Lease> leases = {});

 private:
  Communicator() = default;
  Status run_local(const CollArgs &args);
  // Forced finalize: aborts the requests in flight and waits until they stop.
  void abandon_requests();
  // The ranks of this communicator as a shared-memory group (its allgather).
  ShmGroup shm_group();

  int rank_ = 0;
  int size_ = 1;
  std::unique_ptr<Bootstrap> bootstrap_;
  std::unique_ptr<Transport> transport_;
  std::unique_ptr<ProgressEngine> engine_;
  ScratchPool scratch_;
  HostLayout layout_;
  // The cores this host's ranks can use together (cores_covered over their
  // affinity masks; 0: unknown): whether they share cores, the same on each.
  int local_cores_ = 0;
  std::unique_ptr<ShmChannel> shm_;  // every rank a process of this host (ucx)
  std::mutex plain_allocs_mutex_;
  std::map<void *, AlignedBuffer> plain_allocs_;  // mem_alloc without symmetric memory
  // The knobs the blocking allreduce's fast path reads, cached until a knob
  // changes (knob_generation): reading a knob takes a lock.
  struct FastPathKnobs {
    uint64_t generation = 0;
    bool shm = false;
    int64_t timeout_ms = 0;
    int64_t nap_us = 1;
    uint64_t spin_ns = 0;
  };
  const FastPathKnobs &fast_path_knobs();
  // The fast path of allreduce (host buffers) and barrier: the calling thread
  // runs `a` through the shared-memory segment itself, without building a
  // schedule. False where it does not apply (shm_usable, allreduce_uses_shm:
  // take the schedule); else true with the result in *status.
  bool run_shm_inline(const CollArgs &a, Status *status);
  // What shm_usable needs to know of this communicator's calls.
  ShmCallFacts shm_call_facts() const;
  FastPathKnobs fast_;
  std::string progress_mode_;
  std::atomic<uint64_t> next_seq_{0};
  ObjectIds object_ids_;
  bool signature_check_ = false;
  bool finalized_ = false;
  std::atomic<bool> job_failed_{false};
  LiveRequests live_;
  std::map<int, std::function<void()>> finalize_hooks_;
  int next_hook_id_ = 0;
};

// Argument checks shared by the C and C++ entry points; the send buffer holds
// `blocks` blocks of `count` elements (reduce-scatter: one per rank), the
// receive buffer one. A send buffer that overlaps the receive buffer without
// being it (in place) is refused.
Status validate_reduction(const char *what, const void *send, const void *recv, size_t count,
                          quorum_dtype_t dtype, quorum_op_t op, size_t blocks = 1);

}  // namespace quorum
