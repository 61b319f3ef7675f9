// object_ids.hpp: ids of a communicator's persistent objects (partial
// collectives), in creation order. Message tags keep only the low 8 bits of
// an id, so no two live objects may share them: an id whose low bits a live
// object holds is skipped, and a 257th live object is refused. The ids depend
// only on the order of acquire and release calls, which is the same on every
// rank (objects are created and destroyed collectively), so every rank picks
// the same id.
#pragma once

#include <bitset>
#include <cstdint>
#include <mutex>

#include "runtime/status.hpp"

namespace quorum {

class ObjectIds {
 public:
  static constexpr int kBits = 8;
  static constexpr uint64_t kLive = uint64_t{1} << kBits;  // most live objects at once

  Status acquire(uint64_t *id) {
    std::lock_guard<std::mutex> lock(mutex_);
    for (uint64_t i = 0; i < kLive; ++i) {
      const uint64_t candidate = next_ + i;
      if (!used_.test(slot(candidate))) {
        used_.set(slot(candidate));
        next_ = candidate + 1;
        *id = candidate;
        return kOk;
      }
    }
    return fail(QUORUM_ERR_NO_MEMORY, "partial",
                "partial_create: at most {} live partial objects per communicator (their ids "
                "share {} bits of every message tag); destroy one first",
                kLive, kBits);
  }
  void release(uint64_t id) {
    std::lock_guard<std::mutex> lock(mutex_);
    used_.reset(slot(id));
  }
  size_t live() const {
    std::lock_guard<std::mutex> lock(mutex_);
    return used_.count();
  }

 private:
  static size_t slot(uint64_t id) { return static_cast<size_t>(id & (kLive - 1)); }
  mutable std::mutex mutex_;
  uint64_t next_ = 0;
  std::bitset<kLive> used_;
};

}  // namespace quorum
