// tcp_store.hpp: a small TCP key-value store through which the ranks of a job
// started by quorum-run exchange their bootstrap blobs (like torchrun's store).
//
// TcpStoreServer runs one thread that serves any number of clients with poll().
// Every connection must first present the per-job token; every length the
// server reads is bounded, and a malformed or unauthenticated connection is
// logged and closed while the others are still served.
// TcpStoreClient is a blocking client: each call waits at most until its deadline.
//
// Wire format (all integers little-endian), one header per message:
//   u32 magic 'QRST' | u16 version | u16 op | u32 key_len | u32 value_len | u64 arg
// followed by key_len bytes of key and value_len bytes of value.
// The first message on a connection is Auth (value = token). Get's arg is the
// time in ms the server may wait for the key to appear (UINT64_MAX: forever);
// Add's arg is the signed delta. Replies use the same header with op = a
// StoreReply code; Add's reply carries the new counter in arg.
#pragma once

#include <atomic>
#include <cstdint>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "runtime/clock.hpp"
#include "runtime/knobs.hpp"
#include "runtime/status.hpp"

namespace quorum {

namespace store_wire {
constexpr uint32_t kMagic = 0x54535251;  // "QRST" read as little-endian bytes
constexpr uint16_t kVersion = 1;
constexpr size_t kHeaderBytes = 24;
constexpr uint32_t kMaxKeyBytes = 4096;
constexpr uint32_t kMaxTokenBytes = 256;
constexpr uint64_t kWaitForever = UINT64_MAX;

enum Op : uint16_t { kAuth = 1, kSet = 2, kGet = 3, kAdd = 4, kDelete = 5 };
enum StoreReply : uint16_t {
  kReplyOk = 0x100,
  kReplyNotFound = 0x101,  // Get: key still absent when the wait ended
  kReplyBadRequest = 0x102,
  kReplyAuthFailed = 0x103,
  kReplyNotCounter = 0x104,  // Add on a value that is not an 8-byte counter
};

struct Header {
  uint32_t magic = kMagic;
  uint16_t version = kVersion;
  uint16_t op = 0;
  uint32_t key_len = 0;
  uint32_t value_len = 0;
  uint64_t arg = 0;
};

void encode_header(const Header &h, uint8_t out[kHeaderBytes]);
Header decode_header(const uint8_t in[kHeaderBytes]);
// One whole message: header + key + value.
std::vector<uint8_t> encode_message(uint16_t op, const std::string &key, const void *value,
                                    size_t value_len, uint64_t arg);
}  // namespace store_wire

// Splits "host:port" (or "[v6addr]:port"); false if malformed.
bool parse_host_port(const std::string &address, std::string *host, int *port);

// Largest value the server accepts (QUORUM_STORE_MAX_VALUE, bytes).
extern Knob<int64_t> knob_store_max_value;

class TcpStoreServer {
 public:
  struct Options {
    std::string address = "127.0.0.1:0";  // port 0: an ephemeral port
    std::string token;                    // every client must present it
    int64_t max_value_bytes = -1;         // < 0: QUORUM_STORE_MAX_VALUE
  };
  static Status start(const Options &options, std::unique_ptr<TcpStoreServer> *out);
  ~TcpStoreServer();
  TcpStoreServer(const TcpStoreServer &) = delete;
  TcpStoreServer &operator=(const TcpStoreServer &) = delete;

  // "host:port" clients connect to (the actual port when 0 was asked for).
  const std::string &address() const { return address_; }
  int port() const { return port_; }
  // Connections closed for a bad token, bad framing or oversized lengths.
  uint64_t rejected_connections() const { return rejected_.load(); }
  uint64_t authenticated_connections() const { return authenticated_.load(); }
  // Stops the serving thread (also done by the destructor).
  void stop();

 private:
  struct Impl;
  TcpStoreServer() = default;
  std::unique_ptr<Impl> impl_;
  std::thread thread_;
  std::string address_;
  int port_ = 0;
  std::atomic<uint64_t> rejected_{0};
  std::atomic<uint64_t> authenticated_{0};
};

class TcpStoreClient {
 public:
  // Connects (retrying until `deadline`: the server may start after the
  // client) and authenticates with `token`.
  static Status connect(const std::string &address, const std::string &token, Deadline deadline,
                        std::unique_ptr<TcpStoreClient> *out);
  ~TcpStoreClient();
  TcpStoreClient(const TcpStoreClient &) = delete;
  TcpStoreClient &operator=(const TcpStoreClient &) = delete;

  Status set(const std::string &key, const void *value, size_t bytes);
  Status set(const std::string &key, const std::string &value) {
    return set(key, value.data(), value.size());
  }
  // Waits until `key` exists or `deadline` passes (QUORUM_ERR_TIMEOUT).
  Status get(const std::string &key, std::vector<uint8_t> *value, Deadline deadline);
  // As get, but a key still absent at the deadline is *found = false and kOk
  // (nothing logged), so the caller can report which peer is missing.
  Status try_get(const std::string &key, std::vector<uint8_t> *value, Deadline deadline,
                 bool *found);
  Status wait(const std::string &key, Deadline deadline);
  // Adds `delta` to the 8-byte counter at `key` (absent: 0); returns the new value.
  Status add(const std::string &key, int64_t delta, int64_t *result);
  Status remove(const std::string &key, bool *existed = nullptr);

 private:
  explicit TcpStoreClient(int fd, std::string address) : fd_(fd), address_(std::move(address)) {}
  // Sends one request and reads its reply (value into *value when given).
  Status call(uint16_t op, const std::string &key, const void *value, size_t bytes, uint64_t arg,
              Deadline deadline, store_wire::Header *reply, std::vector<uint8_t> *reply_value);
  int fd_ = -1;
  std::string address_;
};

}  // namespace quorum
