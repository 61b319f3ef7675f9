// ucx_op.hpp: the record of one send or recv in flight. It is constructed in
// the memory UCX reserves in front of each of its requests (request_size), so
// posting an operation allocates nothing; it is freed with the UCX request in
// the completion callback, which is always the last event of an operation.
#pragma once

#include <cstddef>
#include <cstdint>

#include "transports/ucx/ucx_transport.hpp"

namespace quorum {

struct UcxTransport::Op {
  UcxTransport *owner;
  TransportRequest *req;  // null once detached (failed early or abandoned)
  Op *prev;
  Op *next;
  int peer;
  bool is_recv;
  bool cancel_requested;  // by the caller (cancel())
  bool cancel_sent;       // ucp_request_cancel was called (only once per recv)
  uint64_t cancel_ns;     // when it was cancelled (now_ns(); 0: not cancelled)
  uint64_t tag;
  size_t bytes;  // buffer size (recv) or message size (send)
};

}  // namespace quorum
