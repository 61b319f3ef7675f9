// scratch_pool.cpp: smallest-fit reuse of scratch buffers.
#include "collectives/scratch_pool.hpp"

namespace quorum {

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
    auto slot = std::make_unique<Slot>();
    slot->buffer = allocate_aligned(bytes);
    slot->bytes = bytes;
    slots_.push_back(std::move(slot));
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
