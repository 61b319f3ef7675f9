// ucx_probe.cpp: the liveness probe of the UCX transport. A call that timed
// out asks every peer for a sign of life (a small active message); a peer
// answers from its next progress() pass, which every waiting rank and the
// progress thread make. The ranks that stay silent are the ones the timeout
// names as unreachable: across hosts, the ranks a call waits for are often
// alive neighbours that wait themselves for a host whose link went down.
// Only jobs with peers on other hosts probe (and ask UCX for active
// messages); peers of this host are watched through /proc instead.
#include <algorithm>
#include <cstdint>
#include <vector>

#include "runtime/clock.hpp"
#include "runtime/log.hpp"
#include "transports/ucx/ucx_transport.hpp"

namespace quorum {

namespace {
constexpr unsigned kProbeAmId = 0;
constexpr uint32_t kAsk = 0;
constexpr uint32_t kAnswer = 1;
}  // namespace

Status UcxTransport::register_probe_handler() {
  ucp_am_handler_param_t param{};
  param.field_mask = UCP_AM_HANDLER_PARAM_FIELD_ID | UCP_AM_HANDLER_PARAM_FIELD_CB |
                     UCP_AM_HANDLER_PARAM_FIELD_ARG;
  param.id = kProbeAmId;
  param.cb = &UcxTransport::probe_callback;
  param.arg = this;
  ucs_status_t st = ucp_worker_set_am_recv_handler(worker_, &param);
  if (st != UCS_OK) {
    return fail(QUORUM_ERR_TRANSPORT, "ucx", "rank {}: registering the probe handler failed: {}",
                rank_, ucs_status_string(st));
  }
  return kOk;
}

ucs_status_t UcxTransport::probe_callback(void *arg, const void * /*header*/,
                                          size_t /*header_length*/, void *data, size_t length,
                                          const ucp_am_recv_param_t * /*param*/) {
  auto *self = static_cast<UcxTransport *>(arg);
  uint32_t message[2];
  if (length != sizeof(message) || data == nullptr) return UCS_OK;  // not ours: ignored
  std::copy_n(static_cast<const uint8_t *>(data), sizeof(message),
              reinterpret_cast<uint8_t *>(message));
  const int source = static_cast<int>(message[0]);
  if (source < 0 || source >= self->size_ || source == self->rank_) return UCS_OK;
  Peer &peer = *self->peers_[source];
  peer.heard_ns = now_ns();
  if (message[1] == kAsk) {
    // Sending from inside UCX's callback is avoided: progress() answers.
    peer.answer_due = true;
    self->answers_pending_ = true;
  }
  return UCS_OK;
}

void UcxTransport::send_probe(Peer &peer, uint32_t kind) {
  if (peer.ep == nullptr || peer.failed.load()) return;
  uint32_t *message = peer.probe_out[kind];
  message[0] = static_cast<uint32_t>(rank_);
  message[1] = kind;
  ucp_request_param_t param{};
  param.op_attr_mask = UCP_OP_ATTR_FIELD_DATATYPE | UCP_OP_ATTR_FIELD_FLAGS;
  param.datatype = ucp_dt_make_contig(1);
  param.flags = UCP_AM_SEND_FLAG_EAGER;
  ucs_status_ptr_t request = ucp_am_send_nbx(peer.ep, kProbeAmId, nullptr, 0, message,
                                             sizeof(peer.probe_out[kind]), &param);
  if (UCS_PTR_IS_PTR(request)) {
    ucp_request_free(request);  // released by UCX once sent (or purged with the endpoint)
  } else if (UCS_PTR_IS_ERR(request)) {
    QLOG_DEBUG("ucx", "rank {}: probe message to peer {}: {}", rank_, peer.rank,
               ucs_status_string(UCS_PTR_STATUS(request)));
  }
}

void UcxTransport::send_probe_answers() {
  answers_pending_ = false;
  for (const auto &peer : peers_) {
    if (!peer->answer_due) continue;
    peer->answer_due = false;
    send_probe(*peer, kAnswer);
  }
}

void UcxTransport::probe_peers() {
  if (worker_ == nullptr || shutting_down_ || !probe_enabled_) return;
  for (const auto &peer : peers_) {
    if (peer->rank != rank_) send_probe(*peer, kAsk);
  }
}

std::vector<int> UcxTransport::silent_peers(uint64_t since_ns) const {
  std::vector<int> silent;
  if (!probe_enabled_) return silent;
  for (const auto &peer : peers_) {
    if (peer->rank == rank_) continue;
    // Not "failed": a peer this rank gave up on (a cancelled transfer it
    // never settled) may well be alive and have answered.
    if (peer->heard_ns < since_ns) silent.push_back(peer->rank);
  }
  return silent;
}

}  // namespace quorum
