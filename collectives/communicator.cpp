// communicator.cpp: creation, finalisation and the collective entry points.
#include "collectives/communicator.hpp"

#include <algorithm>
#include <cstring>
#include <type_traits>

#include "collectives/device_staging.hpp"
#include "collectives/reduce/reduce_kernels.hpp"
#include "collectives/signature.hpp"
#include "runtime/knobs.hpp"
#include "runtime/log.hpp"
#include "runtime/memory.hpp"
#include "runtime/progress/engine.hpp"

namespace quorum {

namespace {
// What every rank tells the others when a communicator is made.
struct RankPlacement {
  HostIdentity host;
  CpuMask cpus;
};
static_assert(std::is_trivially_copyable_v<RankPlacement>, "allgathered as bytes");

// Whether either buffer is CUDA device memory (never without a CUDA runtime).
bool any_device_buffer(const void *a, const void *b) {
  return cuda_available() &&
         (buffer_kind(a) == BufferKind::Device || buffer_kind(b) == BufferKind::Device);
}
}  // namespace

Knob<bool> knob_signature_check(
    "QUORUM_SIGNATURE_CHECK", QUORUM_SIGNATURE_CHECK_DEFAULT != 0,
    "Check that every rank called the same collective with the same count, dtype, op and root, "
    "else fail with QUORUM_ERR_MISMATCH on every rank: the shared-memory allreduce and the "
    "small-message (recursive doubling) allreduce carry the check in their own messages; the "
    "other collectives on messages run a log2(P)-step exchange of 56 B messages first (a "
    "barrier on messages is that exchange alone), which a shared-memory allreduce or barrier "
    "joins when a rank calls another collective over messages (on unless built with "
    "-Dsignature_check=disabled)");

Knob<int64_t> knob_finalize_grace_ms(
    "QUORUM_FINALIZE_GRACE_MS", 1000,
    "After a collective failed (a dead or stalled peer, a mismatch, a transport error): how long "
    "finalize waits for the other ranks at its closing barrier before it closes anyway (bounded "
    "by QUORUM_TIMEOUT_MS)");

// Whether `blocks` blocks of `count` elements of `esize` bytes stay far from
// overflowing a size_t (the schedules add and scale offsets of that size).
static bool too_large(size_t count, size_t esize, size_t blocks) {
  return count > (SIZE_MAX / 64) / esize / std::max<size_t>(1, blocks);
}

Status validate_reduction(const char *what, const void *send, const void *recv, size_t count,
                          quorum_dtype_t dtype, quorum_op_t op, size_t blocks) {
  if (!valid_dtype(dtype)) {
    return fail(QUORUM_ERR_INVALID_ARG, "api", "{}: unknown dtype {}", what,
                static_cast<int>(dtype));
  }
  if (!valid_op(op)) {
    return fail(QUORUM_ERR_INVALID_ARG, "api", "{}: unknown op {}", what, static_cast<int>(op));
  }
  if (count > 0 && (send == nullptr || recv == nullptr)) {
    return fail(QUORUM_ERR_INVALID_ARG, "api", "{}: NULL {} buffer with count {}", what,
                send == nullptr ? "send" : "receive", count);
  }
  if (too_large(count, dtype_size(dtype), blocks)) {
    return fail(QUORUM_ERR_INVALID_ARG, "api", "{}: count {}{} is too large", what, count,
                blocks > 1 ? fmt::format(" x {} ranks", blocks) : std::string());
  }
  const size_t bytes = count * dtype_size(dtype);
  if (send != recv && ranges_overlap(send, std::max<size_t>(1, blocks) * bytes, recv, bytes)) {
    return fail(QUORUM_ERR_INVALID_ARG, "api",
                "{}: the send and receive buffers overlap without being the same (in place: "
                "pass QUORUM_IN_PLACE)",
                what);
  }
  return kOk;
}

Status Communicator::create(std::unique_ptr<Bootstrap> bootstrap,
                            std::unique_ptr<Communicator> *out, const CommOptions &options) {
  if (!bootstrap) return fail(QUORUM_ERR_INVALID_ARG, "comm", "no bootstrap");
  QUORUM_CHECK(validate_knobs());
  std::unique_ptr<Communicator> comm(new Communicator());
  comm->rank_ = bootstrap->rank();
  comm->size_ = bootstrap->size();
  if (std::string(bootstrap->name()) == "threads") {
    set_log_rank(comm->rank_);
  } else {
    set_log_rank_default(comm->rank_);
  }
  comm->bootstrap_ = std::move(bootstrap);
  comm->signature_check_ = knob_signature_check.get();
  comm->progress_mode_ =
      options.progress_thread.empty() ? knob_progress_thread.get() : options.progress_thread;
  // Every rank's host, and the CPUs it may run on: the ranks of a host bound
  // core per rank (mpirun's and srun's default) have a core each although
  // each process sees only one.
  std::vector<RankPlacement> placements(static_cast<size_t>(comm->size_));
  const RankPlacement me{
      options.host_id.empty() ? local_host_identity() : host_identity_for(options.host_id),
      allowed_cpus()};
  QUORUM_CHECK(comm->bootstrap_->allgather(&me, placements.data(), sizeof(RankPlacement)));
  std::vector<HostIdentity> hosts;
  for (const RankPlacement &p : placements) hosts.push_back(p.host);
  comm->layout_ = host_layout(hosts, comm->rank_);
  std::vector<CpuMask> local_cpus;
  for (int r : comm->layout_.local) local_cpus.push_back(placements[static_cast<size_t>(r)].cpus);
  comm->local_cores_ = cores_covered(local_cpus);
  if (comm->size_ > 1) {
    QUORUM_CHECK(create_transport(options.transport, *comm->bootstrap_, &comm->transport_));
    Status s = comm->transport_->init(*comm->bootstrap_);
    if (s != kOk) return s;
    Transport *t = comm->transport_.get();
    ProgressSource src{
        [t] { return t->progress(); }, [t] { return t->event_fd(); },
        [t] { return t->arm(); },      [t] { return t->failed_peer(); },
        [t] { t->probe_peers(); },     [t](uint64_t since) { return t->silent_peers(since); }};
    comm->engine_ = std::make_unique<ProgressEngine>(std::move(src), comm->rank_);
    // The same inputs on every rank, so every rank takes part in the creation or none.
    if (shm_channel_wanted(t->name(), comm->layout_.local.size(), comm->size_)) {
      ShmGroup group = ShmGroup::of(*comm->bootstrap_);
      group.cores = comm->local_cores_;
      QUORUM_CHECK(ShmChannel::create(group, &comm->shm_));
    }
  } else {
    comm->engine_ = std::make_unique<ProgressEngine>(ProgressSource{}, comm->rank_);
  }
  const int own_cores = usable_core_count();
  comm->engine_->set_spin(static_cast<int>(comm->layout_.local.size()),
                          comm->local_cores_ > 0 ? comm->local_cores_ : own_cores, own_cores);
  if (comm->shm_) {
    QUORUM_CHECK(choose_cross_memory_path(comm->shm_.get(), comm->transport_.get(), *comm->engine_,
                                          ShmGroup::of(*comm->bootstrap_), knob_timeout_ms.get()));
  }
  int local_rank = comm->layout_.local_rank;
  comm->engine_->set_thread_init([local_rank] { bind_progress_thread(local_rank); });
  if (comm->progress_mode_ == "on") comm->engine_->start_thread();
  QLOG_INFO("comm",
            "rank {} of {} over {} (bootstrap {}, progress thread {}; host {} of {}, local rank "
            "{} of {}; cores the host's ranks may use: {})",
            comm->rank_, comm->size_, comm->transport_description(), comm->bootstrap_->name(),
            comm->progress_mode_, comm->layout_.host_index, comm->layout_.leaders.size(),
            comm->layout_.local_rank, comm->layout_.local.size(), comm->local_cores_);
  *out = std::move(comm);
  return kOk;
}

Communicator::~Communicator() {
  if (!finalized_) finalize(true);
}

std::string Communicator::transport_description() const {
  return transport_ ? transport_->description() : "self (single rank)";
}

void Communicator::want_progress_thread() {
  if (progress_mode_ == "auto" && size_ > 1) engine_->start_thread();
}

Status Communicator::finalize(bool force) {
  if (finalized_) return kOk;
  if (!force) {
    const size_t live = live_.count();
    if (live > 0) {
      return fail(QUORUM_ERR_INVALID_ARG, "comm",
                  "finalize on rank {}: {} request{} still in flight; wait for {} (or test until "
                  "done), then finalize again (the communicator is still usable)",
                  rank_, live, live == 1 ? " is" : "s are", live == 1 ? "it" : "them");
    }
  }
  // Objects still alive let go first (while the engine still runs).
  auto hooks = std::move(finalize_hooks_);
  finalize_hooks_.clear();
  for (auto &entry : hooks) entry.second();
  finalized_ = true;
  if (engine_) {
    engine_->stop_thread();
    abandon_requests();
  }
  live_.clear();
  Status s = kOk;
  if (shm_ && shm_->broken()) note_failure(shm_->broken_status());
  if (job_failed()) {
    // The peers that failed may never come to the barrier: a short grace.
    bootstrap_->limit_waits_ms(std::max<int64_t>(1, knob_finalize_grace_ms.get()));
  }
  if (transport_ && engine_) s = transport_->shutdown(*bootstrap_);
  return s;
}

void Communicator::note_failure(Status status) {
  if (status == QUORUM_ERR_PEER_FAILED || status == QUORUM_ERR_TIMEOUT ||
      status == QUORUM_ERR_MISMATCH || status == QUORUM_ERR_TRANSPORT) {
    job_failed_.store(true, std::memory_order_relaxed);
  }
}

void Communicator::abandon_requests() {
  const size_t active = engine_->active_requests();
  if (active == 0) return;
  // The detail each aborted request reports.
  fail(QUORUM_ERR_INVALID_ARG, "comm",
       "rank {}: the communicator was finalized (forced) while {} request{} in flight; aborted",
       rank_, active, active == 1 ? " was" : "s were");
  const int64_t timeout_ms = knob_timeout_ms.get();
  const size_t left =
      engine_->abort_and_drain(QUORUM_ERR_INVALID_ARG, Deadline::after_ms(timeout_ms));
  if (left > 0) {
    QLOG_ERROR("comm",
               "rank {}: {} aborted request(s) did not stop within {} ms; left allocated so that "
               "no transfer writes into freed memory",
               rank_, left, timeout_ms);
  }
}

int Communicator::add_finalize_hook(std::function<void()> hook) {
  finalize_hooks_.emplace(next_hook_id_, std::move(hook));
  return next_hook_id_++;
}

void Communicator::remove_finalize_hook(int id) {
  finalize_hooks_.erase(id);
}

Status Communicator::run_local(const CollArgs &a) {
  size_t bytes = 0;
  switch (a.kind) {
    case CollKind::Allreduce:
    case CollKind::ReduceScatter:
      bytes = a.count * dtype_size(a.dtype);
      break;
    case CollKind::Allgather:
      bytes = a.count;
      break;
    default:
      return kOk;
  }
  if (bytes == 0 || a.send == a.recv) return kOk;
  if (any_device_buffer(a.send, a.recv)) {
    return device_copy(a.recv, a.send, bytes);
  }
  std::memmove(a.recv, a.send, bytes);
  return kOk;
}

namespace {

// A collective's description for its messages, formatted only when needed.
struct CallLabel {
  CollKind kind;
  quorum_dtype_t dtype;
  quorum_op_t op;
  uint64_t seq;
  size_t count;
  const char *algorithm;
};

std::string format_call_label(const CallLabel &c) {
  return fmt::format("{} #{} ({}, count {}, {}, {})", coll_kind_name(c.kind), c.seq, c.algorithm,
                     c.count, dtype_name(c.dtype), op_name(c.op));
}

}  // namespace

Status Communicator::start(const CollArgs &args_in, RequestPtr *req, bool blocking) {
  if (finalized_) return fail(QUORUM_ERR_INVALID_ARG, "comm", "communicator is finalized");
  CollArgs args = args_in;
  if (size_ == 1) {
    Status s = run_local(args);
    auto sched = std::make_unique<Schedule>(coll_kind_name(args.kind));
    *req =
        std::make_shared<Request>(std::move(sched), Deadline::never(), coll_kind_name(args.kind));
    if (!blocking) live_.add(*req);
    engine_->submit(*req);
    return s;
  }
  if (!blocking) want_progress_thread();
  uint64_t seq = next_sequence();
  const AlgorithmInfo *algo = nullptr;
  // Shared memory only for host buffers (device buffers go through the transport).
  // After a mismatch broke the channel, every allreduce fails on every rank
  // (whichever path it would take), after a signature exchange that meets a
  // mismatched call over messages (broken_channel_task).
  const bool after_mismatch = shm_after_mismatch(shm_.get(), args, signature_check_);
  const bool shm_ready = shm_usable(shm_.get(), args, shm_call_facts());
  QUORUM_CHECK(select_algorithm(args, size_, &algo, shm_ready, &layout_));
  // A checked barrier is the signature exchange alone (see below), unless the
  // user asked for a barrier algorithm.
  const bool exchange_barrier =
      args.kind == CollKind::Barrier && signature_check_ && !barrier_algorithm_forced();
  const CallLabel label{args.kind,
                        args.dtype,
                        args.op,
                        seq,
                        args.count,
                        exchange_barrier ? "signature exchange"
                        : after_mismatch ? "after a shared-memory mismatch"
                                         : algo->name};
  if (log_enabled(LogLevel::Debug, "coll"))
    QLOG_DEBUG("coll", "start {}", format_call_label(label));
  auto sched = std::make_unique<Schedule>(coll_kind_name(args.kind));
  Builder b(*sched, transport_.get(), rank_, size_, args.kind, seq, scratch_);
  if (shm_ready) b.set_shm(shm_.get());
  b.set_layout(&layout_);
  StagingPlan staging;
  QUORUM_CHECK(stage_device_buffers(b, &args, transport_.get(), &staging));
  // Over messages where the others may go through shared memory: say so on
  // the channel, where a rank that waits there for this one looks (it then
  // joins this call's signature exchange, see shm/shm_mismatch.cpp).
  if (!(shm_ready && algo->medium == AlgorithmMedium::SharedMemory)) note_message_call(seq);
  TaskId checked = -1;
  if (signature_check_ && !after_mismatch && algorithm_checks_signature(args, *algo)) {
    args.check_signature = true;  // in the algorithm's own messages
  } else if (signature_check_) {
    QUORUM_CHECK(add_signature_check(b, args, seq, &checked));
    b.set_entry({checked});
  }
  TaskId last = -1;
  if (exchange_barrier) {
    // The exchange is a barrier itself: no rank's verdict comes before every
    // rank's description reached it.
    last = checked;
  } else if (after_mismatch) {
    last = b.add(broken_channel_task(shm_.get()), {checked});
  } else {
    QUORUM_CHECK(algo->build(b, args, &last));
  }
  finish_device_staging(b, staging, last);
  auto request =
      std::make_shared<Request>(std::move(sched), Deadline::after_ms(knob_timeout_ms.get()),
                                RequestLabel::lazy<CallLabel, format_call_label>(label));
  auto leases = std::make_shared<std::vector<ScratchPool::Lease>>(b.take_leases());
  request->on_complete = [leases](Status) mutable { leases->clear(); };
  if (!blocking) live_.add(request);
  engine_->submit(request, blocking);
  *req = std::move(request);
  return kOk;
}

ShmGroup Communicator::shm_group() {
  ShmGroup group;
  group.rank = rank_;
  group.size = size_;
  group.allgather = [this](const void *mine, void *all, size_t bytes) {
    return allgather(mine, all, bytes);
  };
  group.cores = local_cores_;
  return group;
}

Status Communicator::make_shm_channel(std::unique_ptr<ShmChannel> *out) {
  out->reset();
  if (!shm_) return kOk;
  // The communicator's symmetric buffers (quorum_mem_alloc) are visible to it.
  QUORUM_CHECK(ShmChannel::create(shm_group(), out, shm_->shared_regions()));
  // Both automatic: the path the communicator's probe chose (the same on every rank).
  if (*out && (*out)->cross_memory_automatic() && shm_->cross_memory_automatic()) {
    (*out)->set_cross_memory_bytes(shm_->cross_memory_bytes());
    if ((*out)->cross_memory_out_of_place_max_automatic() &&
        shm_->cross_memory_out_of_place_max_automatic()) {
      (*out)->set_cross_memory_out_of_place_max_bytes(shm_->cross_memory_out_of_place_max_bytes());
    }
  }
  return kOk;
}

Status Communicator::alloc_symmetric(ShmChannel &channel, size_t bytes, void **out) {
  return channel.regions().alloc(shm_group(), bytes, out);
}

Status Communicator::mem_alloc(size_t bytes, void **ptr) {
  if (ptr == nullptr) return fail(QUORUM_ERR_INVALID_ARG, "api", "mem_alloc: NULL result pointer");
  *ptr = nullptr;
  if (bytes == 0) return fail(QUORUM_ERR_INVALID_ARG, "api", "mem_alloc: zero bytes");
  std::vector<uint64_t> sizes(static_cast<size_t>(size_));
  const uint64_t mine = bytes;
  QUORUM_CHECK(allgather(&mine, sizes.data(), sizeof(mine)));
  for (int q = 0; q < size_; ++q) {
    if (sizes[static_cast<size_t>(q)] != mine) {
      return fail(QUORUM_ERR_MISMATCH, "api",
                  "mem_alloc is collective with equal sizes: rank {} asked for {} B, rank {} for "
                  "{} B",
                  rank_, bytes, q, sizes[static_cast<size_t>(q)]);
    }
  }
  // Equal on every rank (checked above), so every rank refuses it alike.
  if (bytes > kMaxAllocBytes) {
    return fail(QUORUM_ERR_INVALID_ARG, "api",
                "mem_alloc: {} B is more than any process can map (at most {} B)", bytes,
                kMaxAllocBytes);
  }
  if (shm_) {
    QUORUM_CHECK(alloc_symmetric(*shm_, bytes, ptr));
    if (*ptr != nullptr) return kOk;
    QLOG_INFO("shm", "mem_alloc: no shared segment for {} B; plain memory (no zero-copy)", bytes);
  }
  AlignedBuffer buf = allocate_aligned(bytes);
  if (!buf) return fail(QUORUM_ERR_NO_MEMORY, "api", "mem_alloc: {} B", bytes);
  *ptr = buf.get();
  std::lock_guard<std::mutex> lock(plain_allocs_mutex_);
  plain_allocs_.emplace(*ptr, std::move(buf));
  return kOk;
}

Status Communicator::mem_free(void *ptr) {
  if (ptr == nullptr) return kOk;
  if (shm_ && shm_->regions().release(ptr)) return kOk;
  std::lock_guard<std::mutex> lock(plain_allocs_mutex_);
  if (plain_allocs_.erase(ptr) == 0) {
    return fail(QUORUM_ERR_INVALID_ARG, "api",
                "mem_free: {} was not allocated by mem_alloc on this communicator (or freed twice)",
                ptr);
  }
  return kOk;
}

Status Communicator::wait(const RequestPtr &req) {
  if (!req) return fail(QUORUM_ERR_INVALID_ARG, "api", "wait on a NULL request");
  Status s = engine_->wait(req);
  live_.remove(req);
  if (s != kOk) note_failure(s);
  return s;
}

Status Communicator::test(const RequestPtr &req, bool *done) {
  if (!req || !done) return fail(QUORUM_ERR_INVALID_ARG, "api", "test on a NULL request");
  Status s = engine_->test(req, done);
  if (*done) live_.remove(req);
  if (s != kOk) note_failure(s);
  return s;
}

Status Communicator::iallreduce(const void *send, void *recv, size_t count, quorum_dtype_t dtype,
                                quorum_op_t op, RequestPtr *req) {
  if (send == QUORUM_IN_PLACE) send = recv;
  QUORUM_CHECK(validate_reduction("allreduce", send, recv, count, dtype, op));
  CollArgs a{CollKind::Allreduce, send, recv, count, dtype, op, 0};
  return start(a, req, false);
}

Status Communicator::ibcast(void *buf, size_t bytes, int root, RequestPtr *req, bool blocking) {
  if (root < 0 || root >= size_) {
    return fail(QUORUM_ERR_INVALID_ARG, "api", "bcast: root {} outside [0, {})", root, size_);
  }
  if (bytes > 0 && buf == nullptr) return fail(QUORUM_ERR_INVALID_ARG, "api", "bcast: NULL buffer");
  if (too_large(bytes, 1, 1)) {
    return fail(QUORUM_ERR_INVALID_ARG, "api", "bcast: {} bytes is too large", bytes);
  }
  CollArgs a{CollKind::Bcast, buf, buf, bytes, QUORUM_FLOAT32, QUORUM_SUM, root};
  return start(a, req, blocking);
}

Status Communicator::ibarrier(RequestPtr *req, bool blocking) {
  CollArgs a{CollKind::Barrier, nullptr, nullptr, 0, QUORUM_FLOAT32, QUORUM_SUM, 0};
  return start(a, req, blocking);
}

Status Communicator::iallgather(const void *send, void *recv, size_t bytes_per_rank,
                                RequestPtr *req, bool blocking) {
  if (bytes_per_rank > 0 && (recv == nullptr || send == nullptr)) {
    return fail(QUORUM_ERR_INVALID_ARG, "api", "allgather: NULL buffer");
  }
  if (too_large(bytes_per_rank, 1, static_cast<size_t>(size_))) {
    return fail(QUORUM_ERR_INVALID_ARG, "api",
                "allgather: {} bytes per rank x {} ranks is too large", bytes_per_rank, size_);
  }
  const void *own_block = static_cast<uint8_t *>(recv) + bytes_per_rank * rank_;
  if (send == QUORUM_IN_PLACE) send = own_block;
  if (send != own_block &&
      ranges_overlap(send, bytes_per_rank, recv, bytes_per_rank * static_cast<size_t>(size_))) {
    return fail(QUORUM_ERR_INVALID_ARG, "api",
                "allgather: the send buffer overlaps the receive buffer other than as this "
                "rank's block (in place: pass QUORUM_IN_PLACE)");
  }
  CollArgs a{CollKind::Allgather, send, recv, bytes_per_rank, QUORUM_FLOAT32, QUORUM_SUM, 0};
  return start(a, req, blocking);
}

Status Communicator::ireduce_scatter(const void *send, void *recv, size_t count_per_rank,
                                     quorum_dtype_t dtype, quorum_op_t op, RequestPtr *req,
                                     bool blocking) {
  QUORUM_CHECK(validate_reduction("reduce_scatter", send == QUORUM_IN_PLACE ? recv : send, recv,
                                  count_per_rank, dtype, op, static_cast<size_t>(size_)));
  if (send == QUORUM_IN_PLACE) {
    // In place: recv holds all P blocks on entry; this rank's block ends up at its start.
    send = recv;
  }
  CollArgs a{CollKind::ReduceScatter, send, recv, count_per_rank, dtype, op, 0};
  return start(a, req, blocking);
}

namespace {
template <typename F>
Status run_blocking(Communicator &c, F &&start) {
  RequestPtr req;
  QUORUM_CHECK(start(&req));
  return c.wait(req);
}
}  // namespace

Status Communicator::allreduce(const void *send, void *recv, size_t count, quorum_dtype_t dtype,
                               quorum_op_t op) {
  if (send == QUORUM_IN_PLACE) send = recv;
  QUORUM_CHECK(validate_reduction("allreduce", send, recv, count, dtype, op));
  CollArgs a{CollKind::Allreduce, send, recv, count, dtype, op, 0};
  Status status = kOk;
  if (run_shm_inline(a, &status)) return status;
  RequestPtr req;
  QUORUM_CHECK(start(a, &req, true));
  return wait(req);
}

ShmCallFacts Communicator::shm_call_facts() const {
  ShmCallFacts facts;
  facts.device_buffers = any_device_buffer;
  facts.signature_check = signature_check_;
  return facts;
}

bool Communicator::run_shm_inline(const CollArgs &a, Status *status) {
  // Every rank on this host, shm selected: the same decision on every rank
  // (the same inputs).
  // (The shm allreduce compares the ranks' calls in its flag line itself.)
  if (size_ <= 1 || finalized_ || !shm_usable(shm_.get(), a, shm_call_facts())) return false;
  const FastPathKnobs &k = fast_path_knobs();
  if (!k.shm) return false;
  const uint64_t seq = next_sequence();
  *status = shm_allreduce_inline(shm_.get(), transport_.get(), a, *engine_, k.timeout_ms, k.spin_ns,
                                 k.nap_us, seq, signature_check_ ? &scratch_ : nullptr);
  if (*status != kOk) note_failure(*status);
  return true;
}

const Communicator::FastPathKnobs &Communicator::fast_path_knobs() {
  const uint64_t generation = knob_generation();
  if (fast_.generation != generation) {
    fast_.shm = allreduce_uses_shm();
    fast_.timeout_ms = knob_timeout_ms.get();
    fast_.nap_us = std::max<int64_t>(1, knob_memory_nap_us.get());
    fast_.spin_ns = engine_->spin_ns();
    fast_.generation = generation;
  }
  return fast_;
}

Status Communicator::bcast(void *buf, size_t bytes, int root) {
  return run_blocking(*this, [&](RequestPtr *r) { return ibcast(buf, bytes, root, r, true); });
}

Status Communicator::barrier() {
  // Every rank on this host: one flag round trip through the shared-memory
  // segment (no rank finishes before every rank posted), as the allreduce's
  // fast path takes; it also leaves the ranks closer together than messages.
  // A broken channel: the message barrier (shm_usable).
  int32_t zero = 0, sum = 0;
  const CollArgs a{CollKind::Barrier, &zero, &sum, 1, QUORUM_INT32, QUORUM_SUM, 0};
  Status status = kOk;
  if (run_shm_inline(a, &status)) return status;
  return run_blocking(*this, [&](RequestPtr *r) { return ibarrier(r, true); });
}

Status Communicator::allgather(const void *send, void *recv, size_t bytes_per_rank) {
  return run_blocking(
      *this, [&](RequestPtr *r) { return iallgather(send, recv, bytes_per_rank, r, true); });
}

Status Communicator::reduce_scatter(const void *send, void *recv, size_t count_per_rank,
                                    quorum_dtype_t dtype, quorum_op_t op) {
  return run_blocking(*this, [&](RequestPtr *r) {
    return ireduce_scatter(send, recv, count_per_rank, dtype, op, r, true);
  });
}

}  // namespace quorum
