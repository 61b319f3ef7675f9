// tcp_store_client.cpp: the blocking store client; every call waits at most
// until its deadline (see tcp_store.hpp for the protocol).
#include "runtime/bootstrap/tcp_store.hpp"

#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <climits>
#include <cstring>
#include <thread>

namespace quorum {

using namespace store_wire;

namespace {

// Sends or receives exactly `len` bytes before `deadline`; "" or the reason.
std::string send_all(int fd, const uint8_t *p, size_t len, Deadline deadline) {
  while (len > 0) {
    ssize_t n = send(fd, p, len, MSG_NOSIGNAL | MSG_DONTWAIT);
    if (n > 0) {
      p += n;
      len -= static_cast<size_t>(n);
      continue;
    }
    if (n < 0 && errno == EINTR) continue;
    if (n < 0 && errno != EAGAIN && errno != EWOULDBLOCK) return std::strerror(errno);
    if (deadline.expired()) return "timed out sending";
    pollfd pfd{fd, POLLOUT, 0};
    poll(&pfd, 1, deadline.remaining_ms(1000));
  }
  return "";
}

std::string recv_all(int fd, uint8_t *p, size_t len, Deadline deadline, bool *timed_out) {
  *timed_out = false;
  while (len > 0) {
    ssize_t n = recv(fd, p, len, MSG_DONTWAIT);
    if (n > 0) {
      p += n;
      len -= static_cast<size_t>(n);
      continue;
    }
    if (n == 0) return "the store closed the connection";
    if (errno == EINTR) continue;
    if (errno != EAGAIN && errno != EWOULDBLOCK) return std::strerror(errno);
    if (deadline.expired()) {
      *timed_out = true;
      return "timed out waiting for the store's reply";
    }
    pollfd pfd{fd, POLLIN, 0};
    poll(&pfd, 1, deadline.remaining_ms(1000));
  }
  return "";
}

// One non-blocking connect attempt bounded by `deadline`; fd or -1 with *why.
int try_connect(const std::string &host, int port, Deadline deadline, std::string *why,
                bool *retry) {
  *retry = true;
  addrinfo hints{};
  hints.ai_family = AF_UNSPEC;
  hints.ai_socktype = SOCK_STREAM;
  hints.ai_flags = AI_NUMERICSERV;
  addrinfo *res = nullptr;
  std::string port_text = std::to_string(port);
  if (int rc = getaddrinfo(host.c_str(), port_text.c_str(), &hints, &res); rc != 0) {
    *why = fmt::format("cannot resolve '{}': {}", host, gai_strerror(rc));
    *retry = rc == EAI_AGAIN;
    return -1;
  }
  int result = -1;
  for (addrinfo *ai = res; ai != nullptr && result < 0; ai = ai->ai_next) {
    int fd = socket(ai->ai_family, ai->ai_socktype | SOCK_NONBLOCK | SOCK_CLOEXEC, ai->ai_protocol);
    if (fd < 0) {
      *why = std::strerror(errno);
      continue;
    }
    int rc = ::connect(fd, ai->ai_addr, ai->ai_addrlen);
    if (rc != 0 && errno == EINPROGRESS) {
      pollfd pfd{fd, POLLOUT, 0};
      int n;
      while ((n = poll(&pfd, 1, deadline.remaining_ms(1000))) == 0 && !deadline.expired()) {
      }
      if (n > 0) {
        int err = 0;
        socklen_t len = sizeof(err);
        getsockopt(fd, SOL_SOCKET, SO_ERROR, &err, &len);
        errno = err;
        rc = err == 0 ? 0 : -1;
      } else {
        errno = ETIMEDOUT;
        rc = -1;
      }
    }
    if (rc == 0) {
      result = fd;
    } else {
      *why = std::strerror(errno);
      close(fd);
    }
  }
  freeaddrinfo(res);
  return result;
}

// Sends the token and reads the reply header; "" or why the connection failed
// (then connecting again may work: the server may have dropped it unread).
std::string authenticate(int fd, const std::string &token, Deadline deadline, Header *reply) {
  std::vector<uint8_t> msg = encode_message(kAuth, "", token.data(), token.size(), 0);
  std::string why = send_all(fd, msg.data(), msg.size(), deadline);
  uint8_t h[kHeaderBytes];
  bool timed_out = false;
  if (why.empty()) why = recv_all(fd, h, sizeof(h), deadline, &timed_out);
  if (!why.empty()) return "authentication: " + why;
  *reply = decode_header(h);
  if (reply->magic != kMagic || reply->version != kVersion || reply->value_len != 0) {
    return "authentication: malformed reply";
  }
  return "";
}

}  // namespace

Status TcpStoreClient::connect(const std::string &address, const std::string &token,
                               Deadline deadline, std::unique_ptr<TcpStoreClient> *out) {
  std::string host;
  int port = 0;
  if (!parse_host_port(address, &host, &port) || port == 0) {
    return fail(QUORUM_ERR_INVALID_ARG, "store", "store address '{}' is not host:port", address);
  }
  if (token.size() > kMaxTokenBytes) {
    return fail(QUORUM_ERR_INVALID_ARG, "store", "store token of {} bytes (limit {})", token.size(),
                kMaxTokenBytes);
  }
  // Connects and authenticates, again and again with growing pauses until
  // the deadline: the store may not be up yet, or (flooded by other local
  // connections) may drop this one before reading the token.
  int backoff_ms = 10;
  std::string why;
  int attempts = 0;
  for (;;) {
    bool retry = false;
    ++attempts;
    int fd = try_connect(host, port, deadline, &why, &retry);
    if (fd < 0 && !retry) {
      return fail(QUORUM_ERR_BOOTSTRAP, "store", "cannot connect to the store at {}: {}", address,
                  why);
    }
    if (fd >= 0) {
      int one = 1;
      setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
      Header reply;
      why = authenticate(fd, token, deadline, &reply);
      if (why.empty() && reply.op == kReplyOk) {
        out->reset(new TcpStoreClient(fd, address));
        return kOk;
      }
      close(fd);
      if (why.empty()) {
        if (reply.op == kReplyAuthFailed) {
          return fail(QUORUM_ERR_BOOTSTRAP, "store",
                      "the store at {} rejected this process's job token (QUORUM_TOKEN)", address);
        }
        return fail(QUORUM_ERR_BOOTSTRAP, "store", "the store at {} answered {} to authentication",
                    address, reply.op);
      }
    }
    if (deadline.expired()) {
      return fail(QUORUM_ERR_TIMEOUT, "store",
                  "cannot connect to the store at {} after {} attempts: {}", address, attempts,
                  why);
    }
    std::this_thread::sleep_for(
        std::chrono::milliseconds(std::min(backoff_ms, deadline.remaining_ms(200))));
    backoff_ms = std::min(backoff_ms * 2, 200);
  }
}

TcpStoreClient::~TcpStoreClient() {
  if (fd_ >= 0) close(fd_);
}

Status TcpStoreClient::call(uint16_t op, const std::string &key, const void *value, size_t bytes,
                            uint64_t arg, Deadline deadline, Header *reply,
                            std::vector<uint8_t> *reply_value) {
  if (fd_ < 0) {
    return fail(QUORUM_ERR_BOOTSTRAP, "store", "store connection to {} is closed after an error",
                address_);
  }
  if (key.size() > kMaxKeyBytes) {
    return fail(QUORUM_ERR_INVALID_ARG, "store", "store key of {} bytes (limit {})", key.size(),
                kMaxKeyBytes);
  }
  if (bytes > UINT32_MAX) {
    return fail(QUORUM_ERR_INVALID_ARG, "store", "store value of {} bytes is too large", bytes);
  }
  std::vector<uint8_t> msg = encode_message(op, key, value, bytes, arg);
  std::string why = send_all(fd_, msg.data(), msg.size(), deadline);
  bool timed_out = false;
  uint8_t h[kHeaderBytes];
  if (why.empty()) why = recv_all(fd_, h, sizeof(h), deadline, &timed_out);
  if (why.empty()) {
    *reply = decode_header(h);
    if (reply->magic != kMagic || reply->version != kVersion) {
      why = "malformed reply";
    } else if (reply->value_len > static_cast<uint64_t>(knob_store_max_value.get())) {
      why = fmt::format("reply of {} bytes exceeds QUORUM_STORE_MAX_VALUE", reply->value_len);
    } else if (reply->value_len == 0) {
      if (reply_value) reply_value->clear();
    } else {
      std::vector<uint8_t> v(reply->value_len);
      why = recv_all(fd_, v.data(), v.size(), deadline, &timed_out);
      if (reply_value) *reply_value = std::move(v);
    }
  }
  if (!why.empty()) {
    close(fd_);  // the stream is out of step now: no later call may use it
    fd_ = -1;
    return fail(timed_out ? QUORUM_ERR_TIMEOUT : QUORUM_ERR_BOOTSTRAP, "store",
                "store {} (op {}, key '{}', {} bytes): {}", address_, op, key, bytes, why);
  }
  if (reply->op == kReplyBadRequest || reply->op == kReplyAuthFailed) {
    close(fd_);  // the server closes the connection after these
    fd_ = -1;
    if (op == kAuth) {
      return fail(QUORUM_ERR_BOOTSTRAP, "store",
                  "the store at {} rejected this process's job token (QUORUM_TOKEN)", address_);
    }
    return fail(QUORUM_ERR_BOOTSTRAP, "store", "store {} refused op {} on key '{}' ({} bytes)",
                address_, op, key, bytes);
  }
  return kOk;
}

Status TcpStoreClient::set(const std::string &key, const void *value, size_t bytes) {
  Header reply;
  QUORUM_CHECK(
      call(kSet, key, value, bytes, 0, Deadline::after_ms(knob_timeout_ms.get()), &reply, nullptr));
  return kOk;
}

Status TcpStoreClient::try_get(const std::string &key, std::vector<uint8_t> *value,
                               Deadline deadline, bool *found) {
  uint64_t wait_ms =
      deadline.infinite() ? kWaitForever : static_cast<uint64_t>(deadline.remaining_ms(INT_MAX));
  // The server answers NotFound at the deadline; the extra second covers the
  // round trip, so a dead server is still noticed.
  Deadline reply_deadline =
      deadline.infinite() ? deadline : Deadline::after_ms(static_cast<int64_t>(wait_ms) + 1000);
  Header reply;
  QUORUM_CHECK(call(kGet, key, nullptr, 0, wait_ms, reply_deadline, &reply, value));
  *found = reply.op == kReplyOk;
  return kOk;
}

Status TcpStoreClient::get(const std::string &key, std::vector<uint8_t> *value, Deadline deadline) {
  bool found = false;
  QUORUM_CHECK(try_get(key, value, deadline, &found));
  if (!found) {
    return fail(QUORUM_ERR_TIMEOUT, "store", "store {}: key '{}' did not appear in time", address_,
                key);
  }
  return kOk;
}

Status TcpStoreClient::wait(const std::string &key, Deadline deadline) {
  std::vector<uint8_t> ignored;
  return get(key, &ignored, deadline);
}

Status TcpStoreClient::add(const std::string &key, int64_t delta, int64_t *result) {
  Header reply;
  QUORUM_CHECK(call(kAdd, key, nullptr, 0, static_cast<uint64_t>(delta),
                    Deadline::after_ms(knob_timeout_ms.get()), &reply, nullptr));
  if (reply.op == kReplyNotCounter) {
    return fail(QUORUM_ERR_INVALID_ARG, "store", "store {}: key '{}' does not hold a counter",
                address_, key);
  }
  if (result) *result = static_cast<int64_t>(reply.arg);
  return kOk;
}

Status TcpStoreClient::remove(const std::string &key, bool *existed) {
  Header reply;
  QUORUM_CHECK(call(kDelete, key, nullptr, 0, 0, Deadline::after_ms(knob_timeout_ms.get()), &reply,
                    nullptr));
  if (existed) *existed = reply.arg != 0;
  return kOk;
}

}  // namespace quorum
