// tcp_store_test.cpp: the TCP store server and client, including hostile input:
// wrong tokens, garbage, oversized lengths and truncated messages must close
// only the offending connection while the server keeps serving everyone else.
#include "runtime/bootstrap/tcp_store.hpp"

#include <arpa/inet.h>
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <chrono>
#include <random>
#include <thread>

namespace quorum {
namespace {

using namespace store_wire;

std::unique_ptr<TcpStoreServer> start_server(const std::string &token = "secret",
                                             int64_t max_value = -1) {
  TcpStoreServer::Options o;
  o.token = token;
  o.max_value_bytes = max_value;
  std::unique_ptr<TcpStoreServer> s;
  EXPECT_EQ(TcpStoreServer::start(o, &s), kOk) << last_error();
  return s;
}

std::unique_ptr<TcpStoreClient> connect_client(const TcpStoreServer &server,
                                               const std::string &token = "secret") {
  std::unique_ptr<TcpStoreClient> c;
  EXPECT_EQ(TcpStoreClient::connect(server.address(), token, Deadline::after_ms(5000), &c), kOk)
      << last_error();
  return c;
}

std::vector<uint8_t> bytes_of(const std::string &s) {
  return {s.begin(), s.end()};
}

// A raw connection for sending hand-made bytes.
int raw_connect(int port) {
  int fd = socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_port = htons(static_cast<uint16_t>(port));
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  EXPECT_EQ(connect(fd, reinterpret_cast<sockaddr *>(&a), sizeof(a)), 0);
  return fd;
}

void raw_send(int fd, const std::vector<uint8_t> &b) {
  ASSERT_EQ(send(fd, b.data(), b.size(), MSG_NOSIGNAL), static_cast<ssize_t>(b.size()));
}

// True when the server closed the connection (after at most one reply header).
bool closed_by_server(int fd, uint16_t *reply_op = nullptr) {
  std::vector<uint8_t> got;
  for (;;) {
    pollfd p{fd, POLLIN, 0};
    if (poll(&p, 1, 10000) != 1) return false;
    uint8_t buf[256];
    ssize_t n = recv(fd, buf, sizeof(buf), 0);
    if (n < 0) return errno == ECONNRESET;
    if (n == 0) break;
    got.insert(got.end(), buf, buf + n);
  }
  if (reply_op && got.size() >= kHeaderBytes) *reply_op = decode_header(got.data()).op;
  return true;
}

std::vector<uint8_t> auth_message(const std::string &token) {
  return encode_message(kAuth, "", token.data(), token.size(), 0);
}

// The server still answers a well-behaved client.
void expect_serving(const TcpStoreServer &server) {
  auto c = connect_client(server);
  ASSERT_TRUE(c);
  ASSERT_EQ(c->set("alive", "yes"), kOk);
  std::vector<uint8_t> v;
  ASSERT_EQ(c->get("alive", &v, Deadline::after_ms(5000)), kOk);
  EXPECT_EQ(v, bytes_of("yes"));
}

TEST(TcpStore, WireHeaderRoundTrips) {
  Header h;
  h.op = kGet;
  h.key_len = 7;
  h.value_len = 0x01020304;
  h.arg = 0x1122334455667788ull;
  uint8_t buf[kHeaderBytes];
  encode_header(h, buf);
  EXPECT_EQ(buf[0], 'Q');
  EXPECT_EQ(buf[3], 'T');
  Header d = decode_header(buf);
  EXPECT_EQ(d.magic, kMagic);
  EXPECT_EQ(d.version, kVersion);
  EXPECT_EQ(d.op, kGet);
  EXPECT_EQ(d.key_len, 7u);
  EXPECT_EQ(d.value_len, 0x01020304u);
  EXPECT_EQ(d.arg, 0x1122334455667788ull);
}

TEST(TcpStore, ParsesHostPort) {
  std::string host;
  int port = 0;
  EXPECT_TRUE(parse_host_port("127.0.0.1:29500", &host, &port));
  EXPECT_EQ(host, "127.0.0.1");
  EXPECT_EQ(port, 29500);
  EXPECT_TRUE(parse_host_port("[::1]:80", &host, &port));
  EXPECT_EQ(host, "::1");
  EXPECT_FALSE(parse_host_port("127.0.0.1", &host, &port));
  EXPECT_FALSE(parse_host_port("127.0.0.1:", &host, &port));
  EXPECT_FALSE(parse_host_port(":80", &host, &port));
  EXPECT_FALSE(parse_host_port("host:99999", &host, &port));
  EXPECT_FALSE(parse_host_port("host:8x", &host, &port));
  EXPECT_FALSE(parse_host_port("::1:80", &host, &port));
}

TEST(TcpStore, SetGetAddRemove) {
  auto server = start_server();
  auto c = connect_client(*server);
  ASSERT_TRUE(c);
  ASSERT_EQ(c->set("k", "value-1"), kOk);
  std::vector<uint8_t> v;
  ASSERT_EQ(c->get("k", &v, Deadline::after_ms(1000)), kOk);
  EXPECT_EQ(v, bytes_of("value-1"));
  ASSERT_EQ(c->set("k", "v2"), kOk);  // overwrite
  ASSERT_EQ(c->get("k", &v, Deadline::after_ms(1000)), kOk);
  EXPECT_EQ(v, bytes_of("v2"));
  ASSERT_EQ(c->set("empty", "", 0), kOk);
  ASSERT_EQ(c->get("empty", &v, Deadline::after_ms(1000)), kOk);
  EXPECT_TRUE(v.empty());

  int64_t n = 0;
  ASSERT_EQ(c->add("counter", 5, &n), kOk);
  EXPECT_EQ(n, 5);
  ASSERT_EQ(c->add("counter", -7, &n), kOk);
  EXPECT_EQ(n, -2);
  EXPECT_EQ(c->add("k", 1, &n), QUORUM_ERR_INVALID_ARG);  // "v2" is no counter
  // Counters wrap around instead of overflowing (a fuzzer's find; UB before).
  ASSERT_EQ(c->add("big", INT64_MAX, &n), kOk);
  ASSERT_EQ(c->add("big", 2, &n), kOk);
  EXPECT_EQ(n, INT64_MIN + 1);

  bool existed = false;
  ASSERT_EQ(c->remove("k", &existed), kOk);
  EXPECT_TRUE(existed);
  ASSERT_EQ(c->remove("k", &existed), kOk);
  EXPECT_FALSE(existed);
  bool found = true;
  ASSERT_EQ(c->try_get("k", &v, Deadline::after_ms(1), &found), kOk);
  EXPECT_FALSE(found);
  EXPECT_EQ(server->rejected_connections(), 0u);
}

TEST(TcpStore, LargeValue) {
  auto server = start_server();
  auto a = connect_client(*server);
  auto b = connect_client(*server);
  std::vector<uint8_t> big(8 << 20);
  for (size_t i = 0; i < big.size(); ++i) big[i] = static_cast<uint8_t>(i * 31 + 7);
  ASSERT_EQ(a->set("big", big.data(), big.size()), kOk);
  std::vector<uint8_t> v;
  ASSERT_EQ(b->get("big", &v, Deadline::after_ms(10000)), kOk);
  EXPECT_EQ(v, big);
}

TEST(TcpStore, GetBlocksUntilSet) {
  auto server = start_server();
  auto getter = connect_client(*server);
  auto setter = connect_client(*server);
  std::vector<uint8_t> v;
  Status got = QUORUM_ERR_INTERNAL;
  std::thread t([&] { got = getter->get("later", &v, Deadline::after_ms(20000)); });
  std::this_thread::sleep_for(std::chrono::milliseconds(100));
  ASSERT_EQ(setter->set("later", "here"), kOk);
  t.join();
  ASSERT_EQ(got, kOk) << last_error();
  EXPECT_EQ(v, bytes_of("here"));
  // The connection that waited still works.
  ASSERT_EQ(getter->get("later", &v, Deadline::after_ms(1000)), kOk);
}

TEST(TcpStore, WaitAndAddWakeWaiters) {
  auto server = start_server();
  auto waiter = connect_client(*server);
  auto adder = connect_client(*server);
  Status got = QUORUM_ERR_INTERNAL;
  std::thread t([&] { got = waiter->wait("count", Deadline::after_ms(20000)); });
  std::this_thread::sleep_for(std::chrono::milliseconds(50));
  ASSERT_EQ(adder->add("count", 1, nullptr), kOk);
  t.join();
  EXPECT_EQ(got, kOk);
}

TEST(TcpStore, GetTimesOut) {
  auto server = start_server();
  auto c = connect_client(*server);
  std::vector<uint8_t> v;
  EXPECT_EQ(c->get("never", &v, Deadline::after_ms(200)), QUORUM_ERR_TIMEOUT);
  EXPECT_NE(std::string(last_error()).find("never"), std::string::npos);
  // The connection stays usable after a timeout.
  ASSERT_EQ(c->set("x", "1"), kOk);
  ASSERT_EQ(c->get("x", &v, Deadline::after_ms(1000)), kOk);
}

TEST(TcpStore, WrongTokenRejectedAndServerKeepsServing) {
  auto server = start_server("right-token");
  std::unique_ptr<TcpStoreClient> bad;
  EXPECT_EQ(
      TcpStoreClient::connect(server->address(), "wrong-token", Deadline::after_ms(5000), &bad),
      QUORUM_ERR_BOOTSTRAP);
  EXPECT_FALSE(bad);
  EXPECT_NE(std::string(last_error()).find("QUORUM_TOKEN"), std::string::npos);
  EXPECT_EQ(TcpStoreClient::connect(server->address(), "", Deadline::after_ms(5000), &bad),
            QUORUM_ERR_BOOTSTRAP);
  auto good = connect_client(*server, "right-token");
  ASSERT_TRUE(good);
  EXPECT_EQ(good->set("a", "b"), kOk);
  EXPECT_EQ(server->rejected_connections(), 2u);
}

// Idle connections that never send the token (anyone on the host can open
// them) cannot keep a rank out: beyond a few, the oldest are dropped.
TEST(TcpStore, IdleUnauthenticatedConnectionsCannotCrowdOutRanks) {
  auto server = start_server();
  std::vector<int> idle;
  for (int i = 0; i < 300; ++i) idle.push_back(raw_connect(server->port()));
  expect_serving(*server);
  EXPECT_GE(server->rejected_connections(), 300u - 64u);
  // The first ones were dropped (closed by the server), the last ones not yet.
  EXPECT_TRUE(closed_by_server(idle.front()));
  pollfd p{idle.back(), POLLIN, 0};
  EXPECT_EQ(poll(&p, 1, 100), 0) << "the newest idle connection is still open";
  for (int fd : idle) close(fd);
}

TEST(TcpStore, RequestBeforeAuthIsRejected) {
  auto server = start_server();
  int fd = raw_connect(server->port());
  raw_send(fd, encode_message(kSet, "k", "v", 1, 0));
  uint16_t op = 0;
  EXPECT_TRUE(closed_by_server(fd, &op));
  EXPECT_EQ(op, kReplyAuthFailed);
  close(fd);
  EXPECT_EQ(server->rejected_connections(), 1u);
  expect_serving(*server);
}

TEST(TcpStore, GarbageBytesCloseOnlyThatConnection) {
  auto server = start_server();
  auto other = connect_client(*server);  // connected before the garbage arrives
  std::mt19937 rng(42);
  for (int round = 0; round < 20; ++round) {
    int fd = raw_connect(server->port());
    std::vector<uint8_t> junk(4 + rng() % 200);  // at least a magic's worth
    for (auto &b : junk) b = static_cast<uint8_t>(rng());
    junk[0] = 'X';  // never a valid magic
    raw_send(fd, junk);
    EXPECT_TRUE(closed_by_server(fd)) << "round " << round;
    close(fd);
  }
  EXPECT_EQ(server->rejected_connections(), 20u);
  ASSERT_EQ(other->set("still", "here"), kOk);
  expect_serving(*server);
}

TEST(TcpStore, BadVersionAndUnknownOpRejected) {
  auto server = start_server();
  {
    int fd = raw_connect(server->port());
    auto msg = auth_message("secret");
    msg[4] = 99;  // version
    raw_send(fd, msg);
    EXPECT_TRUE(closed_by_server(fd));
    close(fd);
  }
  {
    int fd = raw_connect(server->port());
    auto msg = auth_message("secret");
    raw_send(fd, msg);
    raw_send(fd, encode_message(77, "k", nullptr, 0, 0));  // unknown op after auth
    std::vector<uint8_t> reply(kHeaderBytes);
    ASSERT_EQ(recv(fd, reply.data(), reply.size(), MSG_WAITALL),
              static_cast<ssize_t>(kHeaderBytes));
    EXPECT_EQ(decode_header(reply.data()).op, kReplyOk);  // the auth
    uint16_t op = 0;
    EXPECT_TRUE(closed_by_server(fd, &op));
    EXPECT_EQ(op, kReplyBadRequest);
    close(fd);
  }
  EXPECT_EQ(server->rejected_connections(), 2u);
  expect_serving(*server);
}

TEST(TcpStore, OversizedLengthsRejectedBeforeAllocation) {
  auto server = start_server("secret", 1024);
  struct Case {
    const char *what;
    bool authenticate;
    uint16_t op;
    uint32_t key_len, value_len;
  };
  const Case cases[] = {
      {"huge token", false, kAuth, 0, 0xFFFFFFFFu},
      {"key on auth", false, kAuth, 10, 0},
      {"huge key", true, kSet, 0xFFFFFFFFu, 1},
      {"key just over the limit", true, kGet, kMaxKeyBytes + 1, 0},
      {"value over QUORUM_STORE_MAX_VALUE", true, kSet, 1, 1025},
      {"huge value", true, kSet, 1, 0xFFFFFFFFu},
      {"value on get", true, kGet, 1, 5},
  };
  uint64_t expected = 0;
  for (const Case &c : cases) {
    int fd = raw_connect(server->port());
    if (c.authenticate) raw_send(fd, auth_message("secret"));
    Header h;
    h.op = c.op;
    h.key_len = c.key_len;
    h.value_len = c.value_len;
    std::vector<uint8_t> msg(kHeaderBytes);
    encode_header(h, msg.data());
    raw_send(fd, msg);
    EXPECT_TRUE(closed_by_server(fd)) << c.what;
    close(fd);
    EXPECT_EQ(server->rejected_connections(), ++expected) << c.what;
  }
  // Exactly at the limits is fine.
  auto ok = connect_client(*server);
  std::vector<uint8_t> max_value(1024, 7);
  EXPECT_EQ(ok->set(std::string(kMaxKeyBytes, 'k'), max_value.data(), max_value.size()), kOk);
  expect_serving(*server);
}

TEST(TcpStore, ClientRefusesOversizedRequests) {
  auto server = start_server();
  auto c = connect_client(*server);
  EXPECT_EQ(c->set(std::string(kMaxKeyBytes + 1, 'k'), "v"), QUORUM_ERR_INVALID_ARG);
  EXPECT_EQ(c->set("fine", "v"), kOk);
}

TEST(TcpStore, TruncatedMessagesRejected) {
  auto server = start_server();
  {  // half a header, then the client leaves
    int fd = raw_connect(server->port());
    auto msg = auth_message("secret");
    msg.resize(kHeaderBytes / 2);
    raw_send(fd, msg);
    close(fd);
  }
  {  // a header promising a body that never comes
    int fd = raw_connect(server->port());
    raw_send(fd, auth_message("secret"));
    // Read the auth reply first: closing with unread input would reset the
    // connection, which may discard our bytes before the server reads them.
    uint8_t reply[kHeaderBytes];
    ASSERT_EQ(recv(fd, reply, sizeof(reply), MSG_WAITALL), static_cast<ssize_t>(kHeaderBytes));
    auto msg = encode_message(kSet, "key", "value", 5, 0);
    msg.resize(msg.size() - 3);
    raw_send(fd, msg);
    close(fd);
  }
  // The server notices both asynchronously; wait until it has.
  for (int i = 0; i < 500 && server->rejected_connections() < 2; ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  EXPECT_EQ(server->rejected_connections(), 2u);
  expect_serving(*server);
  // The truncated set was not applied.
  auto c = connect_client(*server);
  bool found = true;
  std::vector<uint8_t> v;
  ASSERT_EQ(c->try_get("key", &v, Deadline::after_ms(1), &found), kOk);
  EXPECT_FALSE(found);
}

TEST(TcpStore, ClientLeavingWhileWaitingIsHarmless) {
  auto server = start_server();
  {
    int fd = raw_connect(server->port());
    raw_send(fd, auth_message("secret"));
    raw_send(fd, encode_message(kGet, "nobody-sets-this", nullptr, 0, kWaitForever));
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
    close(fd);
  }
  auto c = connect_client(*server);
  ASSERT_EQ(c->set("nobody-sets-this", "now"), kOk);
  expect_serving(*server);
  EXPECT_EQ(server->rejected_connections(), 0u);
}

TEST(TcpStore, ManyClients) {
  auto server = start_server();
  constexpr int kClients = 32;
  std::vector<std::thread> threads;
  std::vector<int> errors(kClients, 0);
  for (int i = 0; i < kClients; ++i) {
    threads.emplace_back([&, i] {
      std::unique_ptr<TcpStoreClient> c;
      if (TcpStoreClient::connect(server->address(), "secret", Deadline::after_ms(20000), &c) !=
          kOk) {
        errors[i] = 1;
        return;
      }
      if (c->set("client/" + std::to_string(i), std::to_string(i * i)) != kOk) errors[i] = 2;
      int64_t ignored;
      if (c->add("arrived", 1, &ignored) != kOk) errors[i] = 3;
      for (int j = 0; j < kClients; ++j) {
        std::vector<uint8_t> v;
        if (c->get("client/" + std::to_string(j), &v, Deadline::after_ms(20000)) != kOk ||
            v != bytes_of(std::to_string(j * j))) {
          errors[i] = 4;
        }
      }
    });
  }
  for (auto &t : threads) t.join();
  for (int i = 0; i < kClients; ++i) EXPECT_EQ(errors[i], 0) << "client " << i;
  auto c = connect_client(*server);
  int64_t arrived = 0;
  ASSERT_EQ(c->add("arrived", 0, &arrived), kOk);
  EXPECT_EQ(arrived, kClients);
  EXPECT_EQ(server->authenticated_connections(), static_cast<uint64_t>(kClients + 1));
}

TEST(TcpStore, ClientRetriesUntilServerStarts) {
  // Find a free port, then start the server on it only after the client began.
  int probe = socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  ASSERT_EQ(bind(probe, reinterpret_cast<sockaddr *>(&a), sizeof(a)), 0);
  socklen_t len = sizeof(a);
  getsockname(probe, reinterpret_cast<sockaddr *>(&a), &len);
  const std::string address = "127.0.0.1:" + std::to_string(ntohs(a.sin_port));
  close(probe);

  std::unique_ptr<TcpStoreClient> c;
  Status got = QUORUM_ERR_INTERNAL;
  std::thread t(
      [&] { got = TcpStoreClient::connect(address, "secret", Deadline::after_ms(20000), &c); });
  std::this_thread::sleep_for(std::chrono::milliseconds(300));
  TcpStoreServer::Options o;
  o.address = address;
  o.token = "secret";
  std::unique_ptr<TcpStoreServer> server;
  ASSERT_EQ(TcpStoreServer::start(o, &server), kOk) << last_error();
  t.join();
  ASSERT_EQ(got, kOk) << last_error();
  EXPECT_EQ(c->set("a", "b"), kOk);
}

TEST(TcpStore, ConnectTimesOutWithoutServer) {
  int probe = socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  ASSERT_EQ(bind(probe, reinterpret_cast<sockaddr *>(&a), sizeof(a)), 0);
  socklen_t len = sizeof(a);
  getsockname(probe, reinterpret_cast<sockaddr *>(&a), &len);
  std::unique_ptr<TcpStoreClient> c;
  // Bound but not listening: connections are refused until the deadline.
  EXPECT_EQ(TcpStoreClient::connect("127.0.0.1:" + std::to_string(ntohs(a.sin_port)), "t",
                                    Deadline::after_ms(300), &c),
            QUORUM_ERR_TIMEOUT);
  close(probe);
  EXPECT_EQ(TcpStoreClient::connect("no-port-here", "t", Deadline::after_ms(300), &c),
            QUORUM_ERR_INVALID_ARG);
}

TEST(TcpStore, ServerGoneIsAnErrorNotAHang) {
  auto server = start_server();
  auto c = connect_client(*server);
  server.reset();
  std::vector<uint8_t> v;
  Status s = c->get("k", &v, Deadline::after_ms(5000));
  EXPECT_EQ(s, QUORUM_ERR_BOOTSTRAP);
  EXPECT_EQ(c->set("k", "v"), QUORUM_ERR_BOOTSTRAP);  // the connection is marked closed
}

TEST(TcpStore, BadServerAddress) {
  TcpStoreServer::Options o;
  o.address = "nonsense";
  std::unique_ptr<TcpStoreServer> s;
  EXPECT_EQ(TcpStoreServer::start(o, &s), QUORUM_ERR_INVALID_ARG);
}

}  // namespace
}  // namespace quorum
