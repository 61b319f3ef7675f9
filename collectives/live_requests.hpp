// live_requests.hpp: the requests a communicator's non-blocking calls handed
// out that their caller has not released yet (by a wait, or a test that
// found them done). finalize refuses while there are any: a later wait on
// one would use the finalized communicator.
#pragma once

#include <algorithm>
#include <memory>
#include <mutex>
#include <vector>

#include "runtime/progress/engine.hpp"

namespace quorum {

class LiveRequests {
 public:
  void add(const RequestPtr &request) {
    std::lock_guard<std::mutex> lock(mutex_);
    prune_locked();
    live_.push_back(request);
  }
  // Idempotent: a second wait on the same request changes nothing.
  void remove(const RequestPtr &request) {
    std::lock_guard<std::mutex> lock(mutex_);
    live_.erase(std::remove_if(live_.begin(), live_.end(),
                               [&](const std::weak_ptr<Request> &w) {
                                 return w.expired() || w.lock() == request;
                               }),
                live_.end());
  }
  // Requests still in flight or held by their caller unreleased (one the
  // caller dropped after it completed is gone and not counted).
  size_t count() {
    std::lock_guard<std::mutex> lock(mutex_);
    prune_locked();
    return live_.size();
  }
  void clear() {
    std::lock_guard<std::mutex> lock(mutex_);
    live_.clear();
  }

 private:
  void prune_locked() {
    live_.erase(std::remove_if(live_.begin(), live_.end(),
                               [](const std::weak_ptr<Request> &w) { return w.expired(); }),
                live_.end());
  }
  std::mutex mutex_;
  std::vector<std::weak_ptr<Request>> live_;
};

}  // namespace quorum
