// cross_memory.hpp: cross-memory attach (process_vm_readv/writev), a kernel
// copy between this process's memory and another process's on the same host
// without a shared mapping: one copy of each byte, for buffers that are not in
// shared memory.
//
// The kernel allows it where this process may ptrace the other (same user,
// and under Yama's ptrace_scope 1 only after the other named us as a tracer:
// probe_cross_memory names every process as allowed); containers may forbid
// the system calls altogether. probe_cross_memory tries it between every pair
// of ranks of a group, so the ranks agree whether it can be used.
#pragma once

#include <sys/types.h>
#include <cstddef>
#include <cstdint>

#include "runtime/shm_segment.hpp"
#include "runtime/status.hpp"

namespace quorum {

// Copies `bytes` from `remote` in process `pid` into `local`. Returns 0, or
// the errno of the kernel's refusal (ESRCH: the process is gone; EFAULT also
// when it copied less: an address the process does not map).
int cross_memory_read(pid_t pid, uint64_t remote, void *local, size_t bytes);
// Copies `bytes` from `local` to `remote` in process `pid`; returns as above.
int cross_memory_write(pid_t pid, uint64_t remote, const void *local, size_t bytes);

// Collective over `group`: *usable = every rank wanted it and could read a
// word from every other rank's memory. A rank that does not want it (its
// knob says never) takes no step toward it (names no tracer, reads nothing)
// and so turns it off for all. Never fails for a refusal (that gives false);
// fails only when the group's allgather does.
Status probe_cross_memory(const ShmGroup &group, bool want, bool *usable);

}  // namespace quorum
