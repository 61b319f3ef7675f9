// ucx_messaging.cpp: tagged send/recv, cancel, progress and wakeup of the UCX
// transport, and what happens to pending operations when a peer fails.
//
// Completion paths: an operation that UCX finishes at once completes the
// caller's request before send()/recv() return; otherwise UCX calls back from
// ucp_worker_progress() (inside progress()). Callbacks that UCX makes outside
// progress() (ucp_request_cancel, forced endpoint close) are queued and
// delivered by the next progress(), as the Transport interface promises.
#include <algorithm>
#include <new>

#include "runtime/clock.hpp"
#include "runtime/log.hpp"
#include "transports/ucx/ucx_info.hpp"
#include "transports/ucx/ucx_op.hpp"
#include "transports/ucx/ucx_transport.hpp"

namespace quorum {

namespace {
constexpr ucp_tag_t kFullMask = ~ucp_tag_t{0};
// ucp_worker_progress is called until it finds nothing to do, but not forever
// (a peer streaming at full speed would keep it busy).
constexpr int kMaxProgressRounds = 256;

ucp_tag_t wire_tag(int source, uint64_t tag) {
  return (static_cast<ucp_tag_t>(source) << kTagBits) | tag;
}
}  // namespace

Status UcxTransport::check_peer(int peer, const char *op) const {
  if (worker_ == nullptr) {
    return fail(QUORUM_ERR_INVALID_ARG, "ucx", "{} on a transport that is not initialised", op);
  }
  if (peer < 0 || peer >= size_ || peer == rank_) {
    return fail(QUORUM_ERR_INVALID_ARG, "ucx", "rank {}: {} with invalid peer {} (size {})", rank_,
                op, peer, size_);
  }
  return kOk;
}

ucp_request_param_t UcxTransport::request_param() {
  ucp_request_param_t param{};
  param.op_attr_mask =
      UCP_OP_ATTR_FIELD_CALLBACK | UCP_OP_ATTR_FIELD_USER_DATA | UCP_OP_ATTR_FIELD_DATATYPE;
  param.user_data = this;
  param.datatype = ucp_dt_make_contig(1);
  if (!cuda_memory_) {
    // Saves UCX the pointer classification when only host memory is possible.
    param.op_attr_mask |= UCP_OP_ATTR_FIELD_MEMORY_TYPE;
    param.memory_type = UCS_MEMORY_TYPE_HOST;
  }
  return param;
}

Status UcxTransport::send(int peer, uint64_t tag, const void *buf, size_t bytes,
                          TransportRequest *req) {
  if (req == nullptr) return fail(QUORUM_ERR_INVALID_ARG, "ucx", "send without a request");
  req->reset();
  req->peer = peer;
  Status status = check_peer(peer, "send");
  if (status == kOk && tag > kTagMask) {
    status = fail(QUORUM_ERR_INVALID_ARG, "ucx", "rank {}: send tag {:#x} exceeds {} bits", rank_,
                  tag, kTagBits);
  }
  if (status == kOk && peers_[peer]->failed.load()) {
    status = fail(QUORUM_ERR_PEER_FAILED, "ucx", "rank {}: send of {} B to failed peer {}", rank_,
                  bytes, peer);
  }
  if (status != kOk) {
    req->complete(status);
    return status;
  }
  ucp_request_param_t param = request_param();
  param.cb.send = &UcxTransport::send_callback;
  ucs_status_ptr_t request =
      ucp_tag_send_nbx(peers_[peer]->ep, buf, bytes, wire_tag(rank_, tag), &param);
  if (request == nullptr) {
    req->complete(kOk, bytes);
    return kOk;
  }
  if (UCS_PTR_IS_ERR(request)) {
    ucs_status_t st = UCS_PTR_STATUS(request);
    status = fail(is_peer_loss(st) ? QUORUM_ERR_PEER_FAILED : QUORUM_ERR_TRANSPORT, "ucx",
                  "rank {}: send of {} B with tag {} to peer {} failed: {}", rank_, bytes, tag,
                  peer, ucs_status_string(st));
    req->complete(status);
    return status;
  }
  track(request, peer, false, tag, bytes, req);
  return kOk;
}

Status UcxTransport::recv(int peer, uint64_t tag, void *buf, size_t bytes, TransportRequest *req) {
  if (req == nullptr) return fail(QUORUM_ERR_INVALID_ARG, "ucx", "recv without a request");
  req->reset();
  req->peer = peer;
  Status status = check_peer(peer, "recv");
  if (status == kOk && tag > kTagMask) {
    status = fail(QUORUM_ERR_INVALID_ARG, "ucx", "rank {}: recv tag {:#x} exceeds {} bits", rank_,
                  tag, kTagBits);
  }
  ucp_tag_recv_info_t arrived{};
  if (status == kOk && peers_[peer]->failed.load() &&
      ucp_tag_probe_nb(worker_, wire_tag(peer, tag), kFullMask, 0, &arrived) == nullptr) {
    // What the peer sent before it died is still delivered; nothing more comes.
    status = fail(QUORUM_ERR_PEER_FAILED, "ucx", "rank {}: recv of {} B from failed peer {}", rank_,
                  bytes, peer);
  }
  if (status != kOk) {
    req->complete(status);
    return status;
  }
  // Every receive completes through recv_callback, which is what reports the
  // length of what arrived (UCX 1.13 leaves recv_info unfilled when a
  // receive completes at once). Probing for an arrived message first and
  // taking it with ucp_tag_msg_recv_nbx lost eager messages of several
  // fragments whose rest was still on its way.
  ucp_request_param_t param = request_param();
  param.cb.recv = &UcxTransport::recv_callback;
  param.op_attr_mask |= UCP_OP_ATTR_FLAG_NO_IMM_CMPL;
  posting_recv_ = PostingRecv{true};
  ucs_status_ptr_t request =
      ucp_tag_recv_nbx(worker_, buf, bytes, wire_tag(peer, tag), kFullMask, &param);
  const PostingRecv posted = posting_recv_;
  posting_recv_ = PostingRecv{};
  if (posted.done && !UCS_PTR_IS_ERR(request)) {
    // Called back already: the message had arrived.
    ucp_request_free(request);
    if (posted.status == UCS_OK) {
      req->complete(kOk, posted.length);
      return kOk;
    }
    request = UCS_STATUS_PTR(posted.status);
  }
  if (UCS_PTR_IS_ERR(request)) {
    ucs_status_t st = UCS_PTR_STATUS(request);
    if (st == UCS_ERR_MESSAGE_TRUNCATED) {
      status = fail(QUORUM_ERR_MISMATCH, "ucx",
                    "rank {}: message from peer {} with tag {} is longer than the {} B "
                    "receive buffer (truncated)",
                    rank_, peer, tag, bytes);
    } else {
      status = fail(QUORUM_ERR_TRANSPORT, "ucx",
                    "rank {}: recv of {} B with tag {} from peer {} failed: {}", rank_, bytes, tag,
                    peer, ucs_status_string(st));
    }
    req->complete(status);
    return status;
  }
  track(request, peer, true, tag, bytes, req);
  if (peers_[peer]->failed.load()) {
    // A message of a dead peer that cannot complete at once (a rendezvous,
    // or an eager one missing fragments) never will: fail it in the next
    // progress() like the operations pending when the peer died.
    peers_[peer]->failure_handled = false;
    failures_pending_ = true;
  }
  return kOk;
}

UcxTransport::Op *UcxTransport::track(void *ucp_request, int peer, bool is_recv, uint64_t tag,
                                      size_t bytes, TransportRequest *req) {
  // UCX calls back only from later progress, so the record is ready in time.
  Op *op =
      new (ucp_request) Op{this, req, nullptr, nullptr, peer, is_recv, false, false, 0, tag, bytes};
  Peer &p = *peers_[peer];
  op->next = p.ops;
  if (p.ops != nullptr) p.ops->prev = op;
  p.ops = op;
  req->impl = op;
  return op;
}

void UcxTransport::cancel(TransportRequest *req) {
  if (req == nullptr || !req->pending() || req->impl == nullptr || worker_ == nullptr) return;
  Op *op = static_cast<Op *>(req->impl);
  op->cancel_requested = true;
  // UCX withdraws a posted receive; a send cannot be withdrawn, so it
  // completes (Done) once UCX no longer needs the buffer, or, after the
  // grace, once expire_cancelled_sends() closed its endpoint. A receive that
  // already matched (a rendezvous whose data never comes: the sender's host
  // became unreachable) cannot be withdrawn either, and takes the same way.
  if (op->cancel_ns == 0) {
    op->cancel_ns = std::max<uint64_t>(1, now_ns());
    ++cancelled_sends_;
  }
  withdraw(op);
}

void UcxTransport::expire_cancelled_sends() {
  if (cancelled_sends_ == 0) return;
  const uint64_t now = now_ns();
  // At most half the timeout, so that whoever waits for the send to settle
  // (a request past its deadline, a partial object's release) sees it do so.
  const int64_t grace_ms = std::min(knob_ucx_cancel_grace_ms.get(), knob_timeout_ms.get() / 2);
  const uint64_t grace_ns = static_cast<uint64_t>(std::max<int64_t>(0, grace_ms)) * 1000000;
  for (const auto &peer : peers_) {
    if (peer->failed.load() || peer->ep == nullptr) continue;
    const Op *stuck = nullptr;
    for (const Op *op = peer->ops; op != nullptr && stuck == nullptr; op = op->next) {
      if (op->cancel_ns != 0 && now - op->cancel_ns > grace_ns) stuck = op;
    }
    if (stuck == nullptr) continue;
    const bool closable = peer->err_mode == UCP_ERR_HANDLING_MODE_PEER;
    mark_peer_failed(
        *peer, UCS_ERR_CANCELED,
        fmt::format("a cancelled {} of {} B with tag {:#x} was still pending after "
                    "{} ms (QUORUM_UCX_CANCEL_GRACE_MS): {}",
                    stuck->is_recv ? "receive" : "send", stuck->bytes, stuck->tag, grace_ms,
                    closable ? "closing the endpoint" : "giving up on the peer")
            .c_str());
    // UCX refuses to force-close an endpoint in error mode none (a watched
    // process of this host): its transfers stay with UCX until the worker is
    // destroyed, and handle_peer_failures() releases the callers' requests.
    if (!closable) continue;
    // Purges every send to the peer: their callbacks run (now or in a later
    // progress) with UCS_ERR_CANCELED, and UCX no longer reads their buffers;
    // a matched receive from it gets no more data once the endpoint is gone.
    // (In error mode peer, UCX 1.13 keeps rendezvous sends that never got an
    // answer until the worker is destroyed, and warns then; with their
    // endpoint gone nothing moves them on.) handle_peer_failures() fails the
    // callers' requests that are still attached.
    ucp_request_param_t param{};
    param.op_attr_mask = UCP_OP_ATTR_FIELD_FLAGS;
    param.flags = UCP_EP_CLOSE_FLAG_FORCE;
    ucs_status_ptr_t closing = ucp_ep_close_nbx(peer->ep, &param);
    peer->ep = nullptr;
    if (UCS_PTR_IS_PTR(closing)) closing_.push_back(closing);
  }
  free_finished(&closing_);  // requests of forced closes, once UCX completed them
}

void UcxTransport::free_finished(std::vector<void *> *requests) {
  requests->erase(std::remove_if(requests->begin(), requests->end(),
                                 [](void *request) {
                                   if (ucp_request_check_status(request) == UCS_INPROGRESS) {
                                     return false;
                                   }
                                   ucp_request_free(request);
                                   return true;
                                 }),
                  requests->end());
}

void UcxTransport::withdraw(Op *op) {
  if (!op->is_recv || op->cancel_sent) return;
  op->cancel_sent = true;
  // Removes a receive that is still unmatched (its callback runs, maybe right
  // here, and frees op); a matched one is left to finish.
  ucp_request_cancel(worker_, op);
}

void UcxTransport::send_callback(void *request, ucs_status_t status, void *user_data) {
  static_cast<UcxTransport *>(user_data)->on_op_done(static_cast<Op *>(request), status, 0);
}

void UcxTransport::recv_callback(void *request, ucs_status_t status,
                                 const ucp_tag_recv_info_t *info, void *user_data) {
  size_t length = info != nullptr ? info->length : 0;
  auto *self = static_cast<UcxTransport *>(user_data);
  if (self->posting_recv_.active) {
    // Within recv()'s own ucp_tag_recv_nbx: this is that receive.
    self->posting_recv_.done = true;
    self->posting_recv_.status = status;
    self->posting_recv_.length = length;
    return;
  }
  self->on_op_done(static_cast<Op *>(request), status, length);
}

void UcxTransport::on_op_done(Op *op, ucs_status_t st, size_t length) {
  Peer &peer = *peers_[op->peer];
  if (op->cancel_ns != 0) --cancelled_sends_;
  if (op->prev != nullptr) op->prev->next = op->next;
  if (op->next != nullptr) op->next->prev = op->prev;
  if (peer.ops == op) peer.ops = op->next;

  TransportRequest *req = op->req;
  if (req != nullptr) {
    Status status = kOk;
    size_t bytes = op->is_recv ? length : op->bytes;
    if (st == UCS_OK) {
      status = kOk;
    } else if (st == UCS_ERR_CANCELED && op->cancel_requested) {
      status = QUORUM_ERR_TRANSPORT;  // canceled by the caller: no error to report
    } else if (st == UCS_ERR_MESSAGE_TRUNCATED) {
      status = fail(QUORUM_ERR_MISMATCH, "ucx",
                    "rank {}: message of {} B from peer {} with tag {} is longer than the {} B "
                    "receive buffer (truncated)",
                    rank_, length, op->peer, op->tag, op->bytes);
    } else if (peer.failed.load() || is_peer_loss(st)) {
      // The error callback reports the cause once for the peer.
      status = QUORUM_ERR_PEER_FAILED;
    } else {
      status = fail(QUORUM_ERR_TRANSPORT, "ucx", "rank {}: {} of {} B with tag {} {} peer {}: {}",
                    rank_, op->is_recv ? "recv" : "send", op->bytes, op->tag,
                    op->is_recv ? "from" : "to", op->peer, ucs_status_string(st));
    }
    if (status != kOk) bytes = 0;
    req->impl = nullptr;
    complete(req, status, bytes);
  }
  ucp_request_free(op);  // Op is trivially destructible: nothing to run first
}

void UcxTransport::complete(TransportRequest *req, Status status, size_t bytes) {
  if (in_progress_) {
    req->complete(status, bytes);
    ++completions_;
  } else {
    deferred_.push_back(Deferred{req, status, bytes});
  }
}

void UcxTransport::error_callback(void *arg, ucp_ep_h /*ep*/, ucs_status_t status) {
  Peer &peer = *static_cast<Peer *>(arg);
  peer.owner->mark_peer_failed(peer, status, ucs_status_string(status));
}

void UcxTransport::mark_peer_failed(Peer &peer, ucs_status_t status, const char *cause) {
  if (peer.failed.load()) return;
  peer.cause = status;
  peer.failed.store(true, std::memory_order_release);
  int none = -1;
  first_failed_.compare_exchange_strong(none, peer.rank, std::memory_order_release);
  failures_pending_ = true;
  if (shutting_down_) {
    QLOG_DEBUG("ucx", "rank {}: peer {} disconnected during shutdown: {}", rank_, peer.rank, cause);
  } else {
    fail(QUORUM_ERR_PEER_FAILED, "ucx", "rank {}: lost peer rank {}: {}", rank_, peer.rank, cause);
  }
}

void UcxTransport::check_local_peers() {
  uint64_t now = now_ns();
  if (now < next_liveness_check_ns_) return;
  next_liveness_check_ns_ = now + static_cast<uint64_t>(knob_ucx_keepalive_ms.get()) * 1000000;
  for (const auto &peer : peers_) {
    // Idle peers too: ranks that wait on flags in shared memory (the shm
    // allreduce, its barrier) have no operation in flight, and UCX's
    // keepalive misses a dead peer there; this check is what they rely on.
    if (!peer->watched || peer->failed.load()) continue;
    if (process_liveness(peer->process) == Liveness::Gone) {
      mark_peer_failed(*peer, UCS_ERR_ENDPOINT_TIMEOUT,
                       fmt::format("process {} has exited", peer->process.pid).c_str());
    }
  }
}

void UcxTransport::handle_peer_failures() {
  if (!failures_pending_) return;
  failures_pending_ = false;
  for (const auto &peer : peers_) {
    if (!peer->failed.load() || peer->failure_handled) continue;
    peer->failure_handled = true;
    std::vector<Op *> ops;
    for (Op *op = peer->ops; op != nullptr; op = op->next) ops.push_back(op);
    for (Op *op : ops) {
      if (op->req != nullptr) {
        TransportRequest *req = op->req;
        op->req = nullptr;
        req->impl = nullptr;
        complete(req, QUORUM_ERR_PEER_FAILED, 0);
      }
      // Receives are not tied to the endpoint, so UCX would keep them posted;
      // sends are purged by UCX with the endpoint.
      withdraw(op);
    }
  }
}

bool UcxTransport::drive_worker() {
  bool any = false;
  for (int round = 0; round < kMaxProgressRounds; ++round) {
    if (ucp_worker_progress(worker_) == 0) break;
    any = true;
  }
  return any;
}

bool UcxTransport::progress() {
  if (worker_ == nullptr) return false;
  uint64_t before = completions_;
  in_progress_ = true;
  for (const Deferred &d : deferred_) {
    d.req->complete(d.status, d.bytes);
    ++completions_;
  }
  deferred_.clear();
  drive_worker();
  if (answers_pending_) send_probe_answers();
  check_local_peers();
  expire_cancelled_sends();
  handle_peer_failures();
  in_progress_ = false;
  return completions_ != before;
}

bool UcxTransport::arm() {
  if (worker_ == nullptr || !deferred_.empty() || failures_pending_) return false;
  ucs_status_t st = ucp_worker_arm(worker_);
  if (st == UCS_OK) return true;
  if (st != UCS_ERR_BUSY) {
    QLOG_WARN("ucx", "rank {}: ucp_worker_arm failed: {}", rank_, ucs_status_string(st));
  }
  return false;
}

}  // namespace quorum
