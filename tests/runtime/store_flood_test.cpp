// store_flood_test.cpp: a job's ranks bootstrap through the TCP store while
// other threads flood it with connections that never authenticate (idle ones
// held open, and ones that send garbage), as any local user could. Every rank
// must get in and allgather correct data well within its timeout.
#include <arpa/inet.h>
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <deque>
#include <thread>

#include "runtime/bootstrap/store_bootstrap.hpp"
#include "runtime/bootstrap/tcp_store.hpp"
#include "runtime/status.hpp"

namespace quorum {
namespace {

int raw_connect(int port) {
  int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (fd < 0) return -1;
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_port = htons(static_cast<uint16_t>(port));
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  if (connect(fd, reinterpret_cast<sockaddr *>(&a), sizeof(a)) != 0) {
    close(fd);
    return -1;
  }
  return fd;
}

// Opens connections as fast as it can until `stop`: idle ones (up to
// `max_open` held at once, the oldest closed first) or, with `garbage`, ones
// that send a wrong header. Counts what it opened.
void flood(int port, bool garbage, size_t max_open, const std::atomic<bool> &stop,
           std::atomic<uint64_t> *opened) {
  std::deque<int> open_fds;
  while (!stop.load()) {
    int fd = raw_connect(port);
    if (fd < 0) continue;
    opened->fetch_add(1);
    if (garbage) {
      const char junk[] = "GET / HTTP/1.0\r\n\r\nnot a store header at all";
      ssize_t ignored = send(fd, junk, sizeof(junk), MSG_NOSIGNAL);
      (void)ignored;
    }
    open_fds.push_back(fd);
    if (open_fds.size() > max_open) {
      close(open_fds.front());
      open_fds.pop_front();
    }
  }
  for (int fd : open_fds) close(fd);
}

TEST(StoreFlood, RanksGetInWhileTheStoreIsFlooded) {
  TcpStoreServer::Options o;
  o.token = "job-token";
  std::unique_ptr<TcpStoreServer> server;
  ASSERT_EQ(TcpStoreServer::start(o, &server), kOk);
  std::atomic<bool> stop{false};
  std::atomic<uint64_t> opened{0};
  std::vector<std::thread> flooders;
  flooders.emplace_back(flood, server->port(), false, 300, std::cref(stop), &opened);
  flooders.emplace_back(flood, server->port(), false, 300, std::cref(stop), &opened);
  flooders.emplace_back(flood, server->port(), true, 50, std::cref(stop), &opened);
  while (opened.load() < 500) std::this_thread::sleep_for(std::chrono::milliseconds(1));

  constexpr int kSize = 4;
  constexpr int kRounds = 3;
  std::vector<Status> status(kSize, QUORUM_ERR_INTERNAL);
  std::vector<std::string> error(kSize);
  std::vector<std::thread> ranks;
  const auto start = std::chrono::steady_clock::now();
  for (int rank = 0; rank < kSize; ++rank) {
    ranks.emplace_back([&, rank] {
      StoreBootstrapParams p;
      p.rank = rank;
      p.size = kSize;
      p.address = server->address();
      p.token = "job-token";
      std::unique_ptr<Bootstrap> b;
      Status s = make_store_bootstrap(p, &b);
      for (int round = 0; s == kOk && round < kRounds; ++round) {
        uint64_t mine = static_cast<uint64_t>(rank) * 1000 + static_cast<uint64_t>(round);
        std::vector<uint64_t> all(kSize);
        s = b->allgather(&mine, all.data(), sizeof(mine));
        for (int r = 0; s == kOk && r < kSize; ++r) {
          if (all[r] != static_cast<uint64_t>(r) * 1000 + static_cast<uint64_t>(round)) {
            ADD_FAILURE() << "rank " << rank << " round " << round << ": wrong value from rank "
                          << r;
            s = QUORUM_ERR_INTERNAL;
          }
        }
      }
      status[rank] = s;
      if (s != kOk) error[rank] = last_error();
    });
  }
  for (auto &t : ranks) t.join();
  const double seconds =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  const uint64_t flood_size = opened.load();
  stop.store(true);
  for (auto &t : flooders) t.join();
  for (int rank = 0; rank < kSize; ++rank) {
    EXPECT_EQ(status[rank], kOk) << "rank " << rank << ": " << error[rank];
  }
  EXPECT_GE(server->authenticated_connections(), static_cast<uint64_t>(kSize));
  // Generous: a flooded store must not cost the ranks their timeout (60 s).
  EXPECT_LT(seconds, 30.0);
  std::printf("%d ranks bootstrapped in %.2f s while %llu flood connections were opened\n", kSize,
              seconds, static_cast<unsigned long long>(flood_size));
}

}  // namespace
}  // namespace quorum
