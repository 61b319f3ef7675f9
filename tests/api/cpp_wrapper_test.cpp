// cpp_wrapper_test.cpp: the C++ wrapper over the C API, with ranks as threads
// handed over through quorum_init_oob (the allgather is a thread barrier).
#include <gtest/gtest.h>

#include <thread>
#include <vector>

#include "quorum/quorum.hpp"
#include "runtime/bootstrap/thread_group_bootstrap.hpp"

namespace {

struct ThreadOob {
  std::shared_ptr<quorum::ThreadGroup> group;
  int rank;
};

int thread_allgather(const void *send, void *recv, size_t bytes, void *ctx) {
  auto *o = static_cast<ThreadOob *>(ctx);
  return o->group->allgather(o->rank, send, recv, bytes) == QUORUM_OK ? 0 : 1;
}

TEST(CppWrapper, AllreduceAndRequestsOverOob) {
  constexpr int p = 3;
  auto group = quorum::ThreadGroup::create(p);
  std::vector<std::thread> threads;
  for (int r = 0; r < p; ++r) {
    threads.emplace_back([group, r, p] {
      ThreadOob ctx{group, r};
      quorum_oob_t oob{r, p, thread_allgather, &ctx};
      // Ranks in one process: pick the inproc transport explicitly.
      quorum::Comm comm(oob);
      EXPECT_EQ(comm.rank(), r);
      EXPECT_EQ(comm.size(), p);
      std::vector<int64_t> v(1000, r + 1);
      comm.allreduce(v.data(), v.size());
      EXPECT_EQ(v[999], 6);
      std::vector<float> in(10, 1.0f), out(10);
      auto req = comm.iallreduce(in.data(), out.data(), in.size(), QUORUM_MAX);
      req.wait();
      EXPECT_EQ(out[0], 1.0f);
      {
        // The non-blocking rooted and personalised forms, all in flight at once.
        std::vector<int32_t> mine(2, r), gathered(2 * p, -1), blocks(2 * p), got(2, -1);
        std::vector<int32_t> to_all(p, r), from_all(p, -1);
        std::vector<int64_t> one(4, r + 1), summed(4, 0);
        for (int k = 0; k < 2 * p; ++k) blocks[static_cast<size_t>(k)] = 10 + k;
        quorum::Request reqs[] = {comm.ireduce(one.data(), summed.data(), one.size(), 0),
                                  comm.igather(mine.data(), gathered.data(), 8, 1),
                                  comm.iscatter(blocks.data(), got.data(), 8, 2),
                                  comm.ialltoall(to_all.data(), from_all.data(), 4)};
        for (auto &q : reqs) q.wait();
        if (r == 0) {
          EXPECT_EQ(summed[3], 6);
        }
        if (r == 1) {
          EXPECT_EQ(gathered[5], 2);
        }
        EXPECT_EQ(got[1], 10 + 2 * r + 1);
        EXPECT_EQ(from_all[2], 2);
      }
      {
        quorum::SharedBuffer<int32_t> shared(comm, 100000);  // plain memory over inproc
        for (size_t i = 0; i < shared.size(); ++i) shared[i] = r + static_cast<int32_t>(i % 9);
        comm.allreduce(shared.data(), shared.size());
        EXPECT_EQ(shared[99999], 3 + 3 * (99999 % 9));
      }
      try {
        // count * 8 would wrap around to 8 B.
        quorum::SharedBuffer<int64_t> huge(comm, SIZE_MAX / 8 + 2);
        ADD_FAILURE() << "a SharedBuffer of " << huge.size() << " elements did not throw";
      } catch (const quorum::Error &e) {
        EXPECT_EQ(e.status(), QUORUM_ERR_INVALID_ARG);
        EXPECT_NE(std::string(e.what()).find("overflows"), std::string::npos) << e.what();
      }
      try {
        comm.bcast(v.data(), 8, 17);
        ADD_FAILURE() << "bcast with root 17 did not throw";
      } catch (const quorum::Error &e) {
        EXPECT_EQ(e.status(), QUORUM_ERR_INVALID_ARG);
        EXPECT_NE(std::string(e.what()).find("root 17"), std::string::npos) << e.what();
      }
      {
        quorum_partial_opts_t opts{QUORUM_PARTIAL_SOLO, 2, 1, 7, 0, 0, 0};
        quorum::Partial<int64_t> partial(comm, 4, opts);
        int64_t total = 0;
        std::vector<int64_t> mine(4, r + 1), result(4);
        for (int step = 0; step < 5; ++step) {
          partial.post(mine.data());
          quorum_round_info_t info = partial.wait(result.data());
          EXPECT_EQ(info.round, static_cast<unsigned long long>(step));
          quorum_round_stats_t stats = partial.last_round_stats();
          EXPECT_GE(stats.complete_ns, stats.join_ns);
          EXPECT_EQ(stats.own_carried == 0, stats.own_staleness == 0);
          total += result[0];
        }
        partial.post(mine.data());
        const int64_t *lent = partial.wait_ref();  // valid until the next call
        total += lent[0];
        partial.flush(result.data());
        total += result[0];
        EXPECT_EQ(partial.rounds_behind(), 0u) << "nobody posted after the flush";
        EXPECT_EQ(total, 6 * 6) << "every contribution lands in exactly one round";
        partial.destroy();
      }
      {
        // k-of-P quorum with k = P = 3: every round waits for every post.
        quorum::Partial<int64_t> partial(comm, 4, quorum::partial_quorum_options(3, 4));
        std::vector<int64_t> mine(4, r + 1), result(4);
        for (int step = 0; step < 3; ++step) {
          partial.post(mine.data());
          quorum_round_info_t info = partial.wait(result.data());
          EXPECT_EQ(info.fresh, 3) << "rank " << r << " round " << step;
          EXPECT_EQ(result[0], 6) << "rank " << r << " round " << step;
        }
        partial.destroy();
      }
      comm.finalize();
    });
  }
  for (auto &t : threads) t.join();
}

// finalize() with a Request in flight throws and keeps the Comm usable; once
// the Request is waited it finalizes.
TEST(CppWrapper, FinalizeWithARequestInFlight) {
  constexpr int p = 2;
  auto group = quorum::ThreadGroup::create(p);
  std::vector<std::thread> threads;
  for (int r = 0; r < p; ++r) {
    threads.emplace_back([group, r] {
      ThreadOob ctx{group, r};
      quorum_oob_t oob{r, p, thread_allgather, &ctx};
      quorum::Comm comm(oob);
      std::vector<int32_t> in(100, r + 1), v(100, 0);
      quorum::Request req = comm.iallreduce(in.data(), v.data(), v.size());
      try {
        comm.finalize();
        ADD_FAILURE() << "finalize with a request in flight did not throw";
      } catch (const quorum::Error &e) {
        EXPECT_EQ(e.status(), QUORUM_ERR_INVALID_ARG);
        EXPECT_NE(std::string(e.what()).find("in flight"), std::string::npos) << e.what();
      }
      ASSERT_NE(comm.handle(), nullptr);
      comm.barrier();
      req.wait();
      EXPECT_EQ(v[99], 3);
      comm.finalize();
      EXPECT_EQ(comm.handle(), nullptr);
    });
  }
  for (auto &t : threads) t.join();
}

TEST(CppWrapper, OobWithBadArgumentsIsRejected) {
  quorum_oob_t oob{3, 2, thread_allgather, nullptr};
  quorum_comm_t c = nullptr;
  EXPECT_EQ(quorum_init_oob(&oob, &c), QUORUM_ERR_INVALID_ARG);
  EXPECT_EQ(quorum_init_oob(nullptr, &c), QUORUM_ERR_INVALID_ARG);
  oob = {0, 2, nullptr, nullptr};
  EXPECT_EQ(quorum_init_oob(&oob, &c), QUORUM_ERR_INVALID_ARG);
}

// split, dup, send/recv and the rooted collectives through the wrapper.
TEST(CppWrapperMpiStyle, SplitSendRecvAndRooted) {
  constexpr int p = 4;
  auto group = quorum::ThreadGroup::create(p);
  std::vector<std::thread> threads;
  for (int r = 0; r < p; ++r) {
    threads.emplace_back([group, r] {
      ThreadOob ctx{group, r};
      quorum_oob_t oob{r, p, thread_allgather, &ctx};
      quorum::Comm comm(oob);
      quorum::Comm half = comm.split(r % 2, -r);  // ranks 2, 0 and 3, 1
      ASSERT_TRUE(half.valid());
      EXPECT_EQ(half.size(), 2);
      EXPECT_EQ(half.rank(), r < 2 ? 1 : 0);
      int64_t sum = r;
      half.allreduce(&sum, 1);
      EXPECT_EQ(sum, r % 2 == 0 ? 2 : 4);
      int32_t token = r, got = -1;
      if (half.rank() == 0) {
        half.send(&token, sizeof token, 1, 5);
      } else {
        auto req = half.irecv(&got, sizeof got, 0, 5);
        req.wait();
        EXPECT_EQ(got, r + 2);
      }
      half.finalize();
      quorum::Comm none = comm.split(r == 0 ? QUORUM_UNDEFINED : 1, 0);
      EXPECT_EQ(none.valid(), r != 0);
      if (none.valid()) none.finalize();
      quorum::Comm dup = comm.dup();
      std::vector<double> v(8, r + 1.0), out(8, 0);
      dup.reduce(v.data(), out.data(), v.size(), 3);
      if (r == 3) {
        EXPECT_EQ(out[7], 10.0);
      }
      std::vector<int32_t> all(p, -1), back(1, -1);
      dup.gather(&token, all.data(), sizeof token, 1);
      if (r == 1) {
        EXPECT_EQ(all, (std::vector<int32_t>{0, 1, 2, 3}));
      }
      std::vector<int32_t> blocks{10, 11, 12, 13};
      dup.scatter(blocks.data(), back.data(), sizeof(int32_t), 2);
      EXPECT_EQ(back[0], 10 + r);
      std::vector<int32_t> mine{r * 4, r * 4 + 1, r * 4 + 2, r * 4 + 3}, theirs(p, -1);
      dup.alltoall(mine.data(), theirs.data(), sizeof(int32_t));
      for (int j = 0; j < p; ++j) EXPECT_EQ(theirs[static_cast<size_t>(j)], j * 4 + r);
      dup.finalize();
      try {
        int32_t x = 0;
        comm.send(&x, sizeof x, r, 0);
        ADD_FAILURE() << "a send to itself did not throw";
      } catch (const quorum::Error &e) {
        EXPECT_EQ(e.status(), QUORUM_ERR_INVALID_ARG);
      }
    });
  }
  for (auto &t : threads) t.join();
}

}  // namespace
