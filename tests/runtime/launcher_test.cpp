// launcher_test.cpp: runs bootstrap_check under quorum-run (and under mpirun
// with --mode=mpirun) and checks exit statuses and output.
//
//   launcher_test --quorum-run=PATH --check=PATH [--mode=mpirun --mpirun=PATH]
// In mpirun mode without an mpirun the test exits 77 (meson: SKIP).
#include <gtest/gtest.h>
#include <poll.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdio>
#include <cstring>
#include <string>

namespace {

std::string g_quorum_run, g_check, g_mpirun;

struct Result {
  int exit_code = -1;  // -1: ended by a signal
  std::string output;  // stdout and stderr together
};

std::string quote(const std::string &s) {
  std::string q = "'";
  for (char c : s) q += c == '\'' ? std::string("'\\''") : std::string(1, c);
  return q + "'";
}

Result run(const std::string &command) {
  Result r;
  FILE *p = popen((command + " 2>&1").c_str(), "r");
  if (p == nullptr) return r;
  char buf[4096];
  size_t n;
  while ((n = fread(buf, 1, sizeof(buf), p)) > 0) r.output.append(buf, n);
  int status = pclose(p);
  if (WIFEXITED(status)) r.exit_code = WEXITSTATUS(status);
  return r;
}

bool contains(const std::string &s, const std::string &part) {
  return s.find(part) != std::string::npos;
}

TEST(QuorumRun, RanksBootstrapThroughTheStore) {
  Result r = run(quote(g_quorum_run) + " -n 3 -- " + quote(g_check) +
                 " --expect-size 3 --expect-bootstrap store");
  EXPECT_EQ(r.exit_code, 0) << r.output;
  for (int rank = 0; rank < 3; ++rank) {
    std::string line =
        "[" + std::to_string(rank) + "] rank " + std::to_string(rank) + " of 3: bootstrap store ok";
    EXPECT_TRUE(contains(r.output, line)) << "missing '" << line << "' in:\n" << r.output;
  }
}

TEST(QuorumRun, SingleRank) {
  Result r = run(quote(g_quorum_run) + " -n 1 " + quote(g_check) + " --expect-size 1");
  EXPECT_EQ(r.exit_code, 0) << r.output;
  EXPECT_TRUE(contains(r.output, "[0] rank 0 of 1: bootstrap store ok")) << r.output;
}

TEST(QuorumRun, FailingRankEndsTheJob) {
  // Rank 1 exits 1; ranks 0 and 2 would wait in the allgather for 20 s, so
  // they finish only because quorum-run terminates them.
  Result r = run(quote(g_quorum_run) + " -n 3 --grace 2 -- " + quote(g_check) + " --fail-rank 1");
  EXPECT_EQ(r.exit_code, 1) << r.output;
  EXPECT_TRUE(contains(r.output, "[1] rank 1 failing on purpose")) << r.output;
  EXPECT_TRUE(contains(r.output, "rank 1 exited with status 1")) << r.output;
  EXPECT_TRUE(contains(r.output, "rank 0 was killed by signal 15")) << r.output;
  EXPECT_TRUE(contains(r.output, "rank 2 was killed by signal 15")) << r.output;
}

TEST(QuorumRun, TimeoutEndsTheJobWith124) {
  Result r = run(quote(g_quorum_run) + " -n 2 --timeout 1 -- " + quote(g_check) + " --sleep 60");
  EXPECT_EQ(r.exit_code, 124) << r.output;
  EXPECT_TRUE(contains(r.output, "--timeout")) << r.output;
}

TEST(QuorumRun, ForwardsSigint) {
  // Start quorum-run with its output on a pipe, wait until both ranks run,
  // then interrupt it as a terminal's Ctrl-C would.
  int out[2];
  ASSERT_EQ(pipe(out), 0);
  pid_t pid = fork();
  ASSERT_GE(pid, 0);
  if (pid == 0) {
    dup2(out[1], 1);
    dup2(out[1], 2);
    close(out[0]);
    execl(g_quorum_run.c_str(), g_quorum_run.c_str(), "-n", "2", "--", g_check.c_str(), "--sleep",
          "60", static_cast<char *>(nullptr));
    _exit(126);
  }
  close(out[1]);
  std::string output;
  bool interrupted = false;
  char buf[4096];
  for (;;) {
    pollfd p{out[0], POLLIN, 0};
    if (poll(&p, 1, 30000) != 1) break;
    ssize_t n = read(out[0], buf, sizeof(buf));
    if (n <= 0) break;
    output.append(buf, static_cast<size_t>(n));
    if (!interrupted && contains(output, "[0] sleeping") && contains(output, "[1] sleeping")) {
      kill(pid, SIGINT);
      interrupted = true;
    }
  }
  close(out[0]);
  int status = 0;
  waitpid(pid, &status, 0);
  ASSERT_TRUE(interrupted) << output;
  ASSERT_TRUE(WIFEXITED(status)) << output;
  EXPECT_EQ(WEXITSTATUS(status), 130) << output;
  EXPECT_TRUE(contains(output, "rank 0 was killed by signal 2")) << output;
  EXPECT_TRUE(contains(output, "rank 1 was killed by signal 2")) << output;
}

TEST(QuorumRun, MissingProgram) {
  Result r = run(quote(g_quorum_run) + " -n 2 -- /nonexistent/program");
  EXPECT_EQ(r.exit_code, 127) << r.output;
  EXPECT_TRUE(contains(r.output, "/nonexistent/program")) << r.output;
}

// Seconds beyond 1e9, infinite or NaN are refused up front (multiplied into
// int64 milliseconds they would be undefined behaviour); 1e9 itself works.
TEST(QuorumRun, TimeoutAndGraceAreBounded) {
  for (const char *flags :
       {"--timeout nan", "--timeout 1e300", "--timeout inf", "--timeout 1000000001", "--timeout -1",
        "--grace nan", "--grace 1e19"}) {
    Result r = run(quote(g_quorum_run) + " -n 1 " + flags + " -- " + quote(g_check));
    EXPECT_NE(r.exit_code, 0) << flags << ": " << r.output;
    const std::string flag = std::string(flags).substr(0, std::string(flags).find(' '));
    EXPECT_TRUE(contains(r.output, flag)) << r.output;
    EXPECT_TRUE(contains(r.output, "expected seconds from 0 to 1000000000")) << r.output;
    EXPECT_FALSE(contains(r.output, "bootstrap store ok")) << "the job ran: " << r.output;
  }
  Result r = run(quote(g_quorum_run) + " -n 1 --timeout 1e9 --grace 1e9 -- " + quote(g_check) +
                 " --expect-size 1");
  EXPECT_EQ(r.exit_code, 0) << r.output;
}

TEST(QuorumRun, UsageErrors) {
  EXPECT_NE(run(quote(g_quorum_run) + " -- " + quote(g_check)).exit_code, 0);  // no -n
  EXPECT_NE(run(quote(g_quorum_run) + " -n 0 " + quote(g_check)).exit_code, 0);
  EXPECT_NE(run(quote(g_quorum_run) + " -n 2").exit_code, 0);  // no program
}

TEST(Mpirun, RanksBootstrapThroughPmix) {
  Result r = run(quote(g_mpirun) +
                 " --oversubscribe --mca btl_tcp_if_include lo --mca oob_tcp_if_include lo -n 2 " +
                 quote(g_check) + " --expect-size 2 --expect-bootstrap pmix");
  EXPECT_EQ(r.exit_code, 0) << r.output;
  EXPECT_TRUE(contains(r.output, "rank 0 of 2: bootstrap pmix ok")) << r.output;
  EXPECT_TRUE(contains(r.output, "rank 1 of 2: bootstrap pmix ok")) << r.output;
}

}  // namespace

int main(int argc, char **argv) {
  ::testing::InitGoogleTest(&argc, argv);
  std::string mode = "quorum-run";
  for (int i = 1; i < argc; ++i) {
    std::string a = argv[i];
    auto value = [&](const char *prefix) { return a.substr(std::strlen(prefix)); };
    if (a.rfind("--quorum-run=", 0) == 0) g_quorum_run = value("--quorum-run=");
    if (a.rfind("--check=", 0) == 0) g_check = value("--check=");
    if (a.rfind("--mpirun=", 0) == 0) g_mpirun = value("--mpirun=");
    if (a.rfind("--mode=", 0) == 0) mode = value("--mode=");
  }
  if (mode == "mpirun") {
    if (g_mpirun.empty() || access(g_mpirun.c_str(), X_OK) != 0) {
      std::printf("mpirun not found: skipping\n");
      return 77;
    }
    ::testing::GTEST_FLAG(filter) = "Mpirun.*";
  } else {
    ::testing::GTEST_FLAG(filter) = "QuorumRun.*";
  }
  if (g_check.empty() || (mode != "mpirun" && g_quorum_run.empty())) {
    std::fprintf(
        stderr,
        "usage: launcher_test --quorum-run=PATH --check=PATH [--mode=mpirun --mpirun=PATH]\n");
    return 2;
  }
  return RUN_ALL_TESTS();
}
