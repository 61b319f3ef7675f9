// thread_group_bootstrap.hpp: a bootstrap for ranks that are threads of one
// process (tests over the inproc transport). A ThreadGroup is shared by the P
// threads; each thread takes its rank's Bootstrap from it.
#pragma once

#include <condition_variable>
#include <cstdint>
#include <memory>
#include <mutex>
#include <vector>

#include "runtime/bootstrap/bootstrap.hpp"

namespace quorum {

class ThreadGroup : public std::enable_shared_from_this<ThreadGroup> {
 public:
  static std::shared_ptr<ThreadGroup> create(int size);
  int size() const { return size_; }
  // The bootstrap of `rank`; keeps the group alive.
  std::unique_ptr<Bootstrap> bootstrap(int rank);

  // Collective over the group's threads (used by ThreadGroupBootstrap).
  Status allgather(int rank, const void *in, void *out, size_t bytes);

 private:
  explicit ThreadGroup(int size) : size_(size) {}
  int size_;
  std::mutex mutex_;
  std::condition_variable cv_;
  uint64_t generation_ = 0;
  int arrived_ = 0;
  size_t bytes_ = 0;
  bool size_mismatch_ = false;
  bool result_mismatch_ = false;
  std::vector<uint8_t> data_;
  std::vector<uint8_t> result_;
};

}  // namespace quorum
