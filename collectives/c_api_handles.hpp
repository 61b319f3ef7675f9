// c_api_handles.hpp: what the opaque C handles of quorum.h hold, shared by the
// C API files (c_api.cpp, partial/partial_c_api.cpp).
#pragma once

#include <memory>

#include "collectives/communicator.hpp"
#include "quorum/quorum.h"

struct quorum_comm {
  std::unique_ptr<quorum::Communicator> comm;
};

namespace quorum {
// A request handle for quorum_wait/quorum_test (c_api.cpp), live until released.
quorum_request_t make_request_handle(Communicator *comm, RequestPtr req);
}  // namespace quorum
