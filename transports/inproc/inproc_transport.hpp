// inproc_transport.hpp: ranks as threads of one process, for fast deterministic
// tests. Each rank owns a Mailbox (posted receives + unexpected messages);
// a sender delivers straight into a matching posted receive, else queues the
// message (copied when small, by reference and completed by the receiver when
// large, so large messages are copied once). Completion is signalled through
// the receiver's eventfd, which is the transport's event fd.
#pragma once

#include <memory>

#include "transports/transport.hpp"

namespace quorum {

std::unique_ptr<Transport> make_inproc_transport();

// Test hook: make this rank look dead to its peers (their pending and future
// receives from it fail with QUORUM_ERR_PEER_FAILED), as if its thread exited.
void inproc_simulate_failure(Transport &transport);

}  // namespace quorum
