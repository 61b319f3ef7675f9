// finalize_test.cpp: finalize with requests in flight. A plain finalize
// refuses, naming how many, and leaves the communicator usable; the forced
// one (the destructor's) aborts them and drains them first, so a request the
// caller still holds is complete and uses nothing of the freed communicator.
#include <gtest/gtest.h>

#include <string>
#include <thread>
#include <vector>

#include "runtime/bootstrap/thread_group_bootstrap.hpp"
#include "tests/support/thread_ranks.hpp"

namespace quorum {
namespace {

using test::run_ranks;

bool mentions(const std::string &text, const std::string &what) {
  return text.find(what) != std::string::npos;
}

TEST(Finalize, RefusedWhileRequestsAreLiveThenWorks) {
  for (int p : {1, 3}) {
    run_ranks(p, [p](Communicator &c) {
      std::vector<int32_t> a(1000, c.rank()), b(10, 1);
      RequestPtr ra, rb;
      ASSERT_EQ(c.iallreduce(QUORUM_IN_PLACE, a.data(), a.size(), QUORUM_INT32, QUORUM_SUM, &ra),
                QUORUM_OK);
      ASSERT_EQ(c.iallreduce(QUORUM_IN_PLACE, b.data(), b.size(), QUORUM_INT32, QUORUM_SUM, &rb),
                QUORUM_OK);
      EXPECT_EQ(c.live_requests(), 2u);
      EXPECT_EQ(c.finalize(), QUORUM_ERR_INVALID_ARG);
      EXPECT_TRUE(mentions(last_error(), "2 requests are still in flight")) << last_error();
      EXPECT_FALSE(c.finalized());
      // Still usable: another collective, then the requests complete.
      int32_t one = 1;
      ASSERT_EQ(c.allreduce(QUORUM_IN_PLACE, &one, 1, QUORUM_INT32, QUORUM_SUM), QUORUM_OK)
          << last_error();
      EXPECT_EQ(one, p);
      ASSERT_EQ(c.wait(ra), QUORUM_OK) << last_error();
      EXPECT_EQ(a[999], p * (p - 1) / 2);
      EXPECT_EQ(c.finalize(), QUORUM_ERR_INVALID_ARG);
      EXPECT_TRUE(mentions(last_error(), "1 request is still in flight")) << last_error();
      bool done = false;
      while (!done) ASSERT_EQ(c.test(rb, &done), QUORUM_OK) << last_error();
      EXPECT_EQ(b[9], p);
      EXPECT_EQ(c.wait(ra), QUORUM_OK) << "a second wait releases nothing twice";
      EXPECT_EQ(c.live_requests(), 0u);
      EXPECT_EQ(c.finalize(), QUORUM_OK) << last_error();
      EXPECT_TRUE(c.finalized());
    });
  }
}

TEST(Finalize, DroppedCompletedRequestsDoNotCount) {
  run_ranks(2, [](Communicator &c) {
    int32_t x = 1;
    RequestPtr r;
    ASSERT_EQ(c.iallreduce(QUORUM_IN_PLACE, &x, 1, QUORUM_INT32, QUORUM_SUM, &r), QUORUM_OK);
    ASSERT_EQ(c.barrier(), QUORUM_OK);
    while (!r->complete()) c.engine().progress_once();
    c.engine().progress_once();  // under its mutex: the pass that completed it has ended
    r.reset();                   // never waited, but gone: nobody can wait on it later
    EXPECT_EQ(c.live_requests(), 0u);
  });
}

// Rank 0 starts an allreduce rank 1 never joins and destroys its
// communicator: the forced finalize fails the request and stops it before
// the engine, scratch buffers and transport go.
TEST(Finalize, ForcedFinalizeAbortsAndDrainsRequestsInFlight) {
  auto group = ThreadGroup::create(2);
  std::vector<std::thread> threads;
  RequestPtr orphan;
  std::vector<float> big(1 << 16, 1.0f);  // scratch-pool leases and rendezvous sends
  for (int r = 0; r < 2; ++r) {
    threads.emplace_back([&, r] {
      CommOptions o;
      o.transport = "inproc";
      std::unique_ptr<Communicator> c;
      ASSERT_EQ(Communicator::create(group->bootstrap(r), &c, o), QUORUM_OK) << last_error();
      if (r == 0) {
        ASSERT_EQ(c->iallreduce(QUORUM_IN_PLACE, big.data(), big.size(), QUORUM_FLOAT32, QUORUM_SUM,
                                &orphan),
                  QUORUM_OK);
        EXPECT_EQ(c->finalize(), QUORUM_ERR_INVALID_ARG);
        c.reset();  // ~Communicator: finalize(true)
      } else {
        EXPECT_EQ(c->finalize(), QUORUM_OK) << last_error();
      }
    });
  }
  for (auto &t : threads) t.join();
  ASSERT_NE(orphan, nullptr);
  EXPECT_TRUE(orphan->complete());
  EXPECT_EQ(orphan->status(), QUORUM_ERR_INVALID_ARG);
  orphan.reset();  // frees its schedule and scratch lease: nothing of the communicator is used
}

}  // namespace
}  // namespace quorum
