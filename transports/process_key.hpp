// process_key.hpp: tells whether two ranks run in the same process.
//
// A pid alone cannot: processes in separate PID namespaces (containers, where
// the application is often PID 1) or on separate hosts may have equal pids.
// The key pairs the pid with a random 64-bit nonce drawn once per process
// (again in a child after fork), so equal keys mean the same process.
#pragma once

#include <cstdint>

namespace quorum {

struct ProcessKey {
  int64_t pid;
  uint64_t nonce;

  // This process's key (the same from every thread).
  static ProcessKey self();
  bool operator==(const ProcessKey &o) const { return pid == o.pid && nonce == o.nonce; }
  bool operator!=(const ProcessKey &o) const { return !(*this == o); }
};

}  // namespace quorum
