// ucx_info.cpp: UCX version, endpoint lane description, status classification.
#include "transports/ucx/ucx_info.hpp"

#include <cstdio>
#include <cstdlib>
#include <sstream>

namespace quorum {

std::string ucx_version() {
  return ucp_get_version_string();
}

EndpointLanes endpoint_lanes(ucp_ep_h ep, std::string *text) {
  char *buffer = nullptr;
  size_t length = 0;
  FILE *stream = open_memstream(&buffer, &length);
  if (stream == nullptr) return {};
  ucp_ep_print_info(ep, stream);
  std::fclose(stream);
  std::string printout(buffer, length);
  std::free(buffer);
  if (text != nullptr) *text = printout;
  return parse_endpoint_lanes(printout);
}

// A lane line looks like
//   "#   lane[0]:  1:tcp/lo.0 md[1]  -> md[1]/tcp/sysdev[255] am am_bw#0 keepalive wireup"
// where "1:" is the resource index, "tcp" the transport, "lo" the device and
// ".0" the path index.
EndpointLanes parse_endpoint_lanes(const std::string &text) {
  EndpointLanes lanes;
  std::istringstream lines(text);
  std::string line;
  while (std::getline(lines, line)) {
    size_t lane = line.find("lane[");
    if (lane == std::string::npos) continue;
    size_t colon = line.find("]:", lane);
    if (colon == std::string::npos) continue;
    std::istringstream words(line.substr(colon + 2));
    std::string resource;
    if (!(words >> resource)) continue;
    size_t index_end = resource.find(':');
    size_t slash = resource.find('/');
    if (index_end == std::string::npos || slash == std::string::npos || slash < index_end) continue;
    std::string transport = resource.substr(index_end + 1, slash - index_end - 1);
    std::string device = resource.substr(slash + 1);
    size_t path = device.rfind('.');
    if (path != std::string::npos) device.resize(path);
    if (!transport.empty()) lanes.transports.insert(transport);
    if (!device.empty()) lanes.devices.insert(device);
  }
  return lanes;
}

std::string describe_lanes(const EndpointLanes &lanes) {
  std::string out;
  for (const auto &t : lanes.transports) out += (out.empty() ? "" : ", ") + t;
  std::string devices;
  for (const auto &d : lanes.devices) devices += (devices.empty() ? "" : ", ") + d;
  if (!devices.empty()) out += "; " + devices;
  return out;
}

bool is_peer_loss(ucs_status_t status) {
  switch (status) {
    case UCS_ERR_CONNECTION_RESET:
    case UCS_ERR_ENDPOINT_TIMEOUT:
    case UCS_ERR_UNREACHABLE:
    case UCS_ERR_REJECTED:
    case UCS_ERR_NOT_CONNECTED:
    case UCS_ERR_CANCELED:  // requests purged from a failed endpoint
      return true;
    default:
      return false;
  }
}

}  // namespace quorum
