// shm_segment.hpp: a POSIX shared-memory segment mapped by every rank of a
// group that lives on one host (intra-host collectives).
//
// Creation is collective (it uses the group's allgather: the bootstrap's, or a
// communicator's for segments made later, so it happens in the same order on
// every rank): rank 0 creates the object under a name made
// from its pid and a random value, the others open and map it, and rank 0
// unlinks the name as soon as every rank has mapped it, so nothing is left in
// /dev/shm after a crash. If any rank fails, every rank gets no segment
// (*out empty) and kOk: callers fall back to algorithms that need none.
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>

#include "runtime/bootstrap/bootstrap.hpp"
#include "runtime/status.hpp"

namespace quorum {

// The ranks that share a segment, and an allgather of `bytes` per rank among them.
struct ShmGroup {
  int rank = 0;
  int size = 1;
  std::function<Status(const void *mine, void *all, size_t bytes)> allgather;
  // The cores the group's ranks can use together (topology.hpp's
  // cores_covered over their affinity masks), the same on every rank; 0:
  // unknown (users then judge from this process's own mask).
  int cores = 0;
  static ShmGroup of(Bootstrap &bootstrap);
};

// Collective over `group`: *all_ok = every rank passed ok = true.
Status agree(const ShmGroup &group, bool ok, bool *all_ok);

class ShmSegment {
 public:
  // Collective over `group`; `bytes` must be equal on every rank. The memory
  // starts zeroed.
  static Status create(const ShmGroup &group, size_t bytes, std::unique_ptr<ShmSegment> *out);
  ~ShmSegment();
  ShmSegment(const ShmSegment &) = delete;
  ShmSegment &operator=(const ShmSegment &) = delete;

  uint8_t *data() const { return base_; }
  size_t size() const { return bytes_; }
  const std::string &name() const { return name_; }

 private:
  ShmSegment() = default;
  uint8_t *base_ = nullptr;
  size_t bytes_ = 0;
  std::string name_;
};

}  // namespace quorum
