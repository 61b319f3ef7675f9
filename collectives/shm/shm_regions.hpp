// shm_regions.hpp: symmetric buffers in shared memory (quorum_mem_alloc).
//
// An allocation is collective over the ranks of a shared-memory channel: one
// segment of P x stride bytes that every rank maps, rank q's buffer at
// q x stride. A rank can therefore read and write its peers' buffers directly,
// which the shm allreduce's zero-copy path does when every rank's buffers lie
// in such a region. Regions get ids in allocation order (the same on every
// rank: allocation is collective); freeing is local (the segment lives on
// while a peer maps it).
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <mutex>
#include <vector>

#include "runtime/shm_segment.hpp"
#include "runtime/status.hpp"

namespace quorum {

class ShmRegions {
 public:
  // A byte range of this rank's part of a region; region 0: not in one.
  struct Location {
    uint32_t region = 0;
    uint64_t offset = 0;
  };

  // Collective over `group`: *out = this rank's `bytes` (equal on every rank,
  // zeroed, page aligned), or nullptr (and kOk) on every rank when the
  // segment cannot be made. Returns once every rank has the region
  // registered (its peers may use it from then on).
  Status alloc(const ShmGroup &group, size_t bytes, void **out);
  // Unmaps the region whose buffer on this rank is ptr; false if none is.
  bool release(void *ptr);
  // Where [p, p + bytes) lies, if wholly inside this rank's part of a region.
  Location locate(const void *p, size_t bytes) const;
  // Rank q's bytes at `loc` (bytes long), or nullptr when this rank no longer
  // maps the region or the range does not fit.
  uint8_t *peer_address(const Location &loc, int q, size_t bytes) const;

 private:
  struct Region {
    uint32_t id = 0;
    int rank = 0;
    size_t stride = 0;
    std::unique_ptr<ShmSegment> segment;
    uint8_t *part(int q) const { return segment->data() + static_cast<size_t>(q) * stride; }
  };
  mutable std::mutex mutex_;
  std::vector<Region> regions_;
  uint32_t next_id_ = 1;
};

}  // namespace quorum
