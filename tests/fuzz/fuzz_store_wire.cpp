// fuzz_store_wire.cpp: libFuzzer target for the TCP store's wire parser, the
// real server fed through a real connection. The first input byte chooses
// whether the connection first authenticates with the job's token (so that
// requests past authentication are reached); the rest is sent as is, the
// connection half-closed, and every reply read until the server closes it.
// Replies must be well-formed headers. The server is restarted now and then
// so that keys set by earlier inputs do not pile up.
#include <arpa/inet.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <vector>

#include "runtime/bootstrap/tcp_store.hpp"

namespace {

using namespace quorum::store_wire;
constexpr const char *kToken = "fuzz-token";

std::unique_ptr<quorum::TcpStoreServer> g_server;
uint64_t g_inputs = 0;

void restart_server() {
  g_server.reset();
  quorum::TcpStoreServer::Options o;
  o.token = kToken;
  o.max_value_bytes = 1 << 16;
  if (quorum::TcpStoreServer::start(o, &g_server) != quorum::kOk) std::abort();
}

// Connects to the server. Millions of short connections can run the host
// out of local ports for a moment (EADDRNOTAVAIL), and a connect waiting for
// room in the server's backlog is interrupted by libFuzzer's timer (EINTR):
// retry those for a while; the harness, not the server, is short then. Any
// other failure, or one that lasts 10 s, aborts (the server stopped
// listening: a finding).
int connect_to(int port) {
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_port = htons(static_cast<uint16_t>(port));
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  for (int attempt = 0; attempt < 1000; ++attempt) {
    int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (fd < 0) break;
    if (connect(fd, reinterpret_cast<sockaddr *>(&a), sizeof(a)) == 0) return fd;
    const int err = errno;
    close(fd);
    if (err != EADDRNOTAVAIL && err != EAGAIN && err != EINTR) {
      std::fprintf(stderr, "fuzz_store_wire: connect: %s\n", std::strerror(err));
      break;
    }
    usleep(10000);
  }
  std::fprintf(stderr, "fuzz_store_wire: cannot connect to the store on port %d\n", port);
  std::abort();
}

// Closes with a reset once every reply was read, so that the client side
// leaves no TIME_WAIT entry (which is what runs the local ports out).
void close_now(int fd) {
  const linger reset{1, 0};
  setsockopt(fd, SOL_SOCKET, SO_LINGER, &reset, sizeof(reset));
  close(fd);
}

// Writes all of `data` while draining replies, so that neither side blocks
// on a full socket buffer; then reads to EOF (bounded: 30 s without progress
// means the server hung, which is a finding; 5 s was hit once on a machine
// loaded far beyond its cores, and the input did not reproduce alone).
void exchange(int fd, const uint8_t *data, size_t size, std::vector<uint8_t> *replies) {
  size_t sent = 0;
  bool write_closed = false;
  uint8_t buf[65536];
  for (;;) {
    if (sent == size && !write_closed) {
      shutdown(fd, SHUT_WR);
      write_closed = true;
    }
    pollfd p{fd, static_cast<short>(POLLIN | (write_closed ? 0 : POLLOUT)), 0};
    const int ready = poll(&p, 1, 30000);
    if (ready < 0 && errno == EINTR) continue;
    if (ready != 1) {
      std::fprintf(stderr, "fuzz_store_wire: no progress for 30 s (%zu of %zu bytes sent)\n", sent,
                   size);
      std::abort();
    }
    if (p.revents & (POLLIN | POLLHUP | POLLERR)) {
      ssize_t n = recv(fd, buf, sizeof(buf), MSG_DONTWAIT);
      if (n == 0 || (n < 0 && errno != EAGAIN && errno != EINTR)) return;
      if (n > 0) replies->insert(replies->end(), buf, buf + n);
    }
    if (!write_closed && (p.revents & POLLOUT)) {
      ssize_t n = send(fd, data + sent, size - sent, MSG_NOSIGNAL | MSG_DONTWAIT);
      if (n < 0 && errno == EPIPE) {
        sent = size;  // the server closed: read what it said
      } else if (n > 0) {
        sent += static_cast<size_t>(n);
      }
    }
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  static const bool quiet = [] {
    setenv("QUORUM_LOG_LEVEL", "error", 1);
    return true;
  }();
  (void)quiet;
  if (size == 0) return 0;
  if (g_inputs++ % 5000 == 0) restart_server();
  std::vector<uint8_t> message;
  if (data[0] & 1) {
    message = encode_message(kAuth, "", kToken, std::strlen(kToken), 0);
  }
  message.insert(message.end(), data + 1, data + size);
  // The header alone, decoded as the server and the client do.
  if (size >= 1 + kHeaderBytes) (void)decode_header(data + 1);
  int fd = connect_to(g_server->port());
  std::vector<uint8_t> replies;
  exchange(fd, message.data(), message.size(), &replies);
  close_now(fd);
  // Every reply is a header with a reply code (and Get's value after it).
  size_t at = 0;
  while (replies.size() - at >= kHeaderBytes) {
    Header h = decode_header(replies.data() + at);
    if (h.magic != kMagic || h.version != kVersion || h.op < kReplyOk || h.op > kReplyNotCounter)
      std::abort();
    at += kHeaderBytes + h.value_len;
  }
  if (at != replies.size()) std::abort();
  return 0;
}
