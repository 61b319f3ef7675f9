// store_bootstrap.cpp: allgather over the TCP store. Round `seq` of rank r is
// the key "ag/<seq>/<r>"; every rank sets its own and then gets all of them.
#include "runtime/bootstrap/store_bootstrap.hpp"

#include <cerrno>
#include <climits>
#include <cstdlib>
#include <cstring>

#include "runtime/bootstrap/tcp_store.hpp"
#include "runtime/clock.hpp"
#include "runtime/knobs.hpp"
#include "runtime/log.hpp"

namespace quorum {

namespace {

class StoreBootstrap : public Bootstrap {
 public:
  StoreBootstrap(const StoreBootstrapParams &p, std::unique_ptr<TcpStoreClient> client)
      : params_(p), client_(std::move(client)) {}
  const char *name() const override { return "store"; }
  int rank() const override { return params_.rank; }
  int size() const override { return params_.size; }

  Status allgather(const void *in, void *out, size_t bytes) override {
    const uint64_t seq = seq_++;
    const int64_t limit_ms = wait_ms();
    Deadline deadline = Deadline::after_ms(limit_ms);
    QUORUM_CHECK(client_->set(key(seq, params_.rank), in, bytes));
    std::vector<uint8_t> value;
    for (int r = 0; r < params_.size; ++r) {
      bool found = false;
      // With a peer watch, wait in slices and ask it in between (only while
      // a key is missing: a peer that has read every key may exit at once).
      for (;;) {
        Deadline slice = deadline;
        if (has_peer_watch() && (deadline.infinite() || deadline.remaining_ms(INT_MAX) > 250)) {
          slice = Deadline::after_ms(250);
        }
        QUORUM_CHECK(client_->try_get(key(seq, r), &value, slice, &found));
        if (found || deadline.expired()) break;
        const int dead = failed_peer();
        if (dead >= 0) {
          return fail(
              QUORUM_ERR_PEER_FAILED, "bootstrap",
              "store allgather #{}: rank {} of {} waits for rank {}, but rank {} has failed", seq,
              params_.rank, params_.size, r, dead);
        }
      }
      if (!found) {
        return fail(QUORUM_ERR_TIMEOUT, "bootstrap",
                    "store allgather #{}: rank {} of {} waited {} ms for rank {}", seq,
                    params_.rank, params_.size, limit_ms, r);
      }
      if (value.size() != bytes) {
        return fail(QUORUM_ERR_MISMATCH, "bootstrap",
                    "store allgather #{}: rank {} passed {} bytes, rank {} passed {}", seq,
                    params_.rank, bytes, r, value.size());
      }
      if (bytes > 0) std::memcpy(static_cast<uint8_t *>(out) + r * bytes, value.data(), bytes);
    }
    // Every rank has now entered round seq, so all have finished reading round
    // seq-1: our key of that round can go, which bounds the store's memory.
    if (seq > 0) QUORUM_CHECK(client_->remove(key(seq - 1, params_.rank)));
    return kOk;
  }

 private:
  std::string key(uint64_t seq, int rank) const {
    return fmt::format("{}ag/{}/{}", params_.key_prefix, seq, rank);
  }
  StoreBootstrapParams params_;
  std::unique_ptr<TcpStoreClient> client_;
  uint64_t seq_ = 0;
};

// Parses a whole decimal int; false if absent is not the problem but the text.
bool parse_int(const char *text, int *out) {
  errno = 0;
  char *end = nullptr;
  long v = std::strtol(text, &end, 10);
  if (*text == '\0' || errno != 0 || *end != '\0' || v < INT_MIN || v > INT_MAX) return false;
  *out = static_cast<int>(v);
  return true;
}

}  // namespace

Status store_params_from_environment(StoreBootstrapParams *params) {
  const char *rank = std::getenv("QUORUM_RANK");
  const char *size = std::getenv("QUORUM_SIZE");
  const char *store = std::getenv("QUORUM_STORE");
  const char *token = std::getenv("QUORUM_TOKEN");
  if (rank == nullptr) {
    return fail(QUORUM_ERR_BOOTSTRAP, "bootstrap",
                "store bootstrap needs QUORUM_RANK (set by quorum-run), which is not set");
  }
  StoreBootstrapParams p;
  if (!parse_int(rank, &p.rank)) {
    return fail(QUORUM_ERR_INVALID_ARG, "bootstrap", "QUORUM_RANK='{}' is not an integer", rank);
  }
  if (size == nullptr) {
    return fail(QUORUM_ERR_BOOTSTRAP, "bootstrap", "QUORUM_RANK is set but QUORUM_SIZE is not");
  }
  if (!parse_int(size, &p.size) || p.size < 1) {
    return fail(QUORUM_ERR_INVALID_ARG, "bootstrap", "QUORUM_SIZE='{}' is not a positive integer",
                size);
  }
  if (p.rank < 0 || p.rank >= p.size) {
    return fail(QUORUM_ERR_INVALID_ARG, "bootstrap",
                "QUORUM_RANK={} is outside [0, QUORUM_SIZE={})", p.rank, p.size);
  }
  if (store == nullptr || *store == '\0') {
    return fail(QUORUM_ERR_BOOTSTRAP, "bootstrap",
                "QUORUM_RANK is set but QUORUM_STORE (host:port of the store) is not");
  }
  std::string host;
  int port = 0;
  if (!parse_host_port(store, &host, &port) || port == 0) {
    return fail(QUORUM_ERR_INVALID_ARG, "bootstrap", "QUORUM_STORE='{}' is not host:port", store);
  }
  if (token == nullptr) {
    return fail(QUORUM_ERR_BOOTSTRAP, "bootstrap",
                "QUORUM_RANK is set but QUORUM_TOKEN (the job's store token) is not");
  }
  p.address = store;
  p.token = token;
  *params = std::move(p);
  return kOk;
}

Status make_store_bootstrap(const StoreBootstrapParams &params, std::unique_ptr<Bootstrap> *out) {
  if (params.size < 1 || params.rank < 0 || params.rank >= params.size) {
    return fail(QUORUM_ERR_INVALID_ARG, "bootstrap", "store bootstrap: rank {} of size {}",
                params.rank, params.size);
  }
  std::unique_ptr<TcpStoreClient> client;
  QUORUM_CHECK(TcpStoreClient::connect(params.address, params.token,
                                       Deadline::after_ms(knob_timeout_ms.get()), &client));
  QLOG_DEBUG("bootstrap", "store bootstrap: rank {} of {} connected to {}", params.rank,
             params.size, params.address);
  *out = std::make_unique<StoreBootstrap>(params, std::move(client));
  return kOk;
}

}  // namespace quorum
