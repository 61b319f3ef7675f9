// launcher_faults_test.cpp: quorum-run under faults of its own or of a rank.
// Killing quorum-run with SIGKILL must not leave a rank running; under
// --keep-going a rank stopped (SIGSTOP) and never resumed must be ended after
// QUORUM_TIMEOUT_MS, with a non-zero exit, instead of holding the job forever.
// Waits are bounded; the output of quorum-run is shown on every failure.
//
//   launcher_faults_test --quorum-run=PATH --check=PATH
#include <gtest/gtest.h>
#include <poll.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

namespace {

std::string g_quorum_run, g_check;
using Clock = std::chrono::steady_clock;

bool contains(const std::string &s, const std::string &part) {
  return s.find(part) != std::string::npos;
}

// quorum-run started in the background with its output on a pipe.
struct Launch {
  pid_t pid = -1;
  int out = -1;
  std::string output;
  bool eof = false;

  Launch(const std::vector<std::string> &args, const char *timeout_ms) {
    int p[2];
    if (pipe(p) != 0) return;
    pid = fork();
    if (pid == 0) {
      dup2(p[1], 1);
      dup2(p[1], 2);
      close(p[0]);
      if (timeout_ms != nullptr) setenv("QUORUM_TIMEOUT_MS", timeout_ms, 1);
      std::vector<char *> argv;
      argv.push_back(g_quorum_run.data());
      for (const auto &a : args) argv.push_back(const_cast<char *>(a.c_str()));
      argv.push_back(nullptr);
      execv(argv[0], argv.data());
      _exit(126);
    }
    close(p[1]);
    out = p[0];
  }
  ~Launch() {
    if (out >= 0) close(out);
  }

  // Reads output until `done` holds or `seconds` pass (or EOF).
  template <typename Pred>
  bool read_until(Pred done, int seconds) {
    const auto end = Clock::now() + std::chrono::seconds(seconds);
    char buf[4096];
    while (!done(output)) {
      const auto left =
          std::chrono::duration_cast<std::chrono::milliseconds>(end - Clock::now()).count();
      pollfd p{out, POLLIN, 0};
      if (left <= 0 || poll(&p, 1, static_cast<int>(left)) != 1) return false;
      ssize_t n = read(out, buf, sizeof(buf));
      if (n <= 0) {
        eof = true;
        return done(output);
      }
      output.append(buf, static_cast<size_t>(n));
    }
    return true;
  }
};

// The children of `pid` (Linux /proc), i.e. quorum-run's ranks.
std::vector<pid_t> children_of(pid_t pid) {
  std::ifstream f("/proc/" + std::to_string(pid) + "/task/" + std::to_string(pid) + "/children");
  std::vector<pid_t> kids;
  pid_t k;
  while (f >> k) kids.push_back(k);
  return kids;
}

// QUORUM_RANK from a process's environment (-1 if unreadable).
int rank_of(pid_t pid) {
  std::ifstream f("/proc/" + std::to_string(pid) + "/environ");
  std::string var;
  while (std::getline(f, var, '\0')) {
    if (var.rfind("QUORUM_RANK=", 0) == 0) return std::atoi(var.c_str() + 12);
  }
  return -1;
}

// Alive and not a zombie (an orphan's zombie waits for init to reap it).
bool alive(pid_t pid) {
  std::ifstream f("/proc/" + std::to_string(pid) + "/stat");
  std::string line;
  if (!std::getline(f, line)) return false;
  size_t paren = line.rfind(')');
  return paren != std::string::npos && paren + 2 < line.size() && line[paren + 2] != 'Z';
}

bool both_sleeping(const std::string &s) {
  return contains(s, "[0] sleeping") && contains(s, "[1] sleeping");
}

TEST(LauncherFaults, RanksDieWithTheLauncher) {
  Launch job({"-n", "2", "--", g_check, "--sleep", "60"}, nullptr);
  ASSERT_GT(job.pid, 0);
  ASSERT_TRUE(job.read_until(both_sleeping, 30)) << job.output;
  std::vector<pid_t> ranks = children_of(job.pid);
  ASSERT_EQ(ranks.size(), 2u) << job.output;
  kill(job.pid, SIGKILL);
  int status = 0;
  waitpid(job.pid, &status, 0);
  ASSERT_TRUE(WIFSIGNALED(status));
  // The parent-death signal is SIGKILL, delivered at once; 10 s is generous.
  const auto end = Clock::now() + std::chrono::seconds(10);
  for (pid_t r : ranks) {
    while (alive(r) && Clock::now() < end) usleep(20000);
    EXPECT_FALSE(alive(r)) << "rank pid " << r << " outlived quorum-run killed by SIGKILL";
  }
  for (pid_t r : ranks) {
    if (alive(r)) kill(r, SIGKILL);  // leave nothing behind on failure
  }
}

TEST(LauncherFaults, KeepGoingEndsAStoppedRank) {
  // QUORUM_TIMEOUT_MS=1500: rank 1 is stopped while it sleeps and killed
  // 1.5 s later (the first failure, exit 137); rank 0 wakes after 2 s and
  // fails its bootstrap allgather, rank 1 gone, within its own 1.5 s.
  const auto start = Clock::now();
  Launch job({"-n", "2", "--keep-going", "--grace", "1", "--", g_check, "--sleep", "2"}, "1500");
  ASSERT_GT(job.pid, 0);
  ASSERT_TRUE(job.read_until(both_sleeping, 30)) << job.output;
  std::vector<pid_t> ranks = children_of(job.pid);
  ASSERT_EQ(ranks.size(), 2u) << job.output;
  const pid_t rank1 = rank_of(ranks[0]) == 1 ? ranks[0] : ranks[1];
  ASSERT_EQ(rank_of(rank1), 1);
  ASSERT_EQ(kill(rank1, SIGSTOP), 0);
  // EOF comes when quorum-run and its ranks have all ended.
  job.read_until([](const std::string &) { return false; }, 30);
  const bool ended = job.eof;
  int status = 0;
  if (!ended) {
    kill(job.pid, SIGKILL);  // its ranks follow (parent-death signal)
    for (pid_t r : ranks) kill(r, SIGKILL);
  }
  ASSERT_EQ(waitpid(job.pid, &status, 0), job.pid);
  ASSERT_TRUE(ended) << "quorum-run --keep-going still running 30 s after SIGSTOP:\n" << job.output;
  const double seconds = std::chrono::duration<double>(Clock::now() - start).count();
  ASSERT_TRUE(WIFEXITED(status)) << job.output;
  EXPECT_EQ(WEXITSTATUS(status), 128 + SIGKILL) << job.output;
  EXPECT_TRUE(contains(job.output, "rank 1 was stopped by signal 19")) << job.output;
  EXPECT_TRUE(contains(job.output, "rank 1 has been stopped for 1500 ms")) << job.output;
  EXPECT_TRUE(contains(job.output, "rank 1 was killed by signal 9")) << job.output;
  EXPECT_TRUE(contains(job.output, "rank 0 exited with status")) << job.output;
  // Generous bound: 2 s asleep + 1.5 s timeout + startup, far below the 30 s wait.
  EXPECT_LT(seconds, 30.0) << job.output;
  for (pid_t r : ranks) EXPECT_FALSE(alive(r));
}

}  // namespace

int main(int argc, char **argv) {
  ::testing::InitGoogleTest(&argc, argv);
  for (int i = 1; i < argc; ++i) {
    std::string a = argv[i];
    if (a.rfind("--quorum-run=", 0) == 0) g_quorum_run = a.substr(13);
    if (a.rfind("--check=", 0) == 0) g_check = a.substr(8);
  }
  if (g_quorum_run.empty() || g_check.empty()) {
    std::fprintf(stderr, "usage: launcher_faults_test --quorum-run=PATH --check=PATH\n");
    return 2;
  }
  return RUN_ALL_TESTS();
}
