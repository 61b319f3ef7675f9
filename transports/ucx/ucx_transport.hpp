// ucx_transport.hpp: the UCX transport (UCP tag matching over whatever UCX
// selects: shared memory, TCP, RDMA; CUDA memory when UCX was built with it).
//
// One ucp_context and one ucp_worker per instance, one endpoint per peer,
// each with its own error handling mode. On a PEER endpoint UCX reports a dead
// peer (QUORUM_ERR_PEER_FAILED), but only uses transports that can: the
// shared-memory ones (posix, sysv) only when asked (MM_ERROR_HANDLING, which
// init sets), and never cma. By default (QUORUM_UCX_ERROR_MODE=auto) the
// endpoints to the processes of this host that both sides watch through /proc
// are NONE, so UCX keeps cma and shared memory for them, and every other
// endpoint (peers on other hosts) is PEER. Both sides of an endpoint must
// choose the same mode (UCX 1.13 fails a pair whose modes differ), so the
// choice is made from what both ranks published at init.
// The UCX tag carries the source rank above the user's 44-bit tag, and every
// receive uses a full mask, so it matches exactly one peer and one tag.
// In-flight operations live in UCX's own request memory (request_size), linked
// into a per-peer list so that a peer failure can fail them all.
//
// Completion details: when send()/recv() return an error, the request is
// also completed (Failed, same status). A canceled receive completes Failed
// with QUORUM_ERR_TRANSPORT (Done if it raced); a send cannot be withdrawn
// from UCX, so cancel() lets it finish. A dead peer is noticed by UCX
// (keepalive, closed sockets) or, for processes of this host, by a /proc check
// every QUORUM_UCX_KEEPALIVE_MS; both need progress() to be called, so a
// caller that sleeps on event_fd() should wake at least that often.
#pragma once

#include <ucp/api/ucp.h>

#include <atomic>
#include <memory>
#include <string>
#include <vector>

#include "runtime/clock.hpp"
#include "runtime/knobs.hpp"
#include "transports/transport.hpp"
#include "transports/ucx/process_liveness.hpp"

namespace quorum {

class UcxTransport : public Transport {
 public:
  UcxTransport() = default;
  ~UcxTransport() override;
  UcxTransport(const UcxTransport &) = delete;
  UcxTransport &operator=(const UcxTransport &) = delete;

  const char *name() const override { return "ucx"; }
  std::string description() const override;

  Status init(Bootstrap &bootstrap) override;
  Status shutdown(Bootstrap &bootstrap) override;

  Status send(int peer, uint64_t tag, const void *buf, size_t bytes,
              TransportRequest *req) override;
  Status recv(int peer, uint64_t tag, void *buf, size_t bytes, TransportRequest *req) override;
  void cancel(TransportRequest *req) override;

  bool progress() override;
  int event_fd() override { return event_fd_; }
  bool arm() override;

  bool peer_failed(int peer) const override;
  int failed_peer() const override { return first_failed_.load(std::memory_order_acquire); }
  void probe_peers() override;
  std::vector<int> silent_peers(uint64_t since_ns) const override;
  bool supports_memory(MemoryType type) const override;

  // An operation in flight (ucx_op.hpp), stored in UCX request memory.
  struct Op;

 private:
  struct Peer {
    UcxTransport *owner = nullptr;
    int rank = -1;
    ucp_ep_h ep = nullptr;
    std::atomic<bool> failed{false};
    bool failure_handled = false;
    ucs_status_t cause = UCS_OK;
    Op *ops = nullptr;     // head of the intrusive list of pending operations
    bool local = false;    // a process of this kernel boot and PID namespace
    bool watched = false;  // a local process whose liveness we check
    ProcessIdentity process{};
    ucp_err_handling_mode_t err_mode = UCP_ERR_HANDLING_MODE_PEER;  // of ep
    uint64_t heard_ns = 0;          // when its last probe message came (ucx_probe.cpp)
    bool answer_due = false;        // it asked: answer from the next progress()
    uint32_t probe_out[2][2] = {};  // what we send it (kept until UCX is done)
  };
  // A completion that happened outside progress() (cancel, forced close); it
  // is delivered by the next progress() so that callers see it there.
  struct Deferred {
    TransportRequest *req;
    Status status;
    size_t bytes;
  };

  void tune_for_failure_detection(ucp_config_t *config);
  // Rendezvous from kRndvThreshold bytes on, unless UCX_RNDV_THRESH is set (see the .cpp).
  static constexpr const char *kRndvThreshold = "8249";
  void avoid_multi_fragment_eager(ucp_config_t *config);
  Status create_context();
  Status create_worker();
  Status connect_peers(Bootstrap &bootstrap);
  Status exchange_process_identities(Bootstrap &bootstrap);
  // What a rank publishes with its worker address (see the .cpp), and the
  // error handling mode of the endpoint to `peer` given what it published.
  struct AddressHeader;
  ucp_err_handling_mode_t endpoint_error_mode(const Peer &peer, const AddressHeader &theirs) const;
  void log_selected_transports();
  Status check_peer(int peer, const char *op) const;

  // A tagged send/recv's parameters (contiguous bytes, this as user data, the
  // callback flag set: the caller fills cb.send or cb.recv).
  ucp_request_param_t request_param();
  static void send_callback(void *request, ucs_status_t status, void *user_data);
  static void recv_callback(void *request, ucs_status_t status, const ucp_tag_recv_info_t *info,
                            void *user_data);
  static void error_callback(void *arg, ucp_ep_h ep, ucs_status_t status);
  void mark_peer_failed(Peer &peer, ucs_status_t status, const char *cause);
  // Checks (at most every keepalive interval) that the local peers still run,
  // whether or not an operation to them is in flight; see process_liveness.hpp
  // for why. Every wait of the runtime learns of a dead peer this way
  // (peer_failed), through the progress passes it makes.
  void check_local_peers();
  // The liveness probe (ucx_probe.cpp): an active message handler that notes
  // who spoke and queues answers, which progress() sends.
  Status register_probe_handler();
  static ucs_status_t probe_callback(void *arg, const void *header, size_t header_length,
                                     void *data, size_t length, const ucp_am_recv_param_t *param);
  void send_probe(Peer &peer, uint32_t kind);
  void send_probe_answers();

  Op *track(void *ucp_request, int peer, bool is_recv, uint64_t tag, size_t bytes,
            TransportRequest *req);
  void on_op_done(Op *op, ucs_status_t status, size_t length);
  // Asks UCX to drop a pending receive (no-op for sends and repeated calls).
  void withdraw(Op *op);
  // A send UCX cannot withdraw (a rendezvous the peer never matches), or a
  // receive that matched a rendezvous whose data never comes, would hold its
  // caller past any timeout: once one was cancelled longer than the
  // grace ago, its peer is declared failed and its endpoint closed by force,
  // which releases every send to it.
  void expire_cancelled_sends();
  // Frees and removes the UCX requests (endpoint closes) that completed.
  static void free_finished(std::vector<void *> *requests);
  void complete(TransportRequest *req, Status status, size_t bytes);
  // Runs ucp_worker_progress until idle (bounded); true if UCX did anything.
  bool drive_worker();
  void handle_peer_failures();
  // Detaches every pending operation from its caller's request and fails it.
  void abandon_ops(Status status, const char *why);
  void close_endpoints(Deadline deadline, bool force);
  void destroy();

  ucp_context_h context_ = nullptr;
  ucp_worker_h worker_ = nullptr;
  int event_fd_ = -1;
  bool cuda_memory_ = false;
  bool all_peers_watched_ = false;    // every peer is a local process we can watch
  bool watches_local_peers_ = false;  // every local peer is watched (published at init)
  bool shutting_down_ = false;
  bool in_progress_ = false;
  bool failures_pending_ = false;
  bool answers_pending_ = false;  // some peer's probe waits for an answer
  bool probe_enabled_ = false;    // some peer is on another host (ucx_probe.cpp)
  int cancelled_sends_ = 0;       // cancelled operations still pending (checked by progress)
  // A receive being posted (recv()): UCX may call it back before
  // ucp_tag_recv_nbx returns, before its Op exists; the callback leaves its
  // outcome here instead.
  struct PostingRecv {
    bool active = false, done = false;
    ucs_status_t status = UCS_OK;
    size_t length = 0;
  } posting_recv_;
  uint64_t completions_ = 0;
  uint64_t next_liveness_check_ns_ = 0;
  std::atomic<int> first_failed_{-1};  // failed_peer()
  std::vector<std::unique_ptr<Peer>> peers_;
  std::vector<Deferred> deferred_;
  std::vector<void *> closing_;  // requests of endpoints closed by force while running
  std::string selected_;         // e.g. "posix, tcp; memory, lo"
};

std::unique_ptr<Transport> make_ucx_transport();

// QUORUM_UCX_ERROR_MODE: "peer" (UCX reports dead peers on every endpoint),
// "none" (UCX reports nothing, every UCX transport allowed) or "auto" (none
// to the watched processes of this host, peer to everyone else).
extern Knob<std::string> knob_ucx_error_mode;
// QUORUM_UCX_CANCEL_GRACE_MS: how long a cancelled send may stay pending.
extern Knob<int64_t> knob_ucx_cancel_grace_ms;
// QUORUM_UCX_KEEPALIVE_MS: UCX keepalive interval in peer mode.
extern Knob<int64_t> knob_ucx_keepalive_ms;

}  // namespace quorum
