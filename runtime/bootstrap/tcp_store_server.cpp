// tcp_store_server.cpp: the poll()-driven store server: one thread serves every
// connection, checks each one's token first and bounds every length it reads
// (see tcp_store.hpp for the protocol).
#include "runtime/bootstrap/tcp_store.hpp"

#include <arpa/inet.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <sys/eventfd.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <climits>
#include <cstring>
#include <map>
#include <thread>
#include <unordered_map>

#include "runtime/log.hpp"

namespace quorum {

using namespace store_wire;

namespace {

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
constexpr int kMaxRejectionsLogged = 10;

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
  int rejections_logged = 0;
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
        QLOG_ERROR("store", "store server: poll failed: {}", std::strerror(errno));
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
                    std::strerror(errno));
          accept_resume = Clock::now() + std::chrono::milliseconds(100);
        } else if (errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR &&
                   errno != ECONNABORTED) {
          QLOG_WARN("store", "store server: accept failed: {}", std::strerror(errno));
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
  // Each one first gets its input read: a rank sends the token right after
  // connecting, so under a flood of idle connections it is authenticated
  // here rather than dropped, and only connections with nothing to say go.
  void drop_oldest_unauthenticated() {
    std::vector<uint64_t> oldest_first;
    for (const auto &entry : conns) {
      if (!entry.second->authed) oldest_first.push_back(entry.first);
    }
    size_t unauthenticated = oldest_first.size();
    for (uint64_t id : oldest_first) {
      if (unauthenticated <= kMaxUnauthenticated) return;
      --unauthenticated;
      read_requests(id);  // may authenticate it, or reject garbage
      auto it = conns.find(id);
      if (it == conns.end() || it->second->authed) continue;
      if (!warned_unauthenticated) {  // once: whoever opens them should not flood the log
        QLOG_WARN("store",
                  "store server: more than {} connections without the token; dropping the "
                  "oldest idle ones (first from {})",
                  kMaxUnauthenticated, it->second->peer);
        warned_unauthenticated = true;
      }
      close_conn(id);
      owner->rejected_.fetch_add(1);
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
    // A flood of bad connections must not flood the log: the first few are
    // warned about, the rest only at debug level.
    if (++rejections_logged <= kMaxRejectionsLogged) {
      QLOG_WARN("store", "store server: closing connection from {}: {}{}", c.peer, why,
                rejections_logged == kMaxRejectionsLogged ? " (further ones at debug level)" : "");
    } else {
      QLOG_DEBUG("store", "store server: closing connection from {}: {}", c.peer, why);
    }
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
            QLOG_DEBUG("store", "store server: recv from {}: {}", c.peer, std::strerror(errno));
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
        // Two's complement wrap-around (found by fuzzing: a signed overflow here was UB).
        current = static_cast<int64_t>(static_cast<uint64_t>(current) + h.arg);
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
      last_error = std::strerror(errno);
      continue;
    }
    int one = 1;
    setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
    if (bind(fd, ai->ai_addr, ai->ai_addrlen) != 0 || listen(fd, 1024) != 0) {
      last_error = std::strerror(errno);
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
    return fail(QUORUM_ERR_INTERNAL, "store", "store server: eventfd: {}", std::strerror(errno));
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
}  // namespace quorum
