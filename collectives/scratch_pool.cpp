// scratch_pool.cpp: smallest-fit reuse of scratch buffers. A request that no
// free buffer fits replaces the largest free one, so the pool holds one buffer
// per lease held at once, each of the largest size class asked of it (not one
// more buffer for every new largest size: random sizes grew it without end).
#include "collectives/scratch_pool.hpp"

namespace quorum {

namespace {

// Rounds up to a size class m * 2^k with m in 8..15 (at most 12.5 % more), so
// sizes that creep upwards reallocate a few times, not on every call.
size_t size_class(size_t bytes) {
  if (bytes <= 64) return 64;
  const int shift = 64 - __builtin_clzll(bytes) - 4;  // keep the top 4 bits
  const size_t unit = size_t(1) << shift;
  return (bytes + unit - 1) / unit * unit;
}

}  // namespace

ScratchPool::Lease &ScratchPool::Lease::operator=(Lease &&o) noexcept {
  if (this != &o) {
    if (pool_) pool_->release(index_);
    pool_ = o.pool_;
    index_ = o.index_;
    o.pool_ = nullptr;
  }
  return *this;
}

ScratchPool::Lease::~Lease() {
  if (pool_) pool_->release(index_);
}

uint8_t *ScratchPool::Lease::data() const {
  std::lock_guard<std::mutex> lock(pool_->mutex_);
  return pool_->slots_[index_]->buffer.get();
}

ScratchPool::Lease ScratchPool::acquire(size_t bytes) {
  std::lock_guard<std::mutex> lock(mutex_);
  size_t best = slots_.size();
  for (size_t i = 0; i < slots_.size(); ++i) {
    const Slot &s = *slots_[i];
    if (!s.in_use && s.bytes >= bytes && (best == slots_.size() || s.bytes < slots_[best]->bytes)) {
      best = i;
    }
  }
  if (best == slots_.size()) {
    size_t largest_free = slots_.size();
    for (size_t i = 0; i < slots_.size(); ++i) {
      if (!slots_[i]->in_use &&
          (largest_free == slots_.size() || slots_[i]->bytes > slots_[largest_free]->bytes))
        largest_free = i;
    }
    if (largest_free == slots_.size()) {
      slots_.push_back(std::make_unique<Slot>());
      largest_free = slots_.size() - 1;
    }
    Slot &slot = *slots_[largest_free];
    slot.buffer = AlignedBuffer();  // the old buffer goes before the new one comes
    slot.bytes = size_class(bytes);
    slot.buffer = allocate_aligned(slot.bytes);
    best = largest_free;
  }
  slots_[best]->in_use = true;
  return Lease(this, best);
}

size_t ScratchPool::bytes_held() const {
  std::lock_guard<std::mutex> lock(mutex_);
  size_t n = 0;
  for (const auto &s : slots_) n += s->bytes;
  return n;
}

void ScratchPool::release(size_t index) {
  std::lock_guard<std::mutex> lock(mutex_);
  slots_[index]->in_use = false;
}

}  // namespace quorum
