// shm_regions.cpp: collective allocation and lookup of symmetric buffers.
#include "collectives/shm/shm_regions.hpp"

#include <algorithm>
#include <vector>

#include "runtime/log.hpp"
#include "runtime/memory.hpp"

namespace quorum {

Status ShmRegions::alloc(const ShmGroup &group, size_t bytes, void **out) {
  *out = nullptr;
  constexpr size_t kPage = 4096;
  // The same decision on every rank: bytes and the group are the same there.
  size_t stride = 0, total = 0;
  if (bytes > kMaxAllocBytes || !round_up(std::max(bytes, kPage), kPage, &stride) ||
      __builtin_mul_overflow(stride, static_cast<size_t>(group.size), &total) ||
      total > kMaxAllocBytes) {
    return fail(QUORUM_ERR_NO_MEMORY, "shm",
                "symmetric buffer of {} B per rank for {} ranks is too big to map (at most {} B "
                "in all)",
                bytes, group.size, kMaxAllocBytes);
  }
  std::unique_ptr<ShmSegment> seg;
  QUORUM_CHECK(ShmSegment::create(group, total, &seg));
  uint32_t id = 0;
  {
    std::lock_guard<std::mutex> lock(mutex_);
    id = next_id_++;  // the same on every rank: every rank got a segment or none
    if (!seg) return kOk;
    Region r;
    r.id = id;
    r.rank = group.rank;
    r.stride = stride;
    r.segment = std::move(seg);
    *out = r.part(group.rank);
    regions_.push_back(std::move(r));
  }
  QLOG_DEBUG("shm", "symmetric region {}: {} B per rank", id, stride);
  // A peer may name the region in a round (read by this rank's progress
  // thread) as soon as its alloc returns: return only once every rank has it
  // registered, so peer_address never misses a region that is still live.
  std::vector<uint8_t> registered(static_cast<size_t>(group.size));
  const uint8_t mine = 1;
  Status s = group.allgather(&mine, registered.data(), 1);
  if (s != kOk) {
    release(*out);
    *out = nullptr;
  }
  return s;
}

bool ShmRegions::release(void *ptr) {
  std::lock_guard<std::mutex> lock(mutex_);
  auto it = std::find_if(regions_.begin(), regions_.end(),
                         [ptr](const Region &r) { return r.part(r.rank) == ptr; });
  if (it == regions_.end()) return false;
  regions_.erase(it);
  return true;
}

ShmRegions::Location ShmRegions::locate(const void *p, size_t bytes) const {
  const auto *b = static_cast<const uint8_t *>(p);
  std::lock_guard<std::mutex> lock(mutex_);
  for (const Region &r : regions_) {
    const uint8_t *mine = r.part(r.rank);
    if (b >= mine && b < mine + r.stride && bytes <= r.stride - static_cast<size_t>(b - mine)) {
      return {r.id, static_cast<uint64_t>(b - mine)};
    }
  }
  return {};
}

uint8_t *ShmRegions::peer_address(const Location &loc, int q, size_t bytes) const {
  std::lock_guard<std::mutex> lock(mutex_);
  for (const Region &r : regions_) {
    if (r.id != loc.region) continue;
    if (q < 0 || r.segment->size() / r.stride <= static_cast<size_t>(q)) return nullptr;
    if (loc.offset > r.stride || bytes > r.stride - loc.offset) return nullptr;
    return r.part(q) + loc.offset;
  }
  return nullptr;
}

}  // namespace quorum
