// inproc_transport_test.cpp: the inproc transport's matching, ordering,
// eager/rendezvous paths, truncation, cancel and failure signalling.
#include <gtest/gtest.h>
#include <poll.h>

#include <thread>
#include <vector>

#include "runtime/bootstrap/thread_group_bootstrap.hpp"
#include "runtime/clock.hpp"
#include "transports/inproc/inproc_transport.hpp"

namespace quorum {
namespace {

bool wait_done(Transport &t, TransportRequest &req, int ms = 5000) {
  Deadline d = Deadline::after_ms(ms);
  while (req.pending() && !d.expired()) {
    if (!t.progress()) {
      struct pollfd p {
        t.event_fd(), POLLIN, 0
      };
      poll(&p, 1, 10);
    }
  }
  return !req.pending();
}

// Two transports connected through a thread group (init needs both threads).
struct Pair {
  std::unique_ptr<Transport> t[2];
  Pair() {
    auto group = ThreadGroup::create(2);
    std::thread other([&] {
      t[1] = make_inproc_transport();
      auto b = group->bootstrap(1);
      EXPECT_EQ(t[1]->init(*b), QUORUM_OK);
    });
    t[0] = make_inproc_transport();
    auto b = group->bootstrap(0);
    EXPECT_EQ(t[0]->init(*b), QUORUM_OK);
    other.join();
  }
};

TEST(InprocTransport, EagerAndRendezvousBothWays) {
  Pair pr;
  for (size_t n : {size_t(0), size_t(8), size_t(4096), size_t(1 << 20)}) {
    for (int recv_first = 0; recv_first < 2; ++recv_first) {
      std::vector<uint8_t> src(n + 1), dst(n + 1, 0);
      for (size_t i = 0; i < n; ++i) src[i] = static_cast<uint8_t>(i * 7 + n);
      TransportRequest s, r;
      if (recv_first) {
        ASSERT_EQ(pr.t[1]->recv(0, 5, dst.data(), n, &r), QUORUM_OK);
      }
      ASSERT_EQ(pr.t[0]->send(1, 5, src.data(), n, &s), QUORUM_OK);
      if (!recv_first) {
        ASSERT_EQ(pr.t[1]->recv(0, 5, dst.data(), n, &r), QUORUM_OK);
      }
      ASSERT_TRUE(wait_done(*pr.t[1], r));
      ASSERT_TRUE(wait_done(*pr.t[0], s));
      EXPECT_EQ(r.state.load(), TransportRequest::Done);
      EXPECT_EQ(r.bytes, n);
      EXPECT_TRUE(std::equal(src.begin(), src.begin() + n, dst.begin())) << "n=" << n;
    }
  }
}

TEST(InprocTransport, TagsAreMatchedIndependentlyAndInOrder) {
  Pair pr;
  int a1 = 1, a2 = 2, b1 = 3, got_a1 = 0, got_a2 = 0, got_b1 = 0;
  TransportRequest s1, s2, s3, r1, r2, r3;
  ASSERT_EQ(pr.t[0]->send(1, 10, &a1, 4, &s1), QUORUM_OK);
  ASSERT_EQ(pr.t[0]->send(1, 10, &a2, 4, &s2), QUORUM_OK);
  ASSERT_EQ(pr.t[0]->send(1, 11, &b1, 4, &s3), QUORUM_OK);
  ASSERT_EQ(pr.t[1]->recv(0, 11, &got_b1, 4, &r3), QUORUM_OK);
  ASSERT_EQ(pr.t[1]->recv(0, 10, &got_a1, 4, &r1), QUORUM_OK);
  ASSERT_EQ(pr.t[1]->recv(0, 10, &got_a2, 4, &r2), QUORUM_OK);
  ASSERT_TRUE(wait_done(*pr.t[1], r2));
  EXPECT_EQ(got_a1, 1);
  EXPECT_EQ(got_a2, 2);
  EXPECT_EQ(got_b1, 3);
}

TEST(InprocTransport, TruncationFailsTheReceive) {
  Pair pr;
  std::vector<uint8_t> big(100), small(10);
  TransportRequest s, r;
  ASSERT_EQ(pr.t[1]->recv(0, 1, small.data(), small.size(), &r), QUORUM_OK);
  ASSERT_EQ(pr.t[0]->send(1, 1, big.data(), big.size(), &s), QUORUM_OK);
  ASSERT_TRUE(wait_done(*pr.t[1], r));
  EXPECT_EQ(r.state.load(), TransportRequest::Failed);
  EXPECT_EQ(r.status, QUORUM_ERR_MISMATCH);
}

TEST(InprocTransport, CancelStopsAPostedReceive) {
  Pair pr;
  int x = 0;
  TransportRequest r;
  ASSERT_EQ(pr.t[1]->recv(0, 1, &x, 4, &r), QUORUM_OK);
  EXPECT_TRUE(r.pending());
  pr.t[1]->cancel(&r);
  EXPECT_FALSE(r.pending());
  // A later message with that tag is not delivered into the cancelled buffer.
  int y = 42;
  TransportRequest s;
  ASSERT_EQ(pr.t[0]->send(1, 1, &y, 4, &s), QUORUM_OK);
  EXPECT_EQ(x, 0);
}

TEST(InprocTransport, EventFdWakesOnArrival) {
  Pair pr;
  while (pr.t[1]->progress()) {
  }
  int v = 7, got = 0;
  TransportRequest r, s;
  ASSERT_EQ(pr.t[1]->recv(0, 3, &got, 4, &r), QUORUM_OK);
  std::thread sender([&] {
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
    pr.t[0]->send(1, 3, &v, 4, &s);
  });
  struct pollfd p {
    pr.t[1]->event_fd(), POLLIN, 0
  };
  EXPECT_EQ(poll(&p, 1, 5000), 1);
  sender.join();
  EXPECT_TRUE(wait_done(*pr.t[1], r));
  EXPECT_EQ(got, 7);
}

TEST(InprocTransport, DeadPeerFailsPendingAndFutureReceives) {
  Pair pr;
  int x = 0;
  TransportRequest r1, r2, s;
  ASSERT_EQ(pr.t[1]->recv(0, 1, &x, 4, &r1), QUORUM_OK);
  inproc_simulate_failure(*pr.t[0]);
  ASSERT_TRUE(wait_done(*pr.t[1], r1));
  EXPECT_EQ(r1.status, QUORUM_ERR_PEER_FAILED);
  ASSERT_EQ(pr.t[1]->recv(0, 2, &x, 4, &r2), QUORUM_OK);
  EXPECT_EQ(r2.status, QUORUM_ERR_PEER_FAILED);
  EXPECT_TRUE(pr.t[1]->peer_failed(0));
  ASSERT_EQ(pr.t[1]->send(0, 2, &x, 4, &s), QUORUM_OK);
  EXPECT_EQ(s.status, QUORUM_ERR_PEER_FAILED);
}

TEST(InprocTransport, LargeSendToAPeerThatDiesFails) {
  Pair pr;
  std::vector<uint8_t> big(1 << 20, 7);
  TransportRequest s;
  // Parked at rank 1 (no receive posted yet), then rank 1 dies.
  ASSERT_EQ(pr.t[0]->send(1, 9, big.data(), big.size(), &s), QUORUM_OK);
  EXPECT_TRUE(s.pending());
  inproc_simulate_failure(*pr.t[1]);
  ASSERT_TRUE(wait_done(*pr.t[0], s));
  EXPECT_EQ(s.status, QUORUM_ERR_PEER_FAILED);
}

}  // namespace
}  // namespace quorum
