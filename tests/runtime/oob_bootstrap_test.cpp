// oob_bootstrap_test.cpp: make_oob_bootstrap over a caller-supplied allgather
// (here one built on a ThreadGroup), its validation and a failing callback.
#include <gtest/gtest.h>

#include <thread>

#include "runtime/bootstrap/bootstrap.hpp"
#include "runtime/bootstrap/thread_group_bootstrap.hpp"

namespace quorum {
namespace {

struct ThreadOobContext {
  std::shared_ptr<ThreadGroup> group;
  int rank;
};

int thread_allgather(const void *send, void *recv, size_t bytes, void *ctx) {
  auto *c = static_cast<ThreadOobContext *>(ctx);
  return c->group->allgather(c->rank, send, recv, bytes) == kOk ? 0 : 1;
}

int failing_allgather(const void *, void *, size_t, void *) {
  return -3;
}

TEST(OobBootstrap, AllgatherThroughTheCallersFunction) {
  constexpr int kSize = 4;
  auto group = ThreadGroup::create(kSize);
  std::vector<Status> status(kSize, QUORUM_ERR_INTERNAL);
  std::vector<std::thread> threads;
  for (int r = 0; r < kSize; ++r) {
    threads.emplace_back([&, r] {
      ThreadOobContext ctx{group, r};
      quorum_oob_t oob{r, kSize, thread_allgather, &ctx};
      std::unique_ptr<Bootstrap> b;
      status[r] = make_oob_bootstrap(&oob, &b);
      if (status[r] != kOk) return;
      if (b->rank() != r || b->size() != kSize) {
        status[r] = QUORUM_ERR_INTERNAL;
        return;
      }
      uint64_t in = 1000 + r, out[kSize] = {};
      status[r] = b->allgather(&in, out, sizeof(in));
      for (int q = 0; q < kSize && status[r] == kOk; ++q) {
        if (out[q] != 1000u + q) status[r] = QUORUM_ERR_INTERNAL;
      }
      if (status[r] == kOk) status[r] = b->barrier();
    });
  }
  for (auto &t : threads) t.join();
  for (int r = 0; r < kSize; ++r) EXPECT_EQ(status[r], kOk) << "rank " << r;
}

TEST(OobBootstrap, FailingCallbackIsABootstrapError) {
  quorum_oob_t oob{0, 2, failing_allgather, nullptr};
  std::unique_ptr<Bootstrap> b;
  ASSERT_EQ(make_oob_bootstrap(&oob, &b), kOk);
  int in = 0, out[2];
  EXPECT_EQ(b->allgather(&in, out, sizeof(int)), QUORUM_ERR_BOOTSTRAP);
  EXPECT_NE(std::string(last_error()).find("returned -3"), std::string::npos) << last_error();
  EXPECT_EQ(b->barrier(), QUORUM_ERR_BOOTSTRAP);
}

TEST(OobBootstrap, Validation) {
  std::unique_ptr<Bootstrap> b;
  EXPECT_EQ(make_oob_bootstrap(nullptr, &b), QUORUM_ERR_INVALID_ARG);
  quorum_oob_t no_fn{0, 1, nullptr, nullptr};
  EXPECT_EQ(make_oob_bootstrap(&no_fn, &b), QUORUM_ERR_INVALID_ARG);
  EXPECT_NE(std::string(last_error()).find("allgather"), std::string::npos);
  for (auto [rank, size] : {std::pair{-1, 2}, {2, 2}, {0, 0}, {0, -1}}) {
    quorum_oob_t bad{rank, size, failing_allgather, nullptr};
    EXPECT_EQ(make_oob_bootstrap(&bad, &b), QUORUM_ERR_INVALID_ARG) << rank << "/" << size;
  }
  EXPECT_FALSE(b);
}

}  // namespace
}  // namespace quorum
