// process_liveness_test.cpp: identities and liveness of local processes, as
// used by the UCX transport to notice a dead peer on this host.
#include "transports/ucx/process_liveness.hpp"

#include <gtest/gtest.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstring>

namespace quorum {
namespace {

TEST(ProcessLiveness, SelfIsAliveButNotWatched) {
  ProcessIdentity me = ProcessIdentity::self();
  EXPECT_NE(me.boot_id[0], '\0');
  EXPECT_NE(me.pid_namespace, 0u);
  EXPECT_EQ(me.pid, getpid());
  EXPECT_GT(me.start_time, 0u);
  EXPECT_EQ(process_liveness(me), Liveness::Alive);
  EXPECT_FALSE(me.can_watch(me)) << "a rank in this very process needs no watching";
}

TEST(ProcessLiveness, OnlyProcessesOfThisBootAndPidNamespaceAreWatched) {
  ProcessIdentity me = ProcessIdentity::self();
  ProcessIdentity other = me;
  other.pid = me.pid + 1;
  EXPECT_TRUE(me.can_watch(other));
  ProcessIdentity other_boot = other;
  other_boot.boot_id[0] = other_boot.boot_id[0] == 'x' ? 'y' : 'x';
  EXPECT_FALSE(me.can_watch(other_boot));
  ProcessIdentity other_namespace = other;
  other_namespace.pid_namespace += 1;
  EXPECT_FALSE(me.can_watch(other_namespace));
  ProcessIdentity unknown{};
  EXPECT_FALSE(me.can_watch(unknown));
  EXPECT_FALSE(unknown.can_watch(other));
}

TEST(ProcessLiveness, ChildIsGoneOnceKilledEvenBeforeReaped) {
  int fds[2];
  ASSERT_EQ(pipe(fds), 0);
  pid_t child = fork();
  ASSERT_GE(child, 0);
  if (child == 0) {
    ProcessIdentity id = ProcessIdentity::self();
    if (write(fds[1], &id, sizeof id) != sizeof id) _exit(1);
    pause();
    _exit(0);
  }
  ProcessIdentity id{};
  ASSERT_EQ(read(fds[0], &id, sizeof id), static_cast<ssize_t>(sizeof id));
  close(fds[0]);
  close(fds[1]);
  ProcessIdentity me = ProcessIdentity::self();
  EXPECT_EQ(id.pid, child);
  EXPECT_TRUE(me.can_watch(id));
  EXPECT_EQ(process_liveness(id), Liveness::Alive);

  ProcessIdentity reused = id;  // same pid, another start time: a new process
  reused.start_time += 1;
  EXPECT_EQ(process_liveness(reused), Liveness::Gone);

  ASSERT_EQ(kill(child, SIGKILL), 0);
  // A zombie until reaped; it already counts as gone.
  for (int i = 0; i < 1000 && process_liveness(id) != Liveness::Gone; ++i) usleep(1000);
  EXPECT_EQ(process_liveness(id), Liveness::Gone);
  int status = 0;
  ASSERT_EQ(waitpid(child, &status, 0), child);
  EXPECT_EQ(process_liveness(id), Liveness::Gone);
}

}  // namespace
}  // namespace quorum
