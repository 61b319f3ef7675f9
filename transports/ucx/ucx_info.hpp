// ucx_info.hpp: small UCX facts for logs and error reports: the library
// version, which UCX transports and devices an endpoint uses, and how UCX
// status codes map onto quorum's.
#pragma once

#include <ucp/api/ucp.h>

#include <set>
#include <string>

#include "runtime/status.hpp"

namespace quorum {

// The version of the UCX library actually loaded, e.g. "1.13.1".
std::string ucx_version();

// Transports ("posix", "tcp") and devices ("memory", "lo") in an endpoint's lanes.
struct EndpointLanes {
  std::set<std::string> transports;
  std::set<std::string> devices;
};
// Reads them from ucp_ep_print_info; *text receives the full printout if not null.
EndpointLanes endpoint_lanes(ucp_ep_h ep, std::string *text = nullptr);
// Parses the printout (split out so that it is testable without UCX).
EndpointLanes parse_endpoint_lanes(const std::string &text);
// "posix, tcp; memory, lo"
std::string describe_lanes(const EndpointLanes &lanes);

// Whether a UCX status means the remote side is gone (vs. a local error).
bool is_peer_loss(ucs_status_t status);

}  // namespace quorum
