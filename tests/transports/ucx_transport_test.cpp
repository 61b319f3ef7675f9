// ucx_transport_test.cpp: the UCX transport with ranks as threads of this
// process (each rank its own UCX context and worker): message sizes, tag
// matching and ordering, unexpected messages, truncation, cancel, event-fd
// wakeup, all-to-all among several ranks, and argument errors.
#include "transports/ucx/ucx_transport.hpp"

#include <gtest/gtest.h>
#include <poll.h>

#include <chrono>
#include <cstring>
#include <optional>
#include <thread>
#include <vector>

#include "runtime/knobs.hpp"
#include "tests/transports/transport_test_util.hpp"
#include "transports/ucx/ucx_info.hpp"

namespace quorum {
namespace {

using test::progress_until;
using test::run_ranks;
using test::wait_all;
using test::wait_request;

// A byte pattern that differs by source, tag and position.
std::vector<uint8_t> pattern(size_t bytes, int source, uint64_t tag) {
  std::vector<uint8_t> data(bytes);
  for (size_t i = 0; i < bytes; ++i) {
    data[i] = static_cast<uint8_t>((i * 131 + static_cast<size_t>(source) * 17 + tag * 7) & 0xff);
  }
  return data;
}

// Index of the first differing byte, or -1.
long first_difference(const std::vector<uint8_t> &a, const std::vector<uint8_t> &b) {
  if (a.size() != b.size()) return 0;
  for (size_t i = 0; i < a.size(); ++i) {
    if (a[i] != b[i]) return static_cast<long>(i);
  }
  return -1;
}

TEST(UcxTransport, DescribesItself) {
  run_ranks(2, make_ucx_transport, [](Transport &t, Bootstrap &) {
    EXPECT_STREQ(t.name(), "ucx");
    std::string description = t.description();
    EXPECT_EQ(description.rfind("ucx " + ucx_version(), 0), 0u) << description;
    EXPECT_NE(description.find('('), std::string::npos) << "no transports named: " << description;
    EXPECT_TRUE(t.supports_memory(MemoryType::Host));
    EXPECT_GE(t.event_fd(), 0);
  });
}

TEST(UcxTransport, PingPongManySizes) {
  const std::vector<size_t> sizes = {0, 1, 8, 4096, 65536, size_t{1} << 20, size_t{16} << 20};
  run_ranks(2, make_ucx_transport, [&](Transport &t, Bootstrap &) {
    int me = t.rank();
    int other = 1 - me;
    for (size_t round = 0; round < sizes.size(); ++round) {
      size_t bytes = sizes[round];
      uint64_t tag = round;
      std::vector<uint8_t> out = pattern(bytes, me, tag);
      std::vector<uint8_t> in(bytes, 0xee);
      std::vector<uint8_t> expected = pattern(bytes, other, tag);
      TransportRequest sreq, rreq;
      if (me == 0) {
        ASSERT_EQ(t.send(other, tag, out.data(), bytes, &sreq), kOk);
        ASSERT_EQ(t.recv(other, tag, in.data(), bytes, &rreq), kOk);
      } else {
        ASSERT_EQ(t.recv(other, tag, in.data(), bytes, &rreq), kOk);
        ASSERT_TRUE(wait_request(t, rreq)) << "rank 1 recv of " << bytes << " B timed out";
        ASSERT_EQ(t.send(other, tag, out.data(), bytes, &sreq), kOk);
      }
      ASSERT_TRUE(wait_request(t, sreq)) << "rank " << me << " send " << bytes << " B";
      ASSERT_TRUE(wait_request(t, rreq)) << "rank " << me << " recv " << bytes << " B";
      EXPECT_EQ(sreq.state.load(), TransportRequest::Done);
      ASSERT_EQ(rreq.state.load(), TransportRequest::Done) << last_error();
      EXPECT_EQ(rreq.bytes, bytes);
      EXPECT_EQ(rreq.peer, other);
      EXPECT_EQ(first_difference(in, expected), -1)
          << "rank " << me << ", " << bytes << " B: first differing byte";
    }
  });
}

TEST(UcxTransport, TagsAreIsolated) {
  run_ranks(2, make_ucx_transport, [](Transport &t, Bootstrap &bootstrap) {
    const uint64_t tag_a = 5, tag_b = kTagMask;  // the largest tag too
    if (t.rank() == 0) {
      uint64_t a = 111, b = 222;
      std::vector<TransportRequest> reqs(2);
      ASSERT_EQ(t.send(1, tag_a, &a, sizeof a, &reqs[0]), kOk);
      ASSERT_EQ(t.send(1, tag_b, &b, sizeof b, &reqs[1]), kOk);
      ASSERT_TRUE(wait_all(t, reqs));
    } else {
      uint64_t a = 0, b = 0;
      std::vector<TransportRequest> reqs(2);
      // Posted in the opposite order of the sends.
      ASSERT_EQ(t.recv(0, tag_b, &b, sizeof b, &reqs[1]), kOk);
      ASSERT_EQ(t.recv(0, tag_a, &a, sizeof a, &reqs[0]), kOk);
      ASSERT_TRUE(wait_all(t, reqs));
      EXPECT_EQ(a, 111u);
      EXPECT_EQ(b, 222u);
    }
    EXPECT_EQ(bootstrap.barrier(), kOk);
  });
}

TEST(UcxTransport, SourcesAreIsolated) {
  // Ranks 1 and 2 send with the same tag; rank 0 receives each by source.
  run_ranks(3, make_ucx_transport, [](Transport &t, Bootstrap &) {
    if (t.rank() == 0) {
      int64_t from2 = 0, from1 = 0;
      std::vector<TransportRequest> reqs(2);
      ASSERT_EQ(t.recv(2, 9, &from2, sizeof from2, &reqs[0]), kOk);
      ASSERT_EQ(t.recv(1, 9, &from1, sizeof from1, &reqs[1]), kOk);
      ASSERT_TRUE(wait_all(t, reqs));
      EXPECT_EQ(from1, 1001);
      EXPECT_EQ(from2, 1002);
    } else {
      int64_t value = 1000 + t.rank();
      TransportRequest req;
      ASSERT_EQ(t.send(0, 9, &value, sizeof value, &req), kOk);
      ASSERT_TRUE(wait_request(t, req));
    }
  });
}

TEST(UcxTransport, SameTagMessagesArriveInOrder) {
  constexpr int kCount = 200;
  run_ranks(2, make_ucx_transport, [](Transport &t, Bootstrap &) {
    // Mixed sizes so that eager and rendezvous messages interleave.
    auto size_of = [](int i) { return (i % 7 == 0) ? size_t{256} << 10 : size_t{64}; };
    std::vector<std::vector<uint8_t>> buffers(kCount);
    std::vector<TransportRequest> reqs(kCount);
    if (t.rank() == 0) {
      for (int i = 0; i < kCount; ++i) {
        buffers[i] = pattern(size_of(i), 0, static_cast<uint64_t>(i));
        ASSERT_EQ(t.send(1, 42, buffers[i].data(), buffers[i].size(), &reqs[i]), kOk);
      }
      ASSERT_TRUE(wait_all(t, reqs));
    } else {
      for (int i = 0; i < kCount; ++i) {
        buffers[i].assign(size_of(i), 0);
        ASSERT_EQ(t.recv(0, 42, buffers[i].data(), buffers[i].size(), &reqs[i]), kOk);
      }
      ASSERT_TRUE(wait_all(t, reqs));
      for (int i = 0; i < kCount; ++i) {
        ASSERT_EQ(reqs[i].state.load(), TransportRequest::Done) << "message " << i;
        ASSERT_EQ(first_difference(buffers[i], pattern(size_of(i), 0, i)), -1)
            << "message " << i << " out of order or corrupted";
      }
    }
  });
}

TEST(UcxTransport, UnexpectedMessagesAreKept) {
  run_ranks(2, make_ucx_transport, [](Transport &t, Bootstrap &bootstrap) {
    const std::vector<size_t> sizes = {0, 8, 4096, size_t{1} << 20};
    if (t.rank() == 0) {
      std::vector<std::vector<uint8_t>> data;
      std::vector<TransportRequest> reqs(sizes.size());
      for (size_t i = 0; i < sizes.size(); ++i) data.push_back(pattern(sizes[i], 0, i));
      for (size_t i = 0; i < sizes.size(); ++i) {
        ASSERT_EQ(t.send(1, 100 + i, data[i].data(), sizes[i], &reqs[i]), kOk);
      }
      t.progress();
      ASSERT_EQ(bootstrap.barrier(), kOk);  // the receiver posts only after this
      ASSERT_TRUE(wait_all(t, reqs));
    } else {
      ASSERT_EQ(bootstrap.barrier(), kOk);
      // Let the messages land in UCX's unexpected queue before posting.
      auto until = std::chrono::steady_clock::now() + std::chrono::milliseconds(100);
      while (std::chrono::steady_clock::now() < until) {
        t.progress();
        std::this_thread::sleep_for(std::chrono::milliseconds(1));
      }
      std::vector<std::vector<uint8_t>> in;
      std::vector<TransportRequest> reqs(sizes.size());
      for (size_t i = 0; i < sizes.size(); ++i) in.emplace_back(sizes[i], 0);
      for (size_t i = sizes.size(); i-- > 0;) {
        ASSERT_EQ(t.recv(0, 100 + i, in[i].data(), sizes[i], &reqs[i]), kOk);
      }
      ASSERT_TRUE(wait_all(t, reqs));
      for (size_t i = 0; i < sizes.size(); ++i) {
        EXPECT_EQ(reqs[i].state.load(), TransportRequest::Done);
        EXPECT_EQ(reqs[i].bytes, sizes[i]);
        EXPECT_EQ(first_difference(in[i], pattern(sizes[i], 0, i)), -1) << sizes[i] << " B";
      }
    }
  });
}

TEST(UcxTransport, TruncationFailsTheReceive) {
  run_ranks(2, make_ucx_transport, [](Transport &t, Bootstrap &bootstrap) {
    // Small (eager, posted and unexpected) and large (rendezvous) messages.
    const std::vector<size_t> sent = {64, 64, size_t{1} << 20};
    const std::vector<size_t> room = {16, 16, size_t{512} << 10};
    if (t.rank() == 0) {
      std::vector<std::vector<uint8_t>> data;
      std::vector<TransportRequest> reqs(sent.size());
      for (size_t i = 0; i < sent.size(); ++i) data.push_back(pattern(sent[i], 0, i));
      // Message 1 is sent before the receiver posts (unexpected path).
      ASSERT_EQ(t.send(1, 1, data[1].data(), sent[1], &reqs[1]), kOk);
      ASSERT_EQ(bootstrap.barrier(), kOk);
      ASSERT_EQ(bootstrap.barrier(), kOk);  // receiver posted 0 and 2
      ASSERT_EQ(t.send(1, 0, data[0].data(), sent[0], &reqs[0]), kOk);
      ASSERT_EQ(t.send(1, 2, data[2].data(), sent[2], &reqs[2]), kOk);
      ASSERT_TRUE(wait_all(t, reqs));
      // The transport still works afterwards.
      uint32_t ok = 77;
      TransportRequest after;
      ASSERT_EQ(t.send(1, 3, &ok, sizeof ok, &after), kOk);
      ASSERT_TRUE(wait_request(t, after));
      EXPECT_EQ(after.state.load(), TransportRequest::Done);
    } else {
      std::vector<std::vector<uint8_t>> in;
      std::vector<TransportRequest> reqs(sent.size());
      for (size_t i = 0; i < sent.size(); ++i) in.emplace_back(room[i], 0);
      ASSERT_EQ(bootstrap.barrier(), kOk);
      ASSERT_EQ(t.recv(0, 0, in[0].data(), room[0], &reqs[0]), kOk);
      ASSERT_EQ(t.recv(0, 2, in[2].data(), room[2], &reqs[2]), kOk);
      ASSERT_EQ(bootstrap.barrier(), kOk);
      // Message 1 may or may not have arrived yet: both paths must fail.
      Status posted = t.recv(0, 1, in[1].data(), room[1], &reqs[1]);
      EXPECT_TRUE(posted == kOk || posted == QUORUM_ERR_MISMATCH) << posted;
      ASSERT_TRUE(wait_all(t, reqs));
      for (size_t i = 0; i < sent.size(); ++i) {
        EXPECT_EQ(reqs[i].state.load(), TransportRequest::Failed) << "message " << i;
        EXPECT_EQ(reqs[i].status, QUORUM_ERR_MISMATCH) << "message " << i;
      }
      EXPECT_NE(std::string(last_error()).find("truncated"), std::string::npos) << last_error();
      uint32_t value = 0;
      TransportRequest after;
      ASSERT_EQ(t.recv(0, 3, &value, sizeof value, &after), kOk);
      ASSERT_TRUE(wait_request(t, after));
      EXPECT_EQ(after.state.load(), TransportRequest::Done);
      EXPECT_EQ(value, 77u);
    }
  });
}

TEST(UcxTransport, CancelWithdrawsAPostedReceive) {
  run_ranks(2, make_ucx_transport, [](Transport &t, Bootstrap &bootstrap) {
    if (t.rank() == 1) {
      uint64_t stale = 0;
      TransportRequest req;
      ASSERT_EQ(t.recv(0, 7, &stale, sizeof stale, &req), kOk);
      t.cancel(&req);
      EXPECT_TRUE(req.pending()) << "cancel completes in a later progress()";
      ASSERT_TRUE(wait_request(t, req));
      EXPECT_EQ(req.state.load(), TransportRequest::Failed);
      t.cancel(&req);  // already complete: nothing happens
      ASSERT_EQ(bootstrap.barrier(), kOk);
      // The message sent now goes to the new receive, not the canceled one.
      uint64_t fresh = 0;
      TransportRequest again;
      ASSERT_EQ(t.recv(0, 7, &fresh, sizeof fresh, &again), kOk);
      ASSERT_TRUE(wait_request(t, again));
      EXPECT_EQ(again.state.load(), TransportRequest::Done);
      EXPECT_EQ(fresh, 4242u);
      EXPECT_EQ(stale, 0u);
    } else {
      ASSERT_EQ(bootstrap.barrier(), kOk);
      uint64_t value = 4242;
      TransportRequest req;
      ASSERT_EQ(t.send(1, 7, &value, sizeof value, &req), kOk);
      ASSERT_TRUE(wait_request(t, req));
    }
  });
}

TEST(UcxTransport, EventFdWakesOnArrival) {
  run_ranks(2, make_ucx_transport, [](Transport &t, Bootstrap &bootstrap) {
    if (t.rank() == 1) {
      uint64_t value = 0;
      TransportRequest req;
      ASSERT_EQ(t.recv(0, 3, &value, sizeof value, &req), kOk);
      // Progress until the worker can be armed (nothing is in flight).
      ASSERT_TRUE(progress_until(t, [&] { return t.arm(); }));
      ASSERT_EQ(bootstrap.barrier(), kOk);  // now the sender sends
      pollfd fd{t.event_fd(), POLLIN, 0};
      int ready = poll(&fd, 1, 10000);
      EXPECT_EQ(ready, 1) << "no wakeup within 10 s";
      ASSERT_TRUE(wait_request(t, req));
      EXPECT_EQ(req.state.load(), TransportRequest::Done);
      EXPECT_EQ(value, 31337u);
    } else {
      ASSERT_EQ(bootstrap.barrier(), kOk);
      uint64_t value = 31337;
      TransportRequest req;
      ASSERT_EQ(t.send(1, 3, &value, sizeof value, &req), kOk);
      ASSERT_TRUE(wait_request(t, req));
    }
  });
}

void all_to_all(int size) {
  run_ranks(size, make_ucx_transport, [size](Transport &t, Bootstrap &) {
    constexpr size_t kBytes = 4096;
    constexpr int kRounds = 3;
    int me = t.rank();
    for (int round = 0; round < kRounds; ++round) {
      std::vector<std::vector<uint8_t>> out(size), in(size);
      std::vector<TransportRequest> reqs(2 * size);
      for (int p = 0; p < size; ++p) {
        if (p == me) continue;
        uint64_t tag = static_cast<uint64_t>(round * 1000 + me * 10 + p);
        in[p].assign(kBytes, 0);
        ASSERT_EQ(t.recv(p, static_cast<uint64_t>(round * 1000 + p * 10 + me), in[p].data(), kBytes,
                         &reqs[2 * p]),
                  kOk);
        out[p] = pattern(kBytes, me, tag);
        ASSERT_EQ(t.send(p, tag, out[p].data(), kBytes, &reqs[2 * p + 1]), kOk);
      }
      for (int p = 0; p < size; ++p) {
        if (p == me) continue;
        ASSERT_TRUE(wait_request(t, reqs[2 * p])) << "rank " << me << " from " << p;
        ASSERT_TRUE(wait_request(t, reqs[2 * p + 1])) << "rank " << me << " to " << p;
        EXPECT_EQ(reqs[2 * p].state.load(), TransportRequest::Done);
        EXPECT_EQ(first_difference(in[p], pattern(kBytes, p, round * 1000 + p * 10 + me)), -1)
            << "rank " << me << " round " << round << " from " << p;
      }
    }
  });
}

TEST(UcxTransport, AllToAllThreeRanks) {
  all_to_all(3);
}
TEST(UcxTransport, AllToAllFourRanks) {
  all_to_all(4);
}
TEST(UcxTransport, AllToAllEightRanks) {
  all_to_all(8);
}

TEST(UcxTransport, RejectsInvalidArguments) {
  run_ranks(2, make_ucx_transport, [](Transport &t, Bootstrap &) {
    uint64_t value = 0;
    TransportRequest req;
    EXPECT_EQ(t.send(t.rank(), 1, &value, sizeof value, &req), QUORUM_ERR_INVALID_ARG);
    EXPECT_EQ(req.state.load(), TransportRequest::Failed);
    EXPECT_EQ(t.recv(2, 1, &value, sizeof value, &req), QUORUM_ERR_INVALID_ARG);
    EXPECT_EQ(t.recv(-1, 1, &value, sizeof value, &req), QUORUM_ERR_INVALID_ARG);
    EXPECT_EQ(t.send(1 - t.rank(), kTagMask + 1, &value, sizeof value, &req),
              QUORUM_ERR_INVALID_ARG);
    EXPECT_EQ(req.status, QUORUM_ERR_INVALID_ARG);
    EXPECT_FALSE(t.peer_failed(1 - t.rank()));
    EXPECT_FALSE(t.peer_failed(99));
  });
}

TEST(UcxTransport, UnusedTransportIsHarmless) {
  auto t = make_ucx_transport();
  uint64_t value = 0;
  TransportRequest req;
  EXPECT_EQ(t->send(1, 1, &value, sizeof value, &req), QUORUM_ERR_INVALID_ARG);
  EXPECT_FALSE(t->progress());
  EXPECT_EQ(t->event_fd(), -1);
  auto single = make_single_bootstrap();
  EXPECT_EQ(t->shutdown(*single), kOk);
}

TEST(UcxTransport, SingleRank) {
  auto t = make_ucx_transport();
  auto single = make_single_bootstrap();
  ASSERT_EQ(t->init(*single), kOk) << last_error();
  EXPECT_EQ(t->size(), 1);
  EXPECT_FALSE(t->progress());
  EXPECT_EQ(t->shutdown(*single), kOk);
}

TEST(UcxTransport, InitFailsCleanlyWhenAPeerNeverJoins) {
  knob_timeout_ms.set_override("300");
  auto group = ThreadGroup::create(2);
  auto bootstrap = group->bootstrap(0);
  auto t = make_ucx_transport();
  EXPECT_EQ(t->init(*bootstrap), QUORUM_ERR_TIMEOUT);
  EXPECT_EQ(t->event_fd(), -1);
  EXPECT_FALSE(t->progress());
  EXPECT_FALSE(t->arm());
  knob_timeout_ms.set_override(std::nullopt);
}

TEST(UcxTransport, DestroyWithoutShutdownFailsPendingRequests) {
  auto group = ThreadGroup::create(2);
  std::vector<std::thread> threads;
  for (int r = 0; r < 2; ++r) {
    threads.emplace_back([&, r] {
      auto bootstrap = group->bootstrap(r);
      TransportRequest req;
      uint64_t value = 0;
      {
        auto t = make_ucx_transport();
        ASSERT_EQ(t->init(*bootstrap), kOk) << last_error();
        ASSERT_EQ(t->recv(1 - r, 1, &value, sizeof value, &req), kOk);
        t->progress();
        EXPECT_TRUE(req.pending());
        ASSERT_EQ(bootstrap->barrier(), kOk);
      }
      EXPECT_EQ(req.state.load(), TransportRequest::Failed);
    });
  }
  for (auto &t : threads) t.join();
}

TEST(UcxInfo, ParsesEndpointLanes) {
  const std::string text =
      "#\n# UCP endpoint\n#\n#               peer: <no debug data>\n"
      "#                 lane[0]:  8:posix/memory.0 md[4]   -> md[4]/posix/sysdev[255] am am_bw#0\n"
      "#                 lane[1]: 11:cma/memory.0 md[6]     -> md[6]/cma/sysdev[255] rma_bw#0\n"
      "#                 lane[2]:  1:tcp/lo.0 md[1]         -> md[1]/tcp/sysdev[255] keepalive\n"
      "#                tag_send: 0..<egr/short>..8185..<egr/zcopy>..20553..<rndv>..(inf)\n";
  EndpointLanes lanes = parse_endpoint_lanes(text);
  EXPECT_EQ(describe_lanes(lanes), "cma, posix, tcp; lo, memory");
  EXPECT_EQ(describe_lanes(parse_endpoint_lanes("garbage\nlane[x]: nothing\n")), "");
}

}  // namespace
}  // namespace quorum
