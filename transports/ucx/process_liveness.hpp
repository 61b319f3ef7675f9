// process_liveness.hpp: tells whether a peer process on this host still runs.
//
// UCX 1.13's keepalive over shared memory misses a dead peer while a
// rendezvous send to it is outstanding, so the UCX transport also checks the
// peer processes of its own host itself. Identities are exchanged at init; a
// peer is only checked when it shares this kernel boot and PID namespace (so
// its pid means the same process here), and a pid counts as alive only while
// its start time matches (pids are reused) and it is not a zombie.
#pragma once

#include <cstdint>

namespace quorum {

struct ProcessIdentity {
  char boot_id[40];        // /proc/sys/kernel/random/boot_id, NUL-terminated
  uint64_t pid_namespace;  // inode of /proc/self/ns/pid
  int64_t pid;
  uint64_t start_time;  // field 22 of /proc/<pid>/stat, in clock ticks since boot

  // This process; fields it cannot read stay zero (then nothing is checked).
  static ProcessIdentity self();
  // Whether `other` is another process whose pid can be checked from here.
  bool can_watch(const ProcessIdentity &other) const;
};

enum class Liveness { Alive, Gone, Unknown };
Liveness process_liveness(const ProcessIdentity &process);

}  // namespace quorum
