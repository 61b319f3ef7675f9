// inproc_transport.cpp: the inproc transport (see inproc_transport.hpp).
#include "transports/inproc/inproc_transport.hpp"

#include <sys/eventfd.h>
#include <unistd.h>

#include <atomic>
#include <cstring>
#include <deque>
#include <list>
#include <map>
#include <mutex>
#include <vector>

#include "runtime/clock.hpp"
#include "runtime/knobs.hpp"
#include "runtime/log.hpp"
#include "transports/process_key.hpp"

namespace quorum {

namespace {

Knob<int64_t> knob_inproc_eager("QUORUM_INPROC_EAGER_BYTES", 16384,
                                "inproc transport: messages up to this size are copied when "
                                "sent before the receive is posted; larger ones wait for it");

struct Mailbox;

// A message that arrived before its receive was posted.
struct Unexpected {
  int source;
  uint64_t tag;
  std::vector<uint8_t> data;         // eager copy
  const void *sender_buf = nullptr;  // rendezvous: the sender's buffer
  size_t bytes = 0;
  TransportRequest *send_req = nullptr;  // rendezvous: completed by the receiver
  std::shared_ptr<Mailbox> sender_box;   // to signal the sender
};

struct PostedRecv {
  int source;
  uint64_t tag;
  void *buf;
  size_t bytes;
  TransportRequest *req;
};

struct Mailbox {
  int rank = -1;
  int efd = -1;
  std::mutex mutex;
  std::list<PostedRecv> posted;
  std::list<Unexpected> unexpected;
  std::vector<bool> dead_sources;  // peers known to be gone
  std::atomic<bool> dead{false};
  ~Mailbox() {
    if (efd >= 0) close(efd);
  }
  void signal() {
    uint64_t one = 1;
    ssize_t r = write(efd, &one, sizeof(one));
    (void)r;
  }
};

std::mutex g_registry_mutex;
std::map<uint64_t, std::weak_ptr<Mailbox>> g_registry;
uint64_t g_next_id = 1;

struct Address {
  ProcessKey process;  // not the pid alone: other PID namespaces reuse pids
  uint64_t id;         // the mailbox in g_registry (ids restart at 1 in every process)
};

Status deliver(PostedRecv &r, const void *data, size_t bytes, int peer_rank) {
  if (bytes > r.bytes) {
    Status s = fail(QUORUM_ERR_MISMATCH, "inproc",
                    "message of {} B from rank {} (tag {:#x}) truncated: receive buffer is {} B",
                    bytes, peer_rank, r.tag, r.bytes);
    r.req->complete(s);
    return s;
  }
  if (bytes > 0) std::memcpy(r.buf, data, bytes);
  r.req->complete(kOk, bytes);
  return kOk;
}

class InprocTransport : public Transport {
 public:
  ~InprocTransport() override {
    if (box_ && !shut_down_) mark_dead();
  }
  const char *name() const override { return "inproc"; }
  std::string description() const override {
    return fmt::format("inproc (threads of one process, eager <= {} B)", eager_);
  }

  Status init(Bootstrap &bootstrap) override {
    rank_ = bootstrap.rank();
    size_ = bootstrap.size();
    eager_ = static_cast<size_t>(knob_inproc_eager.get());
    box_ = std::make_shared<Mailbox>();
    box_->rank = rank_;
    box_->dead_sources.assign(size_, false);
    box_->efd = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
    if (box_->efd < 0) return fail(QUORUM_ERR_TRANSPORT, "inproc", "eventfd: {}", strerror(errno));
    Address mine{ProcessKey::self(), 0};
    {
      std::lock_guard<std::mutex> lock(g_registry_mutex);
      mine.id = g_next_id++;
      g_registry[mine.id] = box_;
    }
    std::vector<Address> all(size_);
    QUORUM_CHECK(bootstrap.allgather(&mine, all.data(), sizeof(Address)));
    peers_.resize(size_);
    std::lock_guard<std::mutex> lock(g_registry_mutex);
    for (int r = 0; r < size_; ++r) {
      if (all[r].process != mine.process) {
        return fail(QUORUM_ERR_TRANSPORT, "inproc",
                    "rank {} is in process {} (key {:016x}), rank {} in process {} (key {:016x}): "
                    "inproc needs every rank in one process (use the ucx transport)",
                    r, all[r].process.pid, all[r].process.nonce, rank_, mine.process.pid,
                    mine.process.nonce);
      }
      auto it = g_registry.find(all[r].id);
      if (it == g_registry.end() || !(peers_[r] = it->second.lock())) {
        return fail(QUORUM_ERR_TRANSPORT, "inproc", "mailbox of rank {} not found", r);
      }
    }
    my_id_ = mine.id;
    return kOk;
  }

  Status shutdown(Bootstrap &bootstrap) override {
    Status s = bootstrap.barrier();
    shut_down_ = true;
    {
      std::lock_guard<std::mutex> lock(g_registry_mutex);
      g_registry.erase(my_id_);
    }
    return s;
  }

  Status send(int peer, uint64_t tag, const void *buf, size_t bytes,
              TransportRequest *req) override {
    if (peer < 0 || peer >= size_ || peer == rank_) {
      return fail(QUORUM_ERR_INVALID_ARG, "inproc", "send to invalid peer {}", peer);
    }
    req->peer = peer;
    Mailbox &dst = *peers_[peer];
    std::unique_lock<std::mutex> lock(dst.mutex);
    if (dst.dead.load()) {
      req->complete(fail(QUORUM_ERR_PEER_FAILED, "inproc", "send to rank {}: rank is gone", peer));
      return kOk;
    }
    for (auto it = dst.posted.begin(); it != dst.posted.end(); ++it) {
      if (it->source == rank_ && it->tag == tag) {
        PostedRecv r = *it;
        dst.posted.erase(it);
        Status s = deliver(r, buf, bytes, rank_);
        req->complete(s);
        lock.unlock();
        dst.signal();
        return kOk;
      }
    }
    Unexpected u;
    u.source = rank_;
    u.tag = tag;
    u.bytes = bytes;
    if (bytes <= eager_) {
      u.data.assign(static_cast<const uint8_t *>(buf), static_cast<const uint8_t *>(buf) + bytes);
      req->complete(kOk);
    } else {
      u.sender_buf = buf;
      u.send_req = req;
      u.sender_box = box_;
      req->impl = &dst;
    }
    dst.unexpected.push_back(std::move(u));
    lock.unlock();
    dst.signal();
    return kOk;
  }

  Status recv(int peer, uint64_t tag, void *buf, size_t bytes, TransportRequest *req) override {
    if (peer < 0 || peer >= size_ || peer == rank_) {
      return fail(QUORUM_ERR_INVALID_ARG, "inproc", "recv from invalid peer {}", peer);
    }
    req->peer = peer;
    std::unique_lock<std::mutex> lock(box_->mutex);
    for (auto it = box_->unexpected.begin(); it != box_->unexpected.end(); ++it) {
      if (it->source != peer || it->tag != tag) continue;
      Unexpected u = std::move(*it);
      box_->unexpected.erase(it);
      lock.unlock();
      PostedRecv r{peer, tag, buf, bytes, req};
      if (u.send_req) {
        Status s = deliver(r, u.sender_buf, u.bytes, peer);
        u.send_req->complete(s);
        u.sender_box->signal();
      } else {
        deliver(r, u.data.data(), u.bytes, peer);
      }
      return kOk;
    }
    if (box_->dead_sources[peer]) {
      req->complete(
          fail(QUORUM_ERR_PEER_FAILED, "inproc", "recv from rank {}: rank is gone", peer));
      return kOk;
    }
    box_->posted.push_back(PostedRecv{peer, tag, buf, bytes, req});
    req->impl = box_.get();
    return kOk;
  }

  void cancel(TransportRequest *req) override {
    if (!req->pending()) return;
    Mailbox *box = static_cast<Mailbox *>(req->impl);
    if (!box) return;
    std::lock_guard<std::mutex> lock(box->mutex);
    for (auto it = box->posted.begin(); it != box->posted.end(); ++it) {
      if (it->req == req) {
        box->posted.erase(it);
        req->complete(QUORUM_ERR_TIMEOUT);
        return;
      }
    }
    for (auto it = box->unexpected.begin(); it != box->unexpected.end(); ++it) {
      if (it->send_req == req) {
        box->unexpected.erase(it);
        req->complete(QUORUM_ERR_TIMEOUT);
        return;
      }
    }
  }

  bool progress() override {
    uint64_t v = 0;
    return read(box_->efd, &v, sizeof(v)) == sizeof(v) && v > 0;
  }
  int event_fd() override { return box_ ? box_->efd : -1; }
  bool arm() override { return true; }

  bool peer_failed(int peer) const override {
    return peer >= 0 && peer < size_ && peers_[peer] && peers_[peer]->dead.load();
  }
  int failed_peer() const override {
    for (int r = 0; r < size_; ++r) {
      if (r != rank_ && peer_failed(r)) return r;
    }
    return -1;
  }

  void mark_dead() {
    box_->dead.store(true);
    for (int r = 0; r < size_; ++r) {
      if (r == rank_ || !peers_[r]) continue;
      Mailbox &peer = *peers_[r];
      {
        std::lock_guard<std::mutex> lock(peer.mutex);
        peer.dead_sources[rank_] = true;
        for (auto it = peer.posted.begin(); it != peer.posted.end();) {
          if (it->source == rank_) {
            it->req->complete(fail(QUORUM_ERR_PEER_FAILED, "inproc",
                                   "rank {} failed while rank {} waited for a message from it",
                                   rank_, r));
            it = peer.posted.erase(it);
          } else {
            ++it;
          }
        }
        // Our rendezvous sends queued there can no longer be read.
        for (auto it = peer.unexpected.begin(); it != peer.unexpected.end();) {
          if (it->source == rank_ && it->send_req) {
            it->send_req->complete(QUORUM_ERR_PEER_FAILED);
            it = peer.unexpected.erase(it);
          } else {
            ++it;
          }
        }
      }
      peer.signal();
    }
    // Fail what we were waiting for ourselves, and sends parked at peers.
    std::lock_guard<std::mutex> lock(box_->mutex);
    for (auto &r : box_->posted) r.req->complete(QUORUM_ERR_PEER_FAILED);
    box_->posted.clear();
    // Peers' large sends parked here will never be read: fail them, or their
    // senders would wait for them forever.
    for (auto &u : box_->unexpected) {
      if (u.send_req) {
        u.send_req->complete(QUORUM_ERR_PEER_FAILED);
        u.sender_box->signal();
      }
    }
    box_->unexpected.clear();
  }

 private:
  std::shared_ptr<Mailbox> box_;
  std::vector<std::shared_ptr<Mailbox>> peers_;
  size_t eager_ = 16384;
  uint64_t my_id_ = 0;
  bool shut_down_ = false;
};

}  // namespace

std::unique_ptr<Transport> make_inproc_transport() {
  return std::make_unique<InprocTransport>();
}

void inproc_simulate_failure(Transport &transport) {
  static_cast<InprocTransport &>(transport).mark_dead();
}

}  // namespace quorum
