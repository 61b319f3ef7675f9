// cross_memory_test.cpp: cross-memory attach between this process and a
// forked child (a copy each way, checked by the other side), its errors (an
// address the other process does not map, a process that is gone), and the
// group probe: two ranks that can attach (both this process) agree it is
// usable; a peer that cannot be read (a bogus process, a wrong word) makes it
// unusable, as does a peer that could read but another rank could not, and a
// rank that does not want it.
#include "runtime/cross_memory.hpp"

#include <gtest/gtest.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <memory>
#include <vector>

namespace quorum {
namespace {

uint64_t address_of(const void *p) {
  return reinterpret_cast<uintptr_t>(p);
}

// The child waits for a byte on `go`, then exits 0 if its buffer holds
// `expect` (the parent wrote it), else 1.
TEST(CrossMemory, CopiesBothWaysWithAChild) {
  const size_t n = (1 << 20) + 123;  // several pages, not a multiple of one
  std::vector<uint8_t> buf(n);
  for (size_t i = 0; i < n; ++i) buf[i] = static_cast<uint8_t>(i * 7);
  int go[2];
  ASSERT_EQ(pipe(go), 0);
  const pid_t child = fork();
  ASSERT_GE(child, 0);
  if (child == 0) {
    char c;
    if (read(go[0], &c, 1) != 1) _exit(2);
    for (size_t i = 0; i < n; ++i) {
      if (buf[i] != static_cast<uint8_t>(i * 13 + 1)) _exit(1);
    }
    _exit(0);
  }
  // The child's buffer lies at the same address (a copy of this address space).
  std::vector<uint8_t> got(n);
  EXPECT_EQ(cross_memory_read(child, address_of(buf.data()), got.data(), n), 0);
  EXPECT_EQ(got, buf);
  std::vector<uint8_t> mine(n);
  for (size_t i = 0; i < n; ++i) mine[i] = static_cast<uint8_t>(i * 13 + 1);
  EXPECT_EQ(cross_memory_write(child, address_of(buf.data()), mine.data(), n), 0);
  ASSERT_EQ(write(go[1], "x", 1), 1);
  int status = 0;
  ASSERT_EQ(waitpid(child, &status, 0), child);
  EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0) << "status " << status;
  // Gone (reaped): no such process.
  EXPECT_EQ(cross_memory_read(child, address_of(buf.data()), got.data(), 16), ESRCH);
  close(go[0]);
  close(go[1]);
}

TEST(CrossMemory, AnAddressNotMappedIsRefused) {
  uint8_t local[64] = {};
  EXPECT_EQ(cross_memory_read(getpid(), 8, local, sizeof(local)), EFAULT);
  EXPECT_EQ(cross_memory_write(getpid(), 8, local, sizeof(local)), EFAULT);
  // Nothing to copy: nothing asked of the kernel.
  EXPECT_EQ(cross_memory_read(getpid(), 8, local, 0), 0);
}

// Two ranks on this thread: the allgather puts this rank's record in both
// slots, then lets `mangle` change rank 1's (the probe's records first, the
// agreement's flags second).
ShmGroup two_ranks(std::function<void(uint8_t *peer, size_t bytes, int call)> mangle) {
  ShmGroup g;
  g.rank = 0;
  g.size = 2;
  auto calls = std::make_shared<int>(0);
  g.allgather = [calls, mangle](const void *mine, void *all, size_t bytes) {
    auto *out = static_cast<uint8_t *>(all);
    std::memcpy(out, mine, bytes);
    std::memcpy(out + bytes, mine, bytes);
    mangle(out + bytes, bytes, ++*calls);
    return kOk;
  };
  return g;
}

TEST(CrossMemory, ProbeAgreesWhenEveryRankCanAttach) {
  bool usable = false;
  ASSERT_EQ(probe_cross_memory(two_ranks([](uint8_t *, size_t, int) {}), true, &usable), kOk);
  EXPECT_TRUE(usable);
}

TEST(CrossMemory, ProbeRefusesAPeerThatCannotBeRead) {
  // Rank 1's record zeroed: process 0, address 0.
  bool usable = true;
  ASSERT_EQ(probe_cross_memory(two_ranks([](uint8_t *peer, size_t bytes, int call) {
                                 if (call == 1) std::memset(peer, 0, bytes);
                               }),
                               true, &usable),
            kOk);
  EXPECT_FALSE(usable);
  // Rank 1's record names this process but promises another word.
  usable = true;
  ASSERT_EQ(probe_cross_memory(two_ranks([](uint8_t *peer, size_t bytes, int call) {
                                 if (call == 1) peer[bytes - 1] ^= 0xff;
                               }),
                               true, &usable),
            kOk);
  EXPECT_FALSE(usable);
  // This rank could read rank 1, but rank 1 says it could not read us.
  usable = true;
  ASSERT_EQ(probe_cross_memory(two_ranks([](uint8_t *peer, size_t bytes, int call) {
                                 if (call == 2) std::memset(peer, 0, bytes);
                               }),
                               true, &usable),
            kOk);
  EXPECT_FALSE(usable);
}

// A rank whose knob says never: off, even though every read would work.
TEST(CrossMemory, ProbeIsOffWhenARankDoesNotWantIt) {
  bool usable = true;
  ASSERT_EQ(probe_cross_memory(two_ranks([](uint8_t *, size_t, int) {}), false, &usable), kOk);
  EXPECT_FALSE(usable);
}

TEST(CrossMemory, ProbeFailsWhenTheExchangeFails) {
  ShmGroup g;
  g.size = 2;
  g.allgather = [](const void *, void *, size_t) {
    return fail(QUORUM_ERR_BOOTSTRAP, "test", "allgather fails");
  };
  bool usable = true;
  EXPECT_EQ(probe_cross_memory(g, true, &usable), QUORUM_ERR_BOOTSTRAP);
  EXPECT_FALSE(usable);
}

}  // namespace
}  // namespace quorum
