// transport.hpp: the one small interface every transport implements (ucx and
// inproc), and the registry that picks one by name.
//
// A Transport instance belongs to one communicator. It connects to every peer
// during init() (addresses exchanged through the Bootstrap), then moves tagged
// messages: send/recv are non-blocking and complete a caller-owned
// TransportRequest. Messages with the same (source, tag) are matched in the
// order they were sent. All calls except event_fd() are made by one thread at a
// time (the progress engine serialises them). Tags use the low kTagBits bits.
#pragma once

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "runtime/bootstrap/bootstrap.hpp"
#include "runtime/status.hpp"

namespace quorum {

constexpr int kTagBits = 44;
constexpr uint64_t kTagMask = (uint64_t{1} << kTagBits) - 1;

// Completion record owned by the caller; must stay alive (and not move) until
// state != Pending. The transport writes status/bytes, then releases state.
struct TransportRequest {
  enum State : int { Pending = 0, Done = 1, Failed = 2 };
  std::atomic<int> state{Pending};
  Status status = kOk;
  size_t bytes = 0;  // bytes received (recv)
  int peer = -1;
  void *impl = nullptr;  // the transport's own handle, for cancel()

  bool pending() const { return state.load(std::memory_order_acquire) == Pending; }
  void reset() {
    state.store(Pending, std::memory_order_relaxed);
    status = kOk;
    bytes = 0;
    peer = -1;
    impl = nullptr;
  }
  void complete(Status s, size_t n = 0) {
    status = s;
    bytes = n;
    state.store(s == kOk ? Done : Failed, std::memory_order_release);
  }
};

enum class MemoryType { Host, Cuda };

class Transport {
 public:
  virtual ~Transport() = default;
  virtual const char *name() const = 0;
  // One line for logs and quorum-info, e.g. "ucx 1.13.1 (posix, tcp; lo)".
  virtual std::string description() const = 0;

  // Exchanges addresses through the bootstrap and connects to every peer.
  virtual Status init(Bootstrap &bootstrap) = 0;
  // Graceful close: waits until peers are done with us (barrier), then closes.
  virtual Status shutdown(Bootstrap &bootstrap) = 0;

  int rank() const { return rank_; }
  int size() const { return size_; }

  // Non-blocking tagged send/recv with a peer (never self). A recv of fewer
  // bytes than arrive fails with QUORUM_ERR_MISMATCH (truncation: sender and
  // receiver disagree on the size).
  virtual Status send(int peer, uint64_t tag, const void *buf, size_t bytes,
                      TransportRequest *req) = 0;
  virtual Status recv(int peer, uint64_t tag, void *buf, size_t bytes, TransportRequest *req) = 0;
  // Stops a pending request; it completes (Failed, or Done if it raced) in a
  // later progress() call, after which the transport no longer touches buf.
  virtual void cancel(TransportRequest *req) = 0;

  // Makes progress without blocking; returns true if anything completed.
  virtual bool progress() = 0;
  // A file descriptor that becomes readable when there is work, or -1.
  virtual int event_fd() = 0;
  // Prepares to sleep on event_fd(); false means events are already pending
  // (call progress() instead of sleeping).
  virtual bool arm() = 0;

  // True once the transport learned that `peer` is gone.
  virtual bool peer_failed(int peer) const = 0;
  // The first peer the transport learned is gone, or -1: one cheap read, so
  // that every pass of the progress engine can ask (a dead peer fails every
  // request in flight, not only those with a transfer to it).
  virtual int failed_peer() const { return -1; }
  // Liveness probe, for a call that timed out: asks every peer for an answer,
  // which peers give from their own progress(). silent_peers(since) then
  // names the peers heard nothing from (no answer, no message) since
  // `since_ns` (now_ns() clock; a dead peer cannot answer). A transport that
  // cannot probe names none.
  virtual void probe_peers() {}
  virtual std::vector<int> silent_peers(uint64_t /*since_ns*/) const { return {}; }
  // Whether send/recv accept buffers of this memory type directly.
  virtual bool supports_memory(MemoryType type) const { return type == MemoryType::Host; }

 protected:
  int rank_ = 0;
  int size_ = 1;
};

using TransportFactory = std::unique_ptr<Transport> (*)();

struct TransportInfo {
  std::string name;
  int priority;        // higher wins under QUORUM_TRANSPORT=auto
  bool multi_process;  // false: ranks must be threads of one process (inproc)
  TransportFactory factory;
};

// Registration happens in transports/registry.cpp (one line per transport).
const std::vector<TransportInfo> &transport_table();
// By name, or "auto": inproc when every rank is a thread of this process (found
// by exchanging ProcessKeys through the bootstrap), else the highest-priority
// transport that connects processes.
Status create_transport(const std::string &name, Bootstrap &bootstrap,
                        std::unique_ptr<Transport> *out);

}  // namespace quorum
