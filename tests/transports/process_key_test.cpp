// process_key_test.cpp: ranks in separate processes that share a pid number
// (each in its own PID namespace, e.g. a container where the application is
// PID 1) are not taken for threads of one process.
#include "transports/process_key.hpp"

#include <gtest/gtest.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstring>
#include <thread>

#include "transports/inproc/inproc_transport.hpp"
#include "transports/transport.hpp"

namespace quorum {
namespace {

// Rank 0 of 2, whose peer is a process in another PID namespace with the same
// pid: it sends what this rank sends, except that a ProcessKey at the start of
// the blob (the transports' process check) carries another nonce.
class OtherNamespacePeer : public Bootstrap {
 public:
  const char *name() const override { return "other-namespace"; }
  int rank() const override { return 0; }
  int size() const override { return 2; }
  Status allgather(const void *in, void *out, size_t bytes) override {
    auto *o = static_cast<uint8_t *>(out);
    std::memcpy(o, in, bytes);
    std::memcpy(o + bytes, in, bytes);
    if (bytes >= sizeof(ProcessKey)) {
      ProcessKey peer;
      std::memcpy(&peer, in, sizeof(peer));
      peer.nonce ^= 0x5a5a;
      std::memcpy(o + bytes, &peer, sizeof(peer));
    }
    return kOk;
  }
};

TEST(ProcessKey, EqualPidsWithDifferentNoncesAreDifferentProcesses) {
  ProcessKey a{1, 0x1111};
  ProcessKey b{1, 0x2222};
  EXPECT_NE(a, b);
  EXPECT_EQ(a, (ProcessKey{1, 0x1111}));
  EXPECT_NE(a, (ProcessKey{2, 0x1111}));
}

TEST(ProcessKey, OneKeyForEveryThreadOfTheProcess) {
  ProcessKey here = ProcessKey::self();
  EXPECT_EQ(here.pid, getpid());
  EXPECT_NE(here.nonce, 0u);
  ProcessKey there{};
  std::thread([&] { there = ProcessKey::self(); }).join();
  EXPECT_EQ(here, there);
  EXPECT_EQ(here, ProcessKey::self());
}

TEST(ProcessKey, ForkedChildDrawsItsOwnNonce) {
  ProcessKey parent = ProcessKey::self();
  int fds[2];
  ASSERT_EQ(pipe(fds), 0);
  pid_t child = fork();
  ASSERT_GE(child, 0);
  if (child == 0) {
    ProcessKey k = ProcessKey::self();
    _exit(write(fds[1], &k, sizeof k) == sizeof k ? 0 : 1);
  }
  ProcessKey k{};
  ASSERT_EQ(read(fds[0], &k, sizeof k), static_cast<ssize_t>(sizeof k));
  close(fds[0]);
  close(fds[1]);
  int status = 0;
  waitpid(child, &status, 0);
  EXPECT_EQ(k.pid, child);
  EXPECT_NE(k.nonce, parent.nonce) << "a child in a new PID namespace could have its parent's pid";
}

TEST(ProcessKey, AutoSelectionTakesAPeerWithThisPidForAnotherProcess) {
  OtherNamespacePeer bootstrap;
  std::unique_ptr<Transport> transport;
  ASSERT_EQ(create_transport("auto", bootstrap, &transport), kOk) << last_error();
  EXPECT_STRNE(transport->name(), "inproc")
      << "inproc would map the peer to this process's own mailbox";
}

TEST(ProcessKey, InprocRefusesAPeerWithThisPidInAnotherProcess) {
  OtherNamespacePeer bootstrap;
  std::unique_ptr<Transport> transport = make_inproc_transport();
  EXPECT_EQ(transport->init(bootstrap), QUORUM_ERR_TRANSPORT);
  EXPECT_NE(std::string(last_error()).find("inproc needs every rank in one process"),
            std::string::npos)
      << last_error();
}

}  // namespace
}  // namespace quorum
