// ucx_transport.cpp: the UCX transport's life cycle: context and worker
// creation, address exchange and endpoint creation (init), and the graceful
// or forced teardown (shutdown, destructor). Messaging is in ucx_messaging.cpp.
#include "transports/ucx/ucx_transport.hpp"

#include <poll.h>

#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <initializer_list>
#include <string>
#include <utility>

#include "runtime/knobs.hpp"
#include "runtime/log.hpp"
#include "transports/ucx/ucx_info.hpp"
#include "transports/ucx/ucx_op.hpp"

namespace quorum {

Knob<std::string> knob_ucx_error_mode(
    "QUORUM_UCX_ERROR_MODE", "auto",
    "UCX error handling, chosen per endpoint: peer (UCX reports a dead or unreachable peer; but "
    "UCX then avoids cma, so large messages between processes of one host are much slower), "
    "none (UCX reports nothing), or auto (none to each process of this host, whose death quorum "
    "notices itself through /proc, so those keep cma and shared memory; peer to the peers on "
    "other hosts, or to all when some local process cannot be watched). In every mode a dead "
    "local peer fails pending operations with QUORUM_ERR_PEER_FAILED",
    {"auto", "peer", "none"});
Knob<int64_t> knob_ucx_keepalive_ms(
    "QUORUM_UCX_KEEPALIVE_MS", 1000,
    "In UCX error mode peer: how often UCX checks that peers are alive (sets "
    "UCX_KEEPALIVE_INTERVAL unless that is set); a dead peer on shared memory is noticed within "
    "about twice this");

Knob<int64_t> knob_ucx_cancel_grace_ms(
    "QUORUM_UCX_CANCEL_GRACE_MS", 1000,
    "How long a send of an aborted operation (timed out, or failed elsewhere) may stay pending "
    "before its peer is declared failed and the endpoint to it closed: a rendezvous send that the "
    "peer never matches cannot be withdrawn otherwise, and would hold the call past its timeout. "
    "At most half of QUORUM_TIMEOUT_MS");

namespace {
// False when UCX_TLS names a list of transports without posix or sysv.
bool tls_may_include_shared_memory() {
  const char *tls = std::getenv("UCX_TLS");
  if (tls == nullptr || tls[0] == '^') return true;
  std::string list = std::string(",") + tls + ",";
  for (const char *name : {"all", "sm", "shm", "mm", "posix", "sysv"}) {
    if (list.find(std::string(",") + name + ",") != std::string::npos) return true;
  }
  return false;
}

// How QUORUM_UCX_ERROR_MODE is set (the knob admits only these three).
enum class ErrorModeSetting : uint32_t { Auto, Peer, None };
ErrorModeSetting error_mode_setting() {
  const std::string &mode = knob_ucx_error_mode.get();
  if (mode == "peer") return ErrorModeSetting::Peer;
  if (mode == "none") return ErrorModeSetting::None;
  return ErrorModeSetting::Auto;
}

// The mode one end wants for an endpoint: in auto, none only to a local
// process while this end watches every local process it has.
bool wants_no_error_handling(ErrorModeSetting setting, bool watches_local_peers, bool local) {
  switch (setting) {
    case ErrorModeSetting::Peer:
      return false;
    case ErrorModeSetting::None:
      return true;
    case ErrorModeSetting::Auto:
      break;
  }
  return local && watches_local_peers;
}

// A setting as a peer published it; anything unknown counts as peer.
ErrorModeSetting published_setting(uint32_t value) {
  return value <= static_cast<uint32_t>(ErrorModeSetting::None)
             ? static_cast<ErrorModeSetting>(value)
             : ErrorModeSetting::Peer;
}

// Worker addresses are a few hundred bytes; anything far larger means the
// bootstrap delivered garbage.
constexpr uint64_t kMaxAddressBytes = 1 << 20;
// Ranks live above the 44 tag bits of a 64-bit UCX tag.
constexpr int kMaxRanks = 1 << (64 - kTagBits);
}  // namespace

// What every rank publishes before the endpoints are made: its worker
// address's length, its error mode setting and whether it watches every
// local peer (see endpoint_error_mode).
struct UcxTransport::AddressHeader {
  uint64_t length;
  uint32_t error_mode;  // an ErrorModeSetting
  uint32_t watches_local_peers;
};

std::unique_ptr<Transport> make_ucx_transport() {
  return std::make_unique<UcxTransport>();
}

UcxTransport::~UcxTransport() {
  if (worker_ != nullptr) {
    // Not shut down: no barrier (peers may be gone), just release everything.
    shutting_down_ = true;
    abandon_ops(QUORUM_ERR_TRANSPORT, "transport destroyed");
    close_endpoints(Deadline::after_ms(std::min<int64_t>(knob_timeout_ms.get(), 1000)), true);
  }
  destroy();
}

std::string UcxTransport::description() const {
  std::string text = "ucx " + ucx_version();
  if (!selected_.empty()) text += " (" + selected_ + ")";
  return text;
}

bool UcxTransport::supports_memory(MemoryType type) const {
  return type == MemoryType::Host || (type == MemoryType::Cuda && cuda_memory_);
}

bool UcxTransport::peer_failed(int peer) const {
  if (peer < 0 || peer >= static_cast<int>(peers_.size())) return false;
  return peers_[peer]->failed.load(std::memory_order_acquire);
}

Status UcxTransport::init(Bootstrap &bootstrap) {
  if (context_ != nullptr) return fail(QUORUM_ERR_INVALID_ARG, "ucx", "init called twice");
  rank_ = bootstrap.rank();
  size_ = bootstrap.size();
  if (size_ < 1 || size_ > kMaxRanks || rank_ < 0 || rank_ >= size_) {
    return fail(QUORUM_ERR_INVALID_ARG, "ucx", "rank {} of {}: need 0 <= rank < size <= {}", rank_,
                size_, kMaxRanks);
  }
  // Identities first: whether a peer lives on another host decides the
  // context's features (the liveness probe is for those).
  Status status = exchange_process_identities(bootstrap);
  if (status == kOk) status = create_context();
  if (status == kOk) status = create_worker();
  if (status == kOk) status = connect_peers(bootstrap);
  if (status == kOk) {
    log_selected_transports();
    status = bootstrap.barrier();
  }
  if (status != kOk) {
    shutting_down_ = true;
    close_endpoints(Deadline::after_ms(std::min<int64_t>(knob_timeout_ms.get(), 1000)), true);
    destroy();
  }
  return status;
}

// In PEER mode UCX 1.13 only keeps transports that report peer failures.
// Its shared-memory transports can (by a keepalive that checks the peer
// process), but only when asked; without them ranks of one host would talk
// over TCP. Settings the user made in the environment win.
void UcxTransport::tune_for_failure_detection(ucp_config_t *config) {
  auto user_set = [](std::initializer_list<const char *> names) {
    for (const char *name : names) {
      if (std::getenv(name) != nullptr) return true;
    }
    return false;
  };
  // MM_ERROR_HANDLING reaches both posix and sysv (their common "MM_" table);
  // UCX warns about it when UCX_TLS leaves neither in.
  std::pair<const char *, std::string> settings[2];
  int count = 0;
  if (!user_set({"UCX_MM_ERROR_HANDLING", "UCX_POSIX_ERROR_HANDLING", "UCX_SYSV_ERROR_HANDLING"}) &&
      tls_may_include_shared_memory()) {
    settings[count++] = {"MM_ERROR_HANDLING", "y"};
  }
  if (!user_set({"UCX_KEEPALIVE_INTERVAL"})) {
    settings[count++] = {"KEEPALIVE_INTERVAL", std::to_string(knob_ucx_keepalive_ms.get()) + "ms"};
  }
  for (int i = 0; i < count; ++i) {
    ucs_status_t st = ucp_config_modify(config, settings[i].first, settings[i].second.c_str());
    if (st != UCS_OK) {
      QLOG_DEBUG("ucx", "rank {}: UCX setting {}={} not applied: {}", rank_, settings[i].first,
                 settings[i].second, ucs_status_string(st));
    }
  }
}

// UCX 1.13 sends a tagged message that does not fit one shared-memory
// segment (8256 B: up to 8248 B of data after the tag header) but is below
// its automatic rendezvous threshold (about 8256 B there) as several eager
// fragments, and over posix/sysv such a message can stay undelivered for
// good: messages of 8249..8255 B hung deterministically (a ring
// reduce-scatter of 2063 float32 per rank; an allreduce of 8196 B with the
// 56 B signature header). Rendezvous from 8249 B on never fragments eagerly
// and leaves every smaller message as it was. A user's UCX_RNDV_THRESH wins.
void UcxTransport::avoid_multi_fragment_eager(ucp_config_t *config) {
  if (std::getenv("UCX_RNDV_THRESH") != nullptr) return;
  ucs_status_t st = ucp_config_modify(config, "RNDV_THRESH", kRndvThreshold);
  if (st != UCS_OK) {
    QLOG_WARN("ucx", "rank {}: UCX setting RNDV_THRESH={} not applied: {}", rank_, kRndvThreshold,
              ucs_status_string(st));
  }
}

Status UcxTransport::create_context() {
  ucp_config_t *config = nullptr;
  ucs_status_t st = ucp_config_read(nullptr, nullptr, &config);
  if (st != UCS_OK) {
    return fail(QUORUM_ERR_TRANSPORT, "ucx", "rank {}: reading the UCX configuration failed: {}",
                rank_, ucs_status_string(st));
  }
  if (error_mode_setting() != ErrorModeSetting::None) tune_for_failure_detection(config);
  avoid_multi_fragment_eager(config);
  ucp_params_t params{};
  params.field_mask = UCP_PARAM_FIELD_FEATURES | UCP_PARAM_FIELD_REQUEST_SIZE |
                      UCP_PARAM_FIELD_ESTIMATED_NUM_EPS | UCP_PARAM_FIELD_MT_WORKERS_SHARED;
  params.features = UCP_FEATURE_TAG | UCP_FEATURE_WAKEUP;
  // Active messages carry the liveness probe, which only peers of other hosts
  // need (those of this host are watched through /proc): one-host jobs keep
  // UCX's leaner tag-only setup.
  probe_enabled_ = !all_peers_watched_;
  if (probe_enabled_) params.features |= UCP_FEATURE_AM;
  params.request_size = sizeof(Op);
  params.estimated_num_eps = static_cast<size_t>(size_);
  params.mt_workers_shared = 0;
  st = ucp_init(&params, config, &context_);
  ucp_config_release(config);
  if (st != UCS_OK) {
    context_ = nullptr;
    return fail(QUORUM_ERR_TRANSPORT, "ucx", "rank {}: ucp_init failed: {}", rank_,
                ucs_status_string(st));
  }
  ucp_context_attr_t attr{};
  attr.field_mask = UCP_ATTR_FIELD_MEMORY_TYPES;
  if (ucp_context_query(context_, &attr) == UCS_OK) {
    cuda_memory_ = (attr.memory_types & UCS_BIT(UCS_MEMORY_TYPE_CUDA)) != 0;
  }
  return kOk;
}

Status UcxTransport::create_worker() {
  ucp_worker_params_t params{};
  params.field_mask = UCP_WORKER_PARAM_FIELD_THREAD_MODE;
  // The engine serialises every call; only event_fd() is polled elsewhere.
  params.thread_mode = UCS_THREAD_MODE_SINGLE;
  ucs_status_t st = ucp_worker_create(context_, &params, &worker_);
  if (st != UCS_OK) {
    worker_ = nullptr;
    return fail(QUORUM_ERR_TRANSPORT, "ucx", "rank {}: ucp_worker_create failed: {}", rank_,
                ucs_status_string(st));
  }
  st = ucp_worker_get_efd(worker_, &event_fd_);
  if (st != UCS_OK) {
    event_fd_ = -1;
    return fail(QUORUM_ERR_TRANSPORT, "ucx", "rank {}: ucp_worker_get_efd failed: {}", rank_,
                ucs_status_string(st));
  }
  return probe_enabled_ ? register_probe_handler() : kOk;
}

Status UcxTransport::connect_peers(Bootstrap &bootstrap) {
  ucp_worker_attr_t attr{};
  attr.field_mask = UCP_WORKER_ATTR_FIELD_ADDRESS;
  ucs_status_t st = ucp_worker_query(worker_, &attr);
  if (st != UCS_OK) {
    return fail(QUORUM_ERR_TRANSPORT, "ucx", "rank {}: querying the worker address failed: {}",
                rank_, ucs_status_string(st));
  }
  // Lengths first, then every address padded to the longest one, since the
  // bootstrap's allgather needs the same size on every rank.
  AddressHeader mine{attr.address_length, static_cast<uint32_t>(error_mode_setting()),
                     watches_local_peers_ ? 1u : 0u};
  std::vector<AddressHeader> headers(static_cast<size_t>(size_));
  Status status = bootstrap.allgather(&mine, headers.data(), sizeof(AddressHeader));
  uint64_t stride = 0;
  for (int p = 0; p < size_ && status == kOk; ++p) {
    if (headers[p].length == 0 || headers[p].length > kMaxAddressBytes) {
      status = fail(QUORUM_ERR_BOOTSTRAP, "ucx", "rank {}: peer {} sent a {} B worker address",
                    rank_, p, headers[p].length);
    }
    stride = std::max(stride, headers[p].length);
  }
  std::vector<uint8_t> addresses;
  if (status == kOk) {
    std::vector<uint8_t> padded(stride, 0);
    std::memcpy(padded.data(), attr.address, attr.address_length);
    addresses.resize(stride * static_cast<size_t>(size_));
    status = bootstrap.allgather(padded.data(), addresses.data(), stride);
  }
  ucp_worker_release_address(worker_, attr.address);
  if (status != kOk) return status;

  for (int p = 0; p < size_; ++p) {
    if (p == rank_) continue;
    peers_[p]->err_mode = endpoint_error_mode(*peers_[p], headers[p]);
    ucp_ep_params_t params{};
    params.field_mask = UCP_EP_PARAM_FIELD_REMOTE_ADDRESS | UCP_EP_PARAM_FIELD_ERR_HANDLING_MODE |
                        UCP_EP_PARAM_FIELD_ERR_HANDLER;
    params.address = reinterpret_cast<const ucp_address_t *>(addresses.data() + stride * p);
    params.err_mode = peers_[p]->err_mode;
    params.err_handler.cb = &UcxTransport::error_callback;
    params.err_handler.arg = peers_[p].get();
    st = ucp_ep_create(worker_, &params, &peers_[p]->ep);
    if (st != UCS_OK) {
      peers_[p]->ep = nullptr;
      return fail(QUORUM_ERR_TRANSPORT, "ucx",
                  "rank {}: creating the endpoint to peer {} failed: {}", rank_, p,
                  ucs_status_string(st));
    }
  }
  return kOk;
}

// The two ends of an endpoint must choose the same mode (UCX 1.13 fails a
// pair whose modes differ), so the choice is made from what both published:
// NONE only when both ends want it, PEER otherwise (PEER works everywhere,
// only slower between local processes). In auto, "local" (same kernel boot
// and PID namespace) is symmetric, but what a rank can watch depends on what
// it can read in /proc, which only it knows, hence the published flag; a
// differing setting of the knob on some rank also ends in PEER.
ucp_err_handling_mode_t UcxTransport::endpoint_error_mode(const Peer &peer,
                                                          const AddressHeader &theirs) const {
  const bool mine_none =
      wants_no_error_handling(error_mode_setting(), watches_local_peers_, peer.local);
  const bool theirs_none = wants_no_error_handling(published_setting(theirs.error_mode),
                                                   theirs.watches_local_peers != 0, peer.local);
  return mine_none && theirs_none ? UCP_ERR_HANDLING_MODE_NONE : UCP_ERR_HANDLING_MODE_PEER;
}

Status UcxTransport::exchange_process_identities(Bootstrap &bootstrap) {
  ProcessIdentity me = ProcessIdentity::self();
  std::vector<ProcessIdentity> all(static_cast<size_t>(size_));
  QUORUM_CHECK(bootstrap.allgather(&me, all.data(), sizeof(ProcessIdentity)));
  int watched = 0;
  int local = 0;
  peers_.clear();
  for (int p = 0; p < size_; ++p) {
    peers_.push_back(std::make_unique<Peer>());
    peers_.back()->owner = this;
    peers_.back()->rank = p;
  }
  for (int p = 0; p < size_; ++p) {
    Peer &peer = *peers_[p];
    peer.process = all[p];
    peer.process.boot_id[sizeof(peer.process.boot_id) - 1] = '\0';
    peer.local = p != rank_ && me.can_watch(peer.process);
    // Only what can be seen alive now can later be declared dead.
    peer.watched = peer.local && process_liveness(peer.process) == Liveness::Alive;
    local += peer.local ? 1 : 0;
    watched += peer.watched ? 1 : 0;
  }
  all_peers_watched_ = watched == size_ - 1;
  watches_local_peers_ = watched == local;
  QLOG_DEBUG("ucx", "rank {}: watching {} of {} local peer processes", rank_, watched, local);
  return kOk;
}

void UcxTransport::log_selected_transports() {
  EndpointLanes all;
  std::string first_text;
  for (const auto &peer : peers_) {
    if (peer->ep == nullptr) continue;
    EndpointLanes lanes = endpoint_lanes(peer->ep, first_text.empty() ? &first_text : nullptr);
    all.transports.insert(lanes.transports.begin(), lanes.transports.end());
    all.devices.insert(lanes.devices.begin(), lanes.devices.end());
  }
  selected_ = describe_lanes(all);
  int unchecked = 0;  // endpoints in error mode none
  for (const auto &peer : peers_) {
    if (peer->rank != rank_ && peer->err_mode == UCP_ERR_HANDLING_MODE_NONE) ++unchecked;
  }
  QLOG_INFO("ucx",
            "rank {} of {}: UCX {}, connected to {} peers over {} (error mode none to {}, peer "
            "to {})",
            rank_, size_, ucx_version(), size_ - 1, selected_.empty() ? "(no peers)" : selected_,
            unchecked, size_ - 1 - unchecked);
  if (!first_text.empty()) QLOG_DEBUG("ucx", "rank {}: first endpoint:\n{}", rank_, first_text);
}

Status UcxTransport::shutdown(Bootstrap &bootstrap) {
  if (worker_ == nullptr) return kOk;
  // Once every rank passed the barrier nobody sends to us any more. A peer
  // that died (or is found dead while we wait) ends the wait at once.
  bootstrap.set_peer_watch([this] {
    progress();
    for (int q = 0; q < size_; ++q) {
      if (q != rank_ && peer_failed(q)) return q;
    }
    return -1;
  });
  Status status = bootstrap.barrier();
  bootstrap.set_peer_watch(nullptr);
  shutting_down_ = true;
  abandon_ops(QUORUM_ERR_TRANSPORT, "transport shut down");
  close_endpoints(Deadline::after_ms(knob_timeout_ms.get()), status != kOk);
  destroy();
  return status;
}

void UcxTransport::abandon_ops(Status status, const char *why) {
  std::vector<Op *> ops;
  for (const auto &peer : peers_) {
    for (Op *op = peer->ops; op != nullptr; op = op->next) ops.push_back(op);
  }
  if (!ops.empty()) {
    QLOG_DEBUG("ucx", "rank {}: {} operations still pending: {}", rank_, ops.size(), why);
  }
  for (Op *op : ops) {
    if (op->req != nullptr) {
      TransportRequest *req = op->req;
      op->req = nullptr;
      req->impl = nullptr;
      req->complete(status);
    }
    // A recv would wait forever; its callback (maybe right now) frees it. A
    // send finishes or is purged when its endpoint closes.
    withdraw(op);
  }
}

void UcxTransport::close_endpoints(Deadline deadline, bool force) {
  if (worker_ == nullptr) return;
  std::vector<void *> closing = std::move(closing_);
  closing_.clear();
  for (const auto &peer : peers_) {
    if (peer->ep == nullptr) continue;
    ucp_request_param_t param{};
    param.op_attr_mask = UCP_OP_ATTR_FIELD_FLAGS;
    // A failed endpoint can only be closed by force (UCX's rule); a flush on
    // a live one delivers what we still have queued for it.
    bool forced = force || peer->failed.load();
    if (forced && peer->err_mode != UCP_ERR_HANDLING_MODE_PEER) {
      // UCX refuses to force-close an endpoint in error mode none: it is
      // left to ucp_worker_destroy, which purges what it still holds.
      peer->ep = nullptr;
      continue;
    }
    param.flags = forced ? UCP_EP_CLOSE_FLAG_FORCE : 0;
    ucs_status_ptr_t request = ucp_ep_close_nbx(peer->ep, &param);
    peer->ep = nullptr;
    if (UCS_PTR_IS_PTR(request)) {
      closing.push_back(request);
    } else if (UCS_PTR_IS_ERR(request)) {
      QLOG_DEBUG("ucx", "rank {}: closing the endpoint to peer {}: {}", rank_, peer->rank,
                 ucs_status_string(UCS_PTR_STATUS(request)));
    }
  }
  while (!closing.empty()) {
    in_progress_ = true;
    drive_worker();
    in_progress_ = false;
    free_finished(&closing);
    if (closing.empty()) break;
    if (deadline.expired()) {
      QLOG_WARN("ucx", "rank {}: {} endpoints still closing at the deadline; releasing anyway",
                rank_, closing.size());
      break;
    }
    if (ucp_worker_arm(worker_) == UCS_OK) {
      pollfd fd{event_fd_, POLLIN, 0};
      poll(&fd, 1, deadline.remaining_ms(100));
    }
  }
}

void UcxTransport::destroy() {
  if (worker_ != nullptr) {
    ucp_worker_destroy(worker_);
    worker_ = nullptr;
    event_fd_ = -1;
  }
  if (context_ != nullptr) {
    ucp_cleanup(context_);
    context_ = nullptr;
  }
  // Whatever completed outside progress() is delivered now: nobody will call
  // progress() on a closed transport.
  for (const Deferred &d : deferred_) d.req->complete(d.status, d.bytes);
  deferred_.clear();
}

}  // namespace quorum
