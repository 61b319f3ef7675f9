// scratch_pool.hpp: reusable, prefaulted scratch buffers of a communicator.
// Buffers are kept after use (page faults cost ~13 us per 4 KiB page on the
// VMs we run on), so a collective's path allocates nothing after warm-up.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <mutex>
#include <vector>

#include "runtime/memory.hpp"

namespace quorum {

class ScratchPool {
 public:
  struct Slot {
    AlignedBuffer buffer;
    size_t bytes = 0;
    bool in_use = false;
  };
  // Returns the buffer to the pool when destroyed.
  class Lease {
   public:
    Lease() = default;
    Lease(ScratchPool *pool, size_t index) : pool_(pool), index_(index) {}
    Lease(Lease &&o) noexcept : pool_(o.pool_), index_(o.index_) { o.pool_ = nullptr; }
    Lease &operator=(Lease &&o) noexcept;
    ~Lease();
    uint8_t *data() const;

   private:
    ScratchPool *pool_ = nullptr;
    size_t index_ = 0;
  };

  Lease acquire(size_t bytes);
  size_t bytes_held() const;

 private:
  void release(size_t index);
  mutable std::mutex mutex_;
  std::vector<std::unique_ptr<Slot>> slots_;
};

}  // namespace quorum
