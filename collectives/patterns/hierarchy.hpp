// hierarchy.hpp: the two-level pattern of hierarchical collectives. Ranks are
// grouped by host (hosts[h] = the ranks of host h, ascending); a rank talks
// to the ranks of its own host and to the ranks of the same local index on
// the other hosts (its "column"). Only uniform layouts (every host has the
// same number of ranks, at least 2 hosts of at least 2 ranks) have columns
// of equal length; the others answer why not.
#pragma once

#include <vector>

namespace quorum {
namespace patterns {
namespace hierarchy {

enum class Fit {
  kFits,
  kOneHost,         // every rank on one host: nothing to save on the network
  kOneRankPerHost,  // no host-local phase: the flat algorithm is the same
  kUnevenHosts,     // hosts with different numbers of ranks
};

inline const char *fit_reason(Fit f) {
  switch (f) {
    case Fit::kFits:
      return "fits";
    case Fit::kOneHost:
      return "one host";
    case Fit::kOneRankPerHost:
      return "one rank per host";
    case Fit::kUnevenHosts:
      return "hosts with unequal numbers of ranks";
  }
  return "unknown";
}

inline Fit fit(const std::vector<std::vector<int>> &hosts, int size) {
  if (hosts.size() < 2) return Fit::kOneHost;
  const size_t per_host = hosts.front().size();
  for (const auto &h : hosts) {
    if (h.size() != per_host) return Fit::kUnevenHosts;
  }
  if (per_host * hosts.size() != static_cast<size_t>(size)) return Fit::kUnevenHosts;
  return per_host < 2 ? Fit::kOneRankPerHost : Fit::kFits;
}

// The ranks of local index `local_rank` on every host, in host order.
inline std::vector<int> column(const std::vector<std::vector<int>> &hosts, int local_rank) {
  std::vector<int> col;
  for (const auto &h : hosts) {
    if (local_rank >= 0 && static_cast<size_t>(local_rank) < h.size()) col.push_back(h[local_rank]);
  }
  return col;
}

// On exactly 2 hosts a ring of the ranks of one local index is a pair that
// sends both ways over one connection, where UCX's rendezvous replies queue
// behind the bulk data going the other way. The one-way pairing instead
// links host 0's local rank i to host 1's rank i, and host 1's rank i to
// host 0's rank i+1 (mod L): every connection between the hosts carries data
// one way. For local rank i of host h: the world rank it sends to and the
// one it receives from.
struct OneWayPair {
  int send_to = -1, recv_from = -1;
};
inline OneWayPair one_way_pair(const std::vector<std::vector<int>> &hosts, int h, int i) {
  const int l = static_cast<int>(hosts[0].size());
  if (h == 0) return {hosts[1][i], hosts[1][(i + l - 1) % l]};
  return {hosts[0][(i + 1) % l], hosts[0][i]};
}

// Where a rank lives: its host's index in `hosts` and its index on that host
// ({-1, -1} for a rank on no host).
struct Place {
  int host = -1, local = -1;
};
inline Place locate(const std::vector<std::vector<int>> &hosts, int rank) {
  for (size_t h = 0; h < hosts.size(); ++h) {
    for (size_t i = 0; i < hosts[h].size(); ++i) {
      if (hosts[h][i] == rank) return {static_cast<int>(h), static_cast<int>(i)};
    }
  }
  return {};
}

}  // namespace hierarchy
}  // namespace patterns
}  // namespace quorum
