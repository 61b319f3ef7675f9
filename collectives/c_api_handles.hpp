// c_api_handles.hpp: what the opaque C handles of quorum.h hold, shared by the
// C API files (c_api.cpp, partial/partial_c_api.cpp).
//
// Released handles: quorum_finalize and quorum_partial_destroy/free release
// the object but keep the handle's few bytes, marked released, and never free
// them. A later call with the handle (a second finalize or destroy, a
// collective after finalize) reads that mark and is refused with
// QUORUM_ERR_INVALID_ARG instead of touching freed memory; the memory is never
// reused, so a stale handle cannot alias a newer object. (Requests, made per
// call, are freed instead and checked against a registry: c_api.cpp.)
//
// One caller at a time: every call on a communicator (and on the requests it
// handed out) holds its `busy` flag for the call's duration; a second thread
// that calls in meanwhile is refused with QUORUM_ERR_INVALID_ARG (quorum.h).
#pragma once

#include <atomic>
#include <cstdint>
#include <memory>
#include <mutex>
#include <vector>

#include "collectives/communicator.hpp"
#include "quorum/quorum.h"

namespace quorum {
enum class HandleState : uint32_t { Live = 0x4c495645u, Released = 0x44454144u };

// Where released handles are kept: reachable, so that leak checkers do not
// report the memory the design keeps on purpose.
inline void keep_released_handle(const void *handle) {
  static std::mutex mutex;
  static auto *kept = new std::vector<const void *>;
  std::lock_guard<std::mutex> lock(mutex);
  kept->push_back(handle);
}
}  // namespace quorum

struct quorum_comm {
  std::atomic<quorum::HandleState> state{quorum::HandleState::Live};
  std::atomic<bool> busy{false};
  std::unique_ptr<quorum::Communicator> comm;
};

namespace quorum {

// Holds a communicator handle's busy flag for one call (see above).
class CommCall {
 public:
  CommCall(quorum_comm *c, const char *what) : c_(c) {
    if (c_ == nullptr) {
      status_ = fail(QUORUM_ERR_INVALID_ARG, "api", "{}: NULL communicator", what);
    } else if (c_->state.load(std::memory_order_acquire) != HandleState::Live || !c_->comm) {
      status_ = fail(QUORUM_ERR_INVALID_ARG, "api",
                     "{}: the communicator was finalized (its handle is released)", what);
    } else if (c_->busy.exchange(true, std::memory_order_acquire)) {
      status_ = fail(QUORUM_ERR_INVALID_ARG, "api",
                     "{}: another thread is inside a call on this communicator; calls on one "
                     "communicator (and its requests) must not overlap (quorum.h: threads)",
                     what);
    } else {
      held_ = true;
    }
  }
  ~CommCall() {
    if (held_) c_->busy.store(false, std::memory_order_release);
  }
  CommCall(const CommCall &) = delete;
  CommCall &operator=(const CommCall &) = delete;
  bool ok() const { return held_; }
  Status status() const { return status_; }

 private:
  quorum_comm *c_;
  bool held_ = false;
  Status status_ = kOk;
};

// A request handle for quorum_wait/quorum_test (c_api.cpp), live until released.
quorum_request_t make_request_handle(quorum_comm *comm, RequestPtr req);

}  // namespace quorum

// Refuses a NULL or released communicator, or a call that overlaps another
// on it (see above); holds its busy flag until the call returns.
#define ENTER_COMM(c)                       \
  quorum::CommCall comm_call_(c, __func__); \
  if (!comm_call_.ok()) return comm_call_.status()
