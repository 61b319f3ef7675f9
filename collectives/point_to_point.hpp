// point_to_point.hpp: quorum_send/recv (blocking and not) between two ranks of
// a communicator: one send or receive task on the communicator's transport,
// tagged [PointToPoint][user tag][0], so messages between two ranks with one
// tag arrive in the order they were sent (as MPI's non-overtaking rule), and
// none can match a collective's. They take no collective sequence number:
// ranks that do not take part stay in step. A receive must name its source
// and the exact size the sender sent (no wildcards, no shorter messages);
// sending to oneself is refused; host buffers only. Bounded by QUORUM_TIMEOUT_MS like any call.
#pragma once

#include <cstddef>

#include "collectives/communicator.hpp"

namespace quorum {

// Tags a user may pass: 0 .. kMaxUserTag.
constexpr int kMaxUserTag = (1 << 28) - 1;

Status point_to_point_send(Communicator &comm, const void *buf, size_t bytes, int peer, int tag,
                           RequestPtr *req, bool blocking);
Status point_to_point_recv(Communicator &comm, void *buf, size_t bytes, int peer, int tag,
                           RequestPtr *req, bool blocking);

}  // namespace quorum
