// cross_memory.cpp: process_vm_readv/writev wrappers and the group probe.
#include "runtime/cross_memory.hpp"

#include <sys/prctl.h>
#include <sys/uio.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <vector>

#include "runtime/log.hpp"

namespace quorum {

namespace {

using VmCopy = ssize_t (*)(pid_t, const iovec *, unsigned long, const iovec *, unsigned long,
                           unsigned long);

int vm_copy(VmCopy copy, pid_t pid, uint64_t remote, void *local, size_t bytes) {
  if (bytes == 0) return 0;
  iovec l{local, bytes};
  iovec r{reinterpret_cast<void *>(static_cast<uintptr_t>(remote)), bytes};
  const ssize_t n = copy(pid, &l, 1, &r, 1, 0);
  if (n == static_cast<ssize_t>(bytes)) return 0;
  return n < 0 ? errno : EFAULT;
}

}  // namespace

int cross_memory_read(pid_t pid, uint64_t remote, void *local, size_t bytes) {
  return vm_copy(process_vm_readv, pid, remote, local, bytes);
}

int cross_memory_write(pid_t pid, uint64_t remote, const void *local, size_t bytes) {
  return vm_copy(process_vm_writev, pid, remote, const_cast<void *>(local), bytes);
}

Status probe_cross_memory(const ShmGroup &group, bool want, bool *usable) {
  *usable = false;
  const size_t p = static_cast<size_t>(group.size);
#ifdef PR_SET_PTRACER
  // Yama's ptrace_scope 1 lets only a process's ancestors, or those it names,
  // attach; the ranks are siblings. (Harmless where Yama is absent.)
  if (want) prctl(PR_SET_PTRACER, PR_SET_PTRACER_ANY, 0, 0, 0);
#endif
  // A word whose value tells the reader it read the right process.
  static thread_local uint64_t word;
  word = 0x71756f72756d0000ull ^ (static_cast<uint64_t>(getpid()) << 8) ^
         static_cast<uint64_t>(group.rank);
  struct Probe {
    pid_t pid;
    uint64_t address;
    uint64_t value;
  } mine{getpid(), reinterpret_cast<uintptr_t>(&word), word};
  std::vector<Probe> all(p);
  QUORUM_CHECK(group.allgather(&mine, all.data(), sizeof(Probe)));
  bool ok = want;
  for (size_t q = 0; q < p && ok; ++q) {
    if (static_cast<int>(q) == group.rank) continue;
    uint64_t got = 0;
    const int err = cross_memory_read(all[q].pid, all[q].address, &got, sizeof(got));
    if (err != 0 || got != all[q].value) {
      QLOG_INFO("shm", "no cross-memory attach to rank {} (process {}): {}", q, all[q].pid,
                err != 0 ? std::strerror(err) : "read another word");
      ok = false;
    }
  }
  // The words may be read until every rank has answered.
  QUORUM_CHECK(agree(group, ok, usable));
  return kOk;
}

}  // namespace quorum
