// tcp_store.cpp: the wire format, the poll()-driven store server and the
// blocking store client (see tcp_store.hpp for the protocol).
#include "runtime/bootstrap/tcp_store.hpp"

#include <arpa/inet.h>
#include <fcntl.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <sys/eventfd.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <climits>
#include <cstring>
#include <map>
#include <thread>
#include <unordered_map>

#include "runtime/log.hpp"

namespace quorum {

Knob<int64_t> knob_store_max_value("QUORUM_STORE_MAX_VALUE", int64_t{64} << 20,
                                   "Largest value in bytes the TCP bootstrap store accepts; a "
                                   "longer message closes the connection");

namespace store_wire {

namespace {
void put_u16(uint8_t *p, uint16_t v) {
  p[0] = static_cast<uint8_t>(v);
  p[1] = static_cast<uint8_t>(v >> 8);
}
void put_u32(uint8_t *p, uint32_t v) {
  for (int i = 0; i < 4; ++i) p[i] = static_cast<uint8_t>(v >> (8 * i));
}
void put_u64(uint8_t *p, uint64_t v) {
  for (int i = 0; i < 8; ++i) p[i] = static_cast<uint8_t>(v >> (8 * i));
}
uint16_t get_u16(const uint8_t *p) {
  return static_cast<uint16_t>(p[0] | (p[1] << 8));
}
uint32_t get_u32(const uint8_t *p) {
  uint32_t v = 0;
  for (int i = 3; i >= 0; --i) v = (v << 8) | p[i];
  return v;
}
uint64_t get_u64(const uint8_t *p) {
  uint64_t v = 0;
  for (int i = 7; i >= 0; --i) v = (v << 8) | p[i];
  return v;
}
}  // namespace

void encode_header(const Header &h, uint8_t out[kHeaderBytes]) {
  put_u32(out, h.magic);
  put_u16(out + 4, h.version);
  put_u16(out + 6, h.op);
  put_u32(out + 8, h.key_len);
  put_u32(out + 12, h.value_len);
  put_u64(out + 16, h.arg);
}

Header decode_header(const uint8_t in[kHeaderBytes]) {
  Header h;
  h.magic = get_u32(in);
  h.version = get_u16(in + 4);
  h.op = get_u16(in + 6);
  h.key_len = get_u32(in + 8);
  h.value_len = get_u32(in + 12);
  h.arg = get_u64(in + 16);
  return h;
}

std::vector<uint8_t> encode_message(uint16_t op, const std::string &key, const void *value,
                                    size_t value_len, uint64_t arg) {
  Header h;
  h.op = op;
  h.key_len = static_cast<uint32_t>(key.size());
  h.value_len = static_cast<uint32_t>(value_len);
  h.arg = arg;
  std::vector<uint8_t> msg(kHeaderBytes + key.size() + value_len);
  encode_header(h, msg.data());
  std::memcpy(msg.data() + kHeaderBytes, key.data(), key.size());
  if (value_len > 0) std::memcpy(msg.data() + kHeaderBytes + key.size(), value, value_len);
  return msg;
}

}  // namespace store_wire

using namespace store_wire;

bool parse_host_port(const std::string &address, std::string *host, int *port) {
  size_t colon = address.rfind(':');
  if (colon == std::string::npos || colon == 0 || colon + 1 == address.size()) return false;
  std::string h = address.substr(0, colon);
  if (h.front() == '[') {
    if (h.size() < 3 || h.back() != ']') return false;
    h = h.substr(1, h.size() - 2);
  } else if (h.find(':') != std::string::npos) {
    return false;  // a bare IPv6 address needs brackets
  }
  const std::string p = address.substr(colon + 1);
  if (p.size() > 5 || p.find_first_not_of("0123456789") != std::string::npos) return false;
  int value = std::stoi(p);
  if (value > 65535) return false;
  *host = h;
  *port = value;
  return true;
}

namespace {

std::string errno_text(int err) {
  return std::strerror(err);
}

std::string peer_name(int fd) {
  sockaddr_storage ss{};
  socklen_t len = sizeof(ss);
  if (getpeername(fd, reinterpret_cast<sockaddr *>(&ss), &len) != 0) return "?";
  char host[NI_MAXHOST], serv[NI_MAXSERV];
  if (getnameinfo(reinterpret_cast<sockaddr *>(&ss), len, host, sizeof(host), serv, sizeof(serv),
                  NI_NUMERICHOST | NI_NUMERICSERV) != 0) {
    return "?";
  }
  return std::string(host) + ":" + serv;
}

bool tokens_equal(const std::string &a, const std::string &b) {
  // Constant time in the content, so the token cannot be guessed byte by byte.
  unsigned diff = a.size() == b.size() ? 0u : 1u;
  for (size_t i = 0; i < b.size(); ++i) {
    diff |= static_cast<unsigned>(static_cast<uint8_t>(i < a.size() ? a[i] : 0) ^
                                  static_cast<uint8_t>(b[i]));
  }
  return diff == 0;
}

// A deadline that is at most `ms` away; UINT64_MAX or absurdly long: never.
Clock::time_point wait_until(uint64_t ms, bool *forever) {
  *forever = ms >= (uint64_t{1} << 40);
  return *forever ? Clock::time_point::max() : Clock::now() + std::chrono::milliseconds(ms);
}

constexpr int kMaxConnections = 4096;
constexpr int kAuthTimeoutMs = 10000;  // an idle unauthenticated connection is dropped
// Connections that have not sent the token yet. A rank sends it right after
// connecting, so a few suffice; beyond this the oldest is dropped, so that
// idle connections (any local user can open them) cannot fill the slots or
// the process's fds and keep the ranks out.
constexpr size_t kMaxUnauthenticated = 64;

}  // namespace

struct TcpStoreServer::Impl {
  struct Conn {
    uint64_t id = 0;
    int fd = -1;
    std::string peer;
    bool authed = false;
    Clock::time_point auth_deadline;
    uint8_t header_bytes[kHeaderBytes] = {};
    size_t header_got = 0;
    bool have_header = false;
    Header header;
    std::vector<uint8_t> body;
    size_t body_got = 0;
    std::vector<uint8_t> out;
    size_t out_sent = 0;
    bool waiting = false;  // a Get is parked until its key appears
    std::string wait_key;
    bool wait_forever = false;
    Clock::time_point wait_deadline;
  };

  TcpStoreServer *owner = nullptr;
  int listen_fd = -1;
  int wake_fd = -1;
  std::string token;
  uint64_t max_value = 0;
  std::atomic<bool> stopping{false};
  uint64_t next_id = 1;
  Clock::time_point accept_resume{};  // out of fds: stop accepting until then
  bool warned_unauthenticated = false;
  std::map<uint64_t, std::unique_ptr<Conn>> conns;
  std::unordered_map<std::string, std::vector<uint8_t>> data;
  std::unordered_map<std::string, std::vector<uint64_t>> waiters;

  ~Impl() {
    for (auto &[id, c] : conns) close(c->fd);
    if (listen_fd >= 0) close(listen_fd);
    if (wake_fd >= 0) close(wake_fd);
  }

  void run() {
    std::vector<pollfd> fds;
    std::vector<uint64_t> ids;
    while (!stopping.load()) {
      fds.clear();
      ids.clear();
      fds.push_back({wake_fd, POLLIN, 0});
      Clock::time_point next = Clock::time_point::max();
      bool accepting = conns.size() < kMaxConnections;
      if (accepting && accept_resume > Clock::now()) {
        accepting = false;
        next = accept_resume;
      }
      fds.push_back({listen_fd, static_cast<short>(accepting ? POLLIN : 0), 0});
      for (auto &[id, c] : conns) {
        short ev = 0;
        if (c->out_sent < c->out.size()) {
          ev |= POLLOUT;  // no new requests until the last reply is written
        } else if (c->waiting) {
          ev |= POLLRDHUP;  // only notice the client leaving
          if (!c->wait_forever && c->wait_deadline < next) next = c->wait_deadline;
        } else {
          ev |= POLLIN;
        }
        if (!c->authed && c->auth_deadline < next) next = c->auth_deadline;
        fds.push_back({c->fd, ev, 0});
        ids.push_back(id);
      }
      int timeout = -1;
      if (next != Clock::time_point::max()) {
        auto ms =
            std::chrono::duration_cast<std::chrono::milliseconds>(next - Clock::now()).count();
        timeout = ms < 0 ? 0 : static_cast<int>(std::min<int64_t>(ms + 1, INT_MAX));
      }
      int n = poll(fds.data(), fds.size(), timeout);
      if (n < 0 && errno != EINTR) {
        QLOG_ERROR("store", "store server: poll failed: {}", errno_text(errno));
        return;
      }
      if (stopping.load()) return;
      if (n > 0 && (fds[1].revents & POLLIN)) accept_all();
      for (size_t i = 0; i < ids.size(); ++i) {
        short re = fds[i + 2].revents;
        if (re == 0) continue;
        auto it = conns.find(ids[i]);
        if (it == conns.end()) continue;  // closed while serving another
        Conn &c = *it->second;
        if (re & POLLOUT) {
          if (!flush(c)) continue;
        }
        bool busy = c.waiting || c.out_sent < c.out.size();
        if ((re & POLLERR) || (busy && (re & (POLLRDHUP | POLLHUP)))) {
          close_conn(ids[i]);  // the client left; nobody is there to answer
          continue;
        }
        if ((re & (POLLIN | POLLHUP)) && !busy) read_requests(ids[i]);
      }
      expire_timers();
    }
  }

  void accept_all() {
    for (;;) {
      int fd = accept4(listen_fd, nullptr, nullptr, SOCK_NONBLOCK | SOCK_CLOEXEC);
      if (fd < 0) {
        if (errno == EMFILE || errno == ENFILE || errno == ENOBUFS || errno == ENOMEM) {
          // The listening socket stays readable: pause instead of spinning.
          QLOG_WARN("store", "store server: accept failed: {}; pausing new connections",
                    errno_text(errno));
          accept_resume = Clock::now() + std::chrono::milliseconds(100);
        } else if (errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR &&
                   errno != ECONNABORTED) {
          QLOG_WARN("store", "store server: accept failed: {}", errno_text(errno));
        }
        return;
      }
      int one = 1;
      setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
      auto c = std::make_unique<Conn>();
      c->id = next_id;
      c->fd = fd;
      c->peer = peer_name(fd);
      c->auth_deadline = Clock::now() + std::chrono::milliseconds(kAuthTimeoutMs);
      conns.emplace(next_id++, std::move(c));
      drop_oldest_unauthenticated();
      if (conns.size() >= kMaxConnections) return;
    }
  }

  // Closes the oldest connections still without the token while there are
  // more than kMaxUnauthenticated (ids grow with time: the map is in age order).
  void drop_oldest_unauthenticated() {
    size_t unauthenticated = 0;
    for (const auto &entry : conns) unauthenticated += entry.second->authed ? 0 : 1;
    for (auto it = conns.begin(); unauthenticated > kMaxUnauthenticated && it != conns.end();) {
      auto next = std::next(it);
      if (!it->second->authed) {
        if (!warned_unauthenticated) {  // once: whoever opens them should not flood the log
          QLOG_WARN("store",
                    "store server: more than {} connections without the token; dropping the "
                    "oldest (first from {})",
                    kMaxUnauthenticated, it->second->peer);
          warned_unauthenticated = true;
        }
        close_conn(it->first);
        owner->rejected_.fetch_add(1);
        --unauthenticated;
      }
      it = next;
    }
  }

  void close_conn(uint64_t id) {
    auto it = conns.find(id);
    if (it == conns.end()) return;
    Conn &c = *it->second;
    if (c.waiting) drop_waiter(c.wait_key, id);
    close(c.fd);
    conns.erase(it);
  }

  void drop_waiter(const std::string &key, uint64_t id) {
    auto w = waiters.find(key);
    if (w == waiters.end()) return;
    auto &v = w->second;
    for (size_t i = 0; i < v.size(); ++i) {
      if (v[i] == id) {
        v.erase(v.begin() + static_cast<std::ptrdiff_t>(i));
        break;
      }
    }
    if (v.empty()) waiters.erase(w);
  }

  // Logs why, tries to tell the client, and closes the connection.
  void reject(uint64_t id, uint16_t reply, const std::string &why) {
    Conn &c = *conns.at(id);
    QLOG_WARN("store", "store server: closing connection from {}: {}", c.peer, why);
    uint8_t h[kHeaderBytes];
    Header r;
    r.op = reply;
    encode_header(r, h);
    owner->rejected_.fetch_add(1);  // before the reply, so a client that saw it sees the count
    ssize_t ignored = send(c.fd, h, sizeof(h), MSG_NOSIGNAL | MSG_DONTWAIT);
    (void)ignored;
    // Closing with unread input makes the kernel reset the connection, which
    // can destroy the reply in flight: discard what has already arrived (bounded).
    uint8_t sink[4096];
    for (int i = 0; i < 16 && recv(c.fd, sink, sizeof(sink), MSG_DONTWAIT) > 0; ++i) {
    }
    close_conn(id);
  }

  // Writes pending output; false if the connection was closed.
  bool flush(Conn &c) {
    while (c.out_sent < c.out.size()) {
      ssize_t n = send(c.fd, c.out.data() + c.out_sent, c.out.size() - c.out_sent,
                       MSG_NOSIGNAL | MSG_DONTWAIT);
      if (n > 0) {
        c.out_sent += static_cast<size_t>(n);
        continue;
      }
      if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) return true;
      if (n < 0 && errno == EINTR) continue;
      QLOG_DEBUG("store", "store server: client {} went away while replying", c.peer);
      close_conn(c.id);
      return false;
    }
    c.out.clear();
    c.out_sent = 0;
    return true;
  }

  void reply(Conn &c, uint16_t code, uint64_t arg, const std::vector<uint8_t> *value) {
    Header h;
    h.op = code;
    h.arg = arg;
    h.value_len = value ? static_cast<uint32_t>(value->size()) : 0;
    size_t start = c.out.size();
    c.out.resize(start + kHeaderBytes + h.value_len);
    encode_header(h, c.out.data() + start);
    if (h.value_len > 0)
      std::memcpy(c.out.data() + start + kHeaderBytes, value->data(), h.value_len);
  }

  // Reads and serves whole requests until the socket runs dry, a Get parks or
  // a reply is pending.
  void read_requests(uint64_t id) {
    for (;;) {
      auto it = conns.find(id);
      if (it == conns.end()) return;
      Conn &c = *it->second;
      if (c.waiting || c.out_sent < c.out.size()) return;
      uint8_t *dst;
      size_t want;
      if (!c.have_header) {
        dst = c.header_bytes + c.header_got;
        want = kHeaderBytes - c.header_got;
      } else {
        dst = c.body.data() + c.body_got;
        want = c.body.size() - c.body_got;
      }
      if (want > 0) {
        ssize_t n = recv(c.fd, dst, want, MSG_DONTWAIT);
        if (n < 0 && errno == EINTR) continue;
        if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) return;
        if (n <= 0) {
          bool midway = c.have_header || c.header_got > 0;
          if (midway) {
            reject(id, kReplyBadRequest, "connection closed in the middle of a message");
          } else if (n < 0) {
            QLOG_DEBUG("store", "store server: recv from {}: {}", c.peer, errno_text(errno));
            close_conn(id);
          } else {
            close_conn(id);
          }
          return;
        }
        if (!c.have_header) {
          size_t before = c.header_got;
          c.header_got += static_cast<size_t>(n);
          // Reject a wrong magic as soon as it is visible, not only after 24 bytes.
          if (before < 4 && c.header_got >= 4 && decode_header(c.header_bytes).magic != kMagic) {
            reject(id, c.authed ? kReplyBadRequest : kReplyAuthFailed,
                   fmt::format("bad magic 0x{:08x}", decode_header(c.header_bytes).magic));
            return;
          }
          if (c.header_got < kHeaderBytes) continue;
          c.header = decode_header(c.header_bytes);
          std::string why = check_header(c);
          if (!why.empty()) {
            reject(id, c.authed ? kReplyBadRequest : kReplyAuthFailed, why);
            return;
          }
          c.have_header = true;
          c.body.assign(static_cast<size_t>(c.header.key_len) + c.header.value_len, 0);
          c.body_got = 0;
          if (!c.body.empty()) continue;
        } else {
          c.body_got += static_cast<size_t>(n);
          if (c.body_got < c.body.size()) continue;
        }
      }
      c.have_header = false;
      c.header_got = 0;
      if (!serve(id, c)) return;
      if (!flush(c)) return;
    }
  }

  // Bounds every length before anything is allocated; "" if acceptable.
  std::string check_header(const Conn &c) {
    const Header &h = c.header;
    if (h.magic != kMagic) return fmt::format("bad magic 0x{:08x}", h.magic);
    if (h.version != kVersion) return fmt::format("unsupported protocol version {}", h.version);
    if (!c.authed) {
      if (h.op != kAuth) return fmt::format("op {} before authentication", h.op);
      if (h.key_len != 0 || h.value_len > kMaxTokenBytes) {
        return fmt::format("auth message with key {} / token {} bytes", h.key_len, h.value_len);
      }
      return "";
    }
    if (h.op < kSet || h.op > kDelete) return fmt::format("unknown op {}", h.op);
    if (h.key_len > kMaxKeyBytes) {
      return fmt::format("key of {} bytes (limit {})", h.key_len, kMaxKeyBytes);
    }
    if (h.op == kSet && h.value_len > max_value) {
      return fmt::format("value of {} bytes (limit {}, QUORUM_STORE_MAX_VALUE)", h.value_len,
                         max_value);
    }
    if (h.op != kSet && h.value_len != 0) {
      return fmt::format("op {} with a value of {} bytes", h.op, h.value_len);
    }
    return "";
  }

  // Serves one complete request; false if the connection was closed.
  bool serve(uint64_t id, Conn &c) {
    const Header &h = c.header;
    std::string key(reinterpret_cast<const char *>(c.body.data()), h.key_len);
    switch (h.op) {
      case kAuth: {
        std::string presented(reinterpret_cast<const char *>(c.body.data()), h.value_len);
        if (!tokens_equal(presented, token)) {
          reject(id, kReplyAuthFailed, "wrong job token");
          return false;
        }
        c.authed = true;
        owner->authenticated_.fetch_add(1);
        reply(c, kReplyOk, 0, nullptr);
        break;
      }
      case kSet: {
        std::vector<uint8_t> value(c.body.begin() + h.key_len, c.body.end());
        data[key] = std::move(value);
        reply(c, kReplyOk, 0, nullptr);
        wake(key);
        break;
      }
      case kGet: {
        auto it = data.find(key);
        if (it != data.end()) {
          reply(c, kReplyOk, 0, &it->second);
        } else if (h.arg == 0) {
          reply(c, kReplyNotFound, 0, nullptr);
        } else {
          c.waiting = true;
          c.wait_key = key;
          c.wait_deadline = wait_until(h.arg, &c.wait_forever);
          waiters[key].push_back(id);
        }
        break;
      }
      case kAdd: {
        auto it = data.find(key);
        int64_t current = 0;
        if (it != data.end()) {
          if (it->second.size() != 8) {
            reply(c, kReplyNotCounter, 0, nullptr);
            break;
          }
          std::memcpy(&current, it->second.data(), 8);
        }
        current += static_cast<int64_t>(h.arg);
        std::vector<uint8_t> value(8);
        std::memcpy(value.data(), &current, 8);
        data[key] = std::move(value);
        reply(c, kReplyOk, static_cast<uint64_t>(current), nullptr);
        wake(key);
        break;
      }
      case kDelete: {
        bool existed = data.erase(key) > 0;
        reply(c, kReplyOk, existed ? 1 : 0, nullptr);
        break;
      }
    }
    c.body.clear();
    c.body.shrink_to_fit();
    return true;
  }

  // Answers every Get parked on `key`.
  void wake(const std::string &key) {
    auto w = waiters.find(key);
    if (w == waiters.end()) return;
    std::vector<uint64_t> ids = std::move(w->second);
    waiters.erase(w);
    const std::vector<uint8_t> &value = data.at(key);
    for (uint64_t wid : ids) {
      auto it = conns.find(wid);
      if (it == conns.end()) continue;
      Conn &c = *it->second;
      c.waiting = false;
      reply(c, kReplyOk, 0, &value);
      flush(c);
    }
  }

  void expire_timers() {
    Clock::time_point now = Clock::now();
    std::vector<uint64_t> expired_auth;
    for (auto &[id, c] : conns) {
      if (!c->authed && c->auth_deadline <= now) expired_auth.push_back(id);
    }
    for (uint64_t id : expired_auth) reject(id, kReplyAuthFailed, "no authentication in time");
    std::vector<uint64_t> expired_wait;
    for (auto &[id, c] : conns) {
      if (c->waiting && !c->wait_forever && c->wait_deadline <= now) expired_wait.push_back(id);
    }
    for (uint64_t id : expired_wait) {
      Conn &c = *conns.at(id);
      drop_waiter(c.wait_key, id);
      c.waiting = false;
      reply(c, kReplyNotFound, 0, nullptr);
      flush(c);
    }
  }
};

Status TcpStoreServer::start(const Options &options, std::unique_ptr<TcpStoreServer> *out) {
  std::string host;
  int port = 0;
  if (!parse_host_port(options.address, &host, &port)) {
    return fail(QUORUM_ERR_INVALID_ARG, "store", "store server address '{}' is not host:port",
                options.address);
  }
  if (options.token.size() > kMaxTokenBytes) {
    return fail(QUORUM_ERR_INVALID_ARG, "store", "store token of {} bytes (limit {})",
                options.token.size(), kMaxTokenBytes);
  }
  addrinfo hints{};
  hints.ai_family = AF_UNSPEC;
  hints.ai_socktype = SOCK_STREAM;
  hints.ai_flags = AI_PASSIVE | AI_NUMERICSERV;
  addrinfo *res = nullptr;
  std::string port_text = std::to_string(port);
  if (int rc = getaddrinfo(host.c_str(), port_text.c_str(), &hints, &res); rc != 0) {
    return fail(QUORUM_ERR_BOOTSTRAP, "store", "store server: cannot resolve '{}': {}", host,
                gai_strerror(rc));
  }
  std::unique_ptr<TcpStoreServer> server(new TcpStoreServer());
  auto impl = std::make_unique<Impl>();
  impl->owner = server.get();
  impl->token = options.token;
  int64_t max_value =
      options.max_value_bytes >= 0 ? options.max_value_bytes : knob_store_max_value.get();
  impl->max_value =
      static_cast<uint64_t>(std::min<int64_t>(std::max<int64_t>(max_value, 0), UINT32_MAX));
  std::string last_error = "no address";
  for (addrinfo *ai = res; ai != nullptr; ai = ai->ai_next) {
    int fd = socket(ai->ai_family, ai->ai_socktype | SOCK_NONBLOCK | SOCK_CLOEXEC, ai->ai_protocol);
    if (fd < 0) {
      last_error = errno_text(errno);
      continue;
    }
    int one = 1;
    setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
    if (bind(fd, ai->ai_addr, ai->ai_addrlen) != 0 || listen(fd, 1024) != 0) {
      last_error = errno_text(errno);
      close(fd);
      continue;
    }
    impl->listen_fd = fd;
    break;
  }
  freeaddrinfo(res);
  if (impl->listen_fd < 0) {
    return fail(QUORUM_ERR_BOOTSTRAP, "store", "store server: cannot listen on {}: {}",
                options.address, last_error);
  }
  sockaddr_storage ss{};
  socklen_t len = sizeof(ss);
  getsockname(impl->listen_fd, reinterpret_cast<sockaddr *>(&ss), &len);
  server->port_ = ntohs(ss.ss_family == AF_INET6 ? reinterpret_cast<sockaddr_in6 *>(&ss)->sin6_port
                                                 : reinterpret_cast<sockaddr_in *>(&ss)->sin_port);
  bool v6 = host.find(':') != std::string::npos;
  server->address_ = (v6 ? "[" + host + "]" : host) + ":" + std::to_string(server->port_);
  impl->wake_fd = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
  if (impl->wake_fd < 0) {
    return fail(QUORUM_ERR_INTERNAL, "store", "store server: eventfd: {}", errno_text(errno));
  }
  server->impl_ = std::move(impl);
  Impl *raw = server->impl_.get();
  server->thread_ = std::thread([raw] { raw->run(); });
  QLOG_DEBUG("store", "store server listening on {}", server->address_);
  *out = std::move(server);
  return kOk;
}

void TcpStoreServer::stop() {
  if (!thread_.joinable()) return;
  impl_->stopping.store(true);
  uint64_t one = 1;
  ssize_t ignored = write(impl_->wake_fd, &one, sizeof(one));
  (void)ignored;
  thread_.join();
}

TcpStoreServer::~TcpStoreServer() {
  stop();
}

// ---------------------------------------------------------------- client

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
    if (n < 0 && errno != EAGAIN && errno != EWOULDBLOCK) return errno_text(errno);
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
    if (errno != EAGAIN && errno != EWOULDBLOCK) return errno_text(errno);
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
      *why = errno_text(errno);
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
      *why = errno_text(errno);
      close(fd);
    }
  }
  freeaddrinfo(res);
  return result;
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
  int backoff_ms = 10;
  std::string why;
  int attempts = 0;
  int fd = -1;
  for (;;) {
    bool retry = false;
    ++attempts;
    fd = try_connect(host, port, deadline, &why, &retry);
    if (fd >= 0) break;
    if (!retry) {
      return fail(QUORUM_ERR_BOOTSTRAP, "store", "cannot connect to the store at {}: {}", address,
                  why);
    }
    if (deadline.expired()) {
      return fail(QUORUM_ERR_TIMEOUT, "store",
                  "cannot connect to the store at {} after {} attempts: {}", address, attempts,
                  why);
    }
    // The store may not be up yet: wait a little longer each time.
    std::this_thread::sleep_for(
        std::chrono::milliseconds(std::min(backoff_ms, deadline.remaining_ms(200))));
    backoff_ms = std::min(backoff_ms * 2, 200);
  }
  int one = 1;
  setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
  std::unique_ptr<TcpStoreClient> client(new TcpStoreClient(fd, address));
  Header reply;
  Status s = client->call(kAuth, "", token.data(), token.size(), 0, deadline, &reply, nullptr);
  if (s != kOk) return s;
  if (reply.op != kReplyOk) {
    return fail(QUORUM_ERR_BOOTSTRAP, "store", "the store at {} answered {} to authentication",
                address, reply.op);
  }
  *out = std::move(client);
  return kOk;
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
