// fault_scenario.cpp: one fault per run, under quorum-run --keep-going with a
// short QUORUM_TIMEOUT_MS (tests/faults/meson.build picks the path: shared
// memory or messages). The last rank is the victim; every other rank must
// report the right status, naming the victim, within the timeout plus 2 s,
// then finalize within a short grace, and print "PASS rank R". Scenarios:
//   kill     - the victim is killed (SIGKILL) before an allreduce
//   exit     - the victim exits (no finalize) before an allreduce
//   barrier  - the victim is killed before a barrier
//   stop     - the victim stops (SIGSTOP) before an allreduce: the others
//              time out naming it (a child of the victim kills it later)
//   partial  - the victim is killed between rounds of a solo partial allreduce
//   idle     - the victim is killed while the others are already waiting
//              inside an allreduce (the wait itself must notice)
// With "flood" after the scenario, every rank also floods quorum-run's TCP
// store (QUORUM_STORE) with connections that never authenticate, idle ones
// held open and ones that send garbage, as any local user could, from before
// quorum_init until after quorum_finalize (whose closing barrier goes through
// the store): the verdicts and deadlines stay the same.
// The meson test counts the PASS lines (one per surviving rank).
#include <netdb.h>
#include <signal.h>
#include <sys/socket.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <deque>
#include <string>
#include <thread>
#include <vector>

#include "quorum/quorum.h"

namespace {

double seconds_since(std::chrono::steady_clock::time_point t0) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
}

// A child that kills the (stopped) victim after `seconds`, so that nothing
// outlives the test.
void arrange_reaper(double seconds) {
  const pid_t victim = getpid();
  if (fork() == 0) {
    usleep(static_cast<useconds_t>(seconds * 1e6));
    kill(victim, SIGKILL);
    _exit(0);
  }
}

// Floods the store at QUORUM_STORE ("host:port") with unauthenticated
// connections until stopped: idle ones (at most 100 held, the oldest closed
// first) and every fourth one sending a wrong header. Its connects block
// while the store's listen backlog is full, so the count may stand still
// while the flood is at its strongest.
class StoreFlood {
 public:
  bool start() {
    const char *store = getenv("QUORUM_STORE");
    const char *colon = store ? strrchr(store, ':') : nullptr;
    if (colon == nullptr) return false;
    const std::string host(store, colon), port(colon + 1);
    addrinfo hints{};
    hints.ai_socktype = SOCK_STREAM;
    if (getaddrinfo(host.c_str(), port.c_str(), &hints, &addr_) != 0) return false;
    thread_ = std::thread([this] { run(); });
    return true;
  }
  ~StoreFlood() {
    stop_.store(true);
    if (thread_.joinable()) thread_.join();
    if (addr_) freeaddrinfo(addr_);
  }
  uint64_t opened() const { return opened_.load(); }
  // Still flooding (or connecting): it never gives up on errors.
  bool running() const { return running_.load(); }

 private:
  void run() {
    running_.store(true);
    std::deque<int> held;
    while (!stop_.load()) {
      int fd = socket(addr_->ai_family, SOCK_STREAM | SOCK_CLOEXEC, 0);
      if (fd < 0) continue;
      if (connect(fd, addr_->ai_addr, addr_->ai_addrlen) != 0) {
        close(fd);
        continue;
      }
      if (opened_.fetch_add(1) % 4 == 3) {
        const char junk[] = "GET / HTTP/1.0\r\n\r\nnot a store header at all";
        ssize_t ignored = send(fd, junk, sizeof(junk), MSG_NOSIGNAL);
        (void)ignored;
      }
      held.push_back(fd);
      if (held.size() > 100) {
        close(held.front());
        held.pop_front();
      }
    }
    for (int fd : held) close(fd);
    running_.store(false);
  }
  addrinfo *addr_ = nullptr;
  std::atomic<bool> stop_{false}, running_{false};
  std::atomic<uint64_t> opened_{0};
  std::thread thread_;
};

enum class Scenario { Kill, Exit, Barrier, Stop, Partial, Idle };

bool parse(const char *name, Scenario *out) {
  const std::pair<const char *, Scenario> names[] = {
      {"kill", Scenario::Kill}, {"exit", Scenario::Exit},       {"barrier", Scenario::Barrier},
      {"stop", Scenario::Stop}, {"partial", Scenario::Partial}, {"idle", Scenario::Idle}};
  for (const auto &[n, s] : names) {
    if (std::strcmp(name, n) == 0) {
      *out = s;
      return true;
    }
  }
  return false;
}

// The victim's fault, at the point where the others call in.
void inject(Scenario scenario, double timeout_s) {
  switch (scenario) {
    case Scenario::Exit:
      _exit(0);
    case Scenario::Stop:
      arrange_reaper(timeout_s + 4);
      raise(SIGSTOP);
      _exit(9);  // resumed: not expected
    case Scenario::Idle:
      usleep(300000);  // the others are inside their call by now
      raise(SIGKILL);
      break;
    default:
      raise(SIGKILL);
  }
}

}  // namespace

int main(int argc, char **argv) {
  Scenario scenario;
  const bool flooding = argc == 3 && std::strcmp(argv[2], "flood") == 0;
  if (argc < 2 || argc > 3 || !parse(argv[1], &scenario) || (argc == 3 && !flooding)) {
    fprintf(stderr, "usage: fault_scenario kill|exit|barrier|stop|partial|idle [flood]\n");
    return 2;
  }
  StoreFlood flood;
  if (flooding) {
    if (!flood.start()) {
      fprintf(stderr, "flood: QUORUM_STORE is not a reachable host:port\n");
      return 2;
    }
    // The bootstrap too runs under the flood.
    while (flood.opened() < 200) usleep(1000);
  }
  quorum_comm_t comm;
  if (quorum_init(&comm) != QUORUM_OK) {
    fprintf(stderr, "init: %s\n", quorum_last_error());
    return 1;
  }
  const int rank = quorum_comm_rank(comm), size = quorum_comm_size(comm);
  const int victim = size - 1;
  const char *timeout_env = getenv("QUORUM_TIMEOUT_MS");
  const double timeout_s = (timeout_env ? atof(timeout_env) : 60000.0) / 1000.0;

  quorum_partial_t partial = nullptr;
  if (scenario == Scenario::Partial) {
    quorum_partial_opts_t opts{};
    opts.mode = QUORUM_PARTIAL_SOLO;
    opts.max_staleness = 4;
    opts.carry = 1;
    if (quorum_partial_create(comm, 16, QUORUM_INT64, QUORUM_SUM, &opts, &partial) != QUORUM_OK) {
      fprintf(stderr, "partial_create: %s\n", quorum_last_error());
      return 1;
    }
  }
  std::vector<int64_t> v(16, 1), out(16);
  quorum_status_t s = QUORUM_OK;
  double took = 0;
  int iter = 0;
  for (; iter < 50; ++iter) {
    if (rank == victim && iter == 5) inject(scenario, timeout_s);
    const auto t0 = std::chrono::steady_clock::now();
    switch (scenario) {
      case Scenario::Barrier:
        s = quorum_barrier(comm);
        break;
      case Scenario::Partial:
        s = quorum_partial_post(partial, v.data());
        if (s == QUORUM_OK) s = quorum_partial_wait(partial, out.data(), nullptr);
        break;
      default:
        s = quorum_allreduce(comm, QUORUM_IN_PLACE, v.data(), 2, QUORUM_INT64, QUORUM_MAX);
    }
    took = seconds_since(t0);
    if (s != QUORUM_OK) break;
  }
  const uint64_t flood_at_failure = flood.opened();
  const bool flood_running_at_failure = flood.running();
  const std::string e = quorum_last_error();
  printf("rank %d: iteration %d: %s after %.2f s: %s\n", rank, iter, quorum_strerror(s), took,
         s == QUORUM_OK ? "" : e.c_str());
  const quorum_status_t expected_status =
      scenario == Scenario::Stop ? QUORUM_ERR_TIMEOUT : QUORUM_ERR_PEER_FAILED;
  const std::string named = "rank " + std::to_string(victim);
  // Partial rounds the victim had joined before it died (activated by the
  // others' early posts, at most max_staleness of them) may still complete.
  const bool right_iteration =
      iter == 5 || (scenario == Scenario::Partial && iter > 5 && iter <= 5 + 4);
  bool ok = s == expected_status && right_iteration && took <= timeout_s + 2 &&
            e.find(named) != std::string::npos;
  if (!ok) {
    printf("rank %d: expected %s naming %s within %.1f s at iteration 5\n", rank,
           quorum_strerror(expected_status), named.c_str(), timeout_s + 2);
  }
  // Finalizing after the failure waits only a short grace (1 s by default).
  const auto t1 = std::chrono::steady_clock::now();
  if (partial) quorum_partial_free(partial);
  const quorum_status_t fs = quorum_finalize(comm);
  const double fin = seconds_since(t1);
  printf("rank %d: finalize: %s after %.2f s\n", rank, quorum_strerror(fs), fin);
  if (fin > 2.5) {
    printf("rank %d: finalize took longer than its grace\n", rank);
    ok = false;
  }
  if (flooding) {
    // The flood must have gone on through the failure and the finalize.
    const uint64_t total = flood.opened();
    printf("rank %d: flood: %llu connections, %llu of them after the failure\n", rank,
           static_cast<unsigned long long>(total),
           static_cast<unsigned long long>(total - flood_at_failure));
    if (!flood_running_at_failure || !flood.running()) {
      printf("rank %d: the flood had stopped before the failure was reported\n", rank);
      ok = false;
    }
  }
  if (ok) printf("PASS rank %d\n", rank);
  fflush(stdout);
  return ok ? 0 : 4;
}
