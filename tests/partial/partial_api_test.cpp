// partial_api_test.cpp: the C API of partial collectives (quorum_partial_*),
// argument errors, misuse (post twice, flush with a post pending, destroy with
// rounds in flight, finalize before destroy), the local free, round stats, a
// single rank, and a rank that never joins (timeout).
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <thread>
#include <vector>

#include "collectives/c_api_handles.hpp"
#include "runtime/bootstrap/thread_group_bootstrap.hpp"
#include "runtime/knobs.hpp"
#include "tests/partial/partial_cases.hpp"
#include "tests/support/thread_ranks.hpp"

namespace quorum {
namespace {

using test::run_c_ranks;
using test::run_ranks;

class KnobOverride {
 public:
  KnobOverride(const char *name, const char *value) : knob_(find_knob(name)) {
    knob_->set_override(std::string(value));
  }
  ~KnobOverride() { knob_->set_override(std::nullopt); }

 private:
  KnobBase *knob_;
};

TEST(PartialCApi, SoloRoundsFlushAndInfo) {
  for (int p : {2, 3, 5}) {
    run_c_ranks(p, [p](quorum_comm_t comm) {
      const int r = quorum_comm_rank(comm);
      quorum_partial_opts_t opts{QUORUM_PARTIAL_SOLO, 2, 1, 0, 0, 0, 0};
      quorum_partial_t pa = nullptr;
      ASSERT_EQ(quorum_partial_create(comm, 3, QUORUM_FLOAT32, QUORUM_SUM, &opts, &pa), QUORUM_OK)
          << quorum_last_error();
      float in[3], out[3];
      double posted = 0, got = 0;
      for (unsigned k = 0; k < 9; ++k) {
        for (int i = 0; i < 3; ++i) in[i] = static_cast<float>(r + k + i);
        posted += in[0];
        ASSERT_EQ(quorum_partial_post(pa, in), QUORUM_OK);
        quorum_round_info_t info;
        ASSERT_EQ(quorum_partial_wait(pa, out, &info), QUORUM_OK) << quorum_last_error();
        EXPECT_EQ(info.round, k);
        EXPECT_GE(info.fresh, 1);
        EXPECT_LE(info.fresh, p);
        if (k % 3 == 2) {
          EXPECT_EQ(info.initiator, -1) << "synchronous round";
          EXPECT_EQ(info.fresh, p);
          EXPECT_EQ(info.own_fresh, 1);
        }
        got += out[0];
      }
      ASSERT_EQ(quorum_partial_flush(pa, out), QUORUM_OK) << quorum_last_error();
      got += out[0];
      double all_posted = 0;
      ASSERT_EQ(quorum_allreduce(comm, &posted, &all_posted, 1, QUORUM_FLOAT64, QUORUM_SUM),
                QUORUM_OK);
      EXPECT_EQ(got, all_posted);
      EXPECT_EQ(quorum_partial_destroy(pa), QUORUM_OK) << quorum_last_error();
    });
  }
}

// A post that misses its round rides in the next one; the round stats say so
// (own_carried, staleness in rounds; the round's totals on every rank) and carry
// timestamps in order.
TEST(PartialCApi, RoundStatsReportCarriedPosts) {
  run_c_ranks(2, [](quorum_comm_t comm) {
    const int r = quorum_comm_rank(comm);
    quorum_partial_opts_t opts{QUORUM_PARTIAL_SOLO, 8, 1, 0, 0, 0, 0};
    quorum_partial_t pa = nullptr;
    ASSERT_EQ(quorum_partial_create(comm, 2, QUORUM_INT64, QUORUM_SUM, &opts, &pa), QUORUM_OK);
    quorum_round_stats_t st{};
    EXPECT_EQ(quorum_partial_last_round_stats(nullptr, &st), QUORUM_ERR_INVALID_ARG);
    EXPECT_EQ(quorum_partial_last_round_stats(pa, nullptr), QUORUM_ERR_INVALID_ARG);
    int64_t in[2] = {1, 1}, out[2];
    quorum_round_info_t info{};
    if (r == 0) {
      // Round 0 without rank 1's post: rank 1 only joins it.
      ASSERT_EQ(quorum_partial_post(pa, in), QUORUM_OK);
      ASSERT_EQ(quorum_partial_wait(pa, out, &info), QUORUM_OK) << quorum_last_error();
      ASSERT_EQ(quorum_partial_last_round_stats(pa, &st), QUORUM_OK);
      EXPECT_EQ(st.own_carried, 0);
      EXPECT_EQ(st.carried, 0);
      EXPECT_GT(st.post_ns, 0u);
      EXPECT_GE(st.join_ns, st.post_ns);
      EXPECT_GE(st.complete_ns, st.join_ns);
      ASSERT_EQ(quorum_barrier(comm), QUORUM_OK);
    } else {
      ASSERT_EQ(quorum_barrier(comm), QUORUM_OK);         // round 0 is over
      ASSERT_EQ(quorum_partial_post(pa, in), QUORUM_OK);  // late for round 0: carried
      ASSERT_EQ(quorum_partial_wait(pa, out, &info), QUORUM_OK) << quorum_last_error();
      EXPECT_EQ(info.own_fresh, 0);
      EXPECT_EQ(out[0], 1);
      ASSERT_EQ(quorum_partial_last_round_stats(pa, &st), QUORUM_OK);
      EXPECT_EQ(st.own_carried, 0);
      EXPECT_EQ(st.post_ns, 0u);
    }
    ASSERT_EQ(quorum_barrier(comm), QUORUM_OK);  // nobody activates round 1 before that post
    // Round 1: rank 1's late post rides here, one round late.
    ASSERT_EQ(quorum_partial_post(pa, in), QUORUM_OK);
    ASSERT_EQ(quorum_partial_wait(pa, out, &info), QUORUM_OK) << quorum_last_error();
    EXPECT_EQ(info.round, 1u);
    ASSERT_EQ(quorum_partial_last_round_stats(pa, &st), QUORUM_OK);
    EXPECT_EQ(st.own_carried, r == 1 ? 1 : 0);
    EXPECT_EQ(st.own_staleness, r == 1 ? 1u : 0u);
    EXPECT_EQ(st.carried, 1);  // the round's totals, the same on both ranks
    EXPECT_EQ(st.staleness, 1u);
    ASSERT_EQ(quorum_partial_flush(pa, out), QUORUM_OK) << quorum_last_error();
    EXPECT_EQ(quorum_partial_destroy(pa), QUORUM_OK) << quorum_last_error();
  });
}

TEST(PartialCApi, ArgumentErrors) {
  run_c_ranks(2, [](quorum_comm_t comm) {
    quorum_partial_t pa = nullptr;
    EXPECT_EQ(quorum_partial_create(nullptr, 4, QUORUM_INT64, QUORUM_SUM, nullptr, &pa),
              QUORUM_ERR_INVALID_ARG);
    EXPECT_EQ(quorum_partial_create(comm, 4, QUORUM_INT64, QUORUM_SUM, nullptr, nullptr),
              QUORUM_ERR_INVALID_ARG);
    EXPECT_EQ(quorum_partial_create(comm, 0, QUORUM_INT64, QUORUM_SUM, nullptr, &pa),
              QUORUM_ERR_INVALID_ARG);
    EXPECT_NE(std::string(quorum_last_error()).find("count 0"), std::string::npos);
    EXPECT_EQ(
        quorum_partial_create(comm, 4, static_cast<quorum_dtype_t>(99), QUORUM_SUM, nullptr, &pa),
        QUORUM_ERR_INVALID_ARG);
    quorum_partial_opts_t bad{static_cast<quorum_partial_mode_t>(7), 1, 1, 0, 0, 0, 0};
    EXPECT_EQ(quorum_partial_create(comm, 4, QUORUM_INT64, QUORUM_SUM, &bad, &pa),
              QUORUM_ERR_INVALID_ARG);
    quorum_partial_opts_t huge{QUORUM_PARTIAL_SOLO, 1u << 30, 1, 0, 0, 0, 0};
    EXPECT_EQ(quorum_partial_create(comm, 4, QUORUM_INT64, QUORUM_SUM, &huge, &pa),
              QUORUM_ERR_INVALID_ARG);
    quorum_partial_opts_t slow{QUORUM_PARTIAL_SOLO, 4, 1, 0, 10000001, 0, 0};
    EXPECT_EQ(quorum_partial_create(comm, 4, QUORUM_INT64, QUORUM_SUM, &slow, &pa),
              QUORUM_ERR_INVALID_ARG);
    EXPECT_NE(std::string(quorum_last_error()).find("activation_delay_us"), std::string::npos);
    // A carry weight: in (0, 1], with carry, on a float32/float64 sum or avg.
    for (double weight : {1.5, -0.5, std::nan("")}) {
      quorum_partial_opts_t w{QUORUM_PARTIAL_SOLO, 4, 1, 0, 0, weight, 0};
      EXPECT_EQ(quorum_partial_create(comm, 4, QUORUM_FLOAT32, QUORUM_SUM, &w, &pa),
                QUORUM_ERR_INVALID_ARG)
          << weight;
      EXPECT_NE(std::string(quorum_last_error()).find("outside (0, 1]"), std::string::npos);
    }
    quorum_partial_opts_t weighted{QUORUM_PARTIAL_SOLO, 4, 1, 0, 0, 0.5, 0};
    EXPECT_EQ(quorum_partial_create(comm, 4, QUORUM_INT64, QUORUM_SUM, &weighted, &pa),
              QUORUM_ERR_INVALID_ARG);
    EXPECT_NE(std::string(quorum_last_error()).find("needs a float32 or float64 sum or avg"),
              std::string::npos);
    EXPECT_EQ(quorum_partial_create(comm, 4, QUORUM_FLOAT64, QUORUM_MAX, &weighted, &pa),
              QUORUM_ERR_INVALID_ARG);
    quorum_partial_opts_t dropped{QUORUM_PARTIAL_SOLO, 4, 0, 0, 0, 0.5, 0};
    EXPECT_EQ(quorum_partial_create(comm, 4, QUORUM_FLOAT32, QUORUM_SUM, &dropped, &pa),
              QUORUM_ERR_INVALID_ARG);
    EXPECT_NE(std::string(quorum_last_error()).find("carry off"), std::string::npos);
    // The k-of-P quorum: 1 <= k <= P (2 here), and k only in that mode.
    for (unsigned k : {0u, 3u}) {
      quorum_partial_opts_t q{QUORUM_PARTIAL_QUORUM, 4, 1, 0, 0, 0, k};
      EXPECT_EQ(quorum_partial_create(comm, 4, QUORUM_INT64, QUORUM_SUM, &q, &pa),
                QUORUM_ERR_INVALID_ARG)
          << "k = " << k;
      EXPECT_NE(std::string(quorum_last_error()).find("1 <= k <= 2"), std::string::npos)
          << quorum_last_error();
    }
    quorum_partial_opts_t solo_k{QUORUM_PARTIAL_SOLO, 4, 1, 0, 0, 0, 2};
    EXPECT_EQ(quorum_partial_create(comm, 4, QUORUM_INT64, QUORUM_SUM, &solo_k, &pa),
              QUORUM_ERR_INVALID_ARG);
    EXPECT_EQ(pa, nullptr);
    EXPECT_EQ(quorum_partial_post(nullptr, nullptr), QUORUM_ERR_INVALID_ARG);
    EXPECT_EQ(quorum_partial_post_ref(nullptr, nullptr), QUORUM_ERR_INVALID_ARG);
    EXPECT_EQ(quorum_partial_wait(nullptr, nullptr, nullptr), QUORUM_ERR_INVALID_ARG);
    EXPECT_EQ(quorum_partial_flush(nullptr, nullptr), QUORUM_ERR_INVALID_ARG);
    EXPECT_EQ(quorum_partial_destroy(nullptr), QUORUM_ERR_INVALID_ARG);
    unsigned long long behind = 7;
    EXPECT_EQ(quorum_partial_rounds_behind(nullptr, &behind), QUORUM_ERR_INVALID_ARG);

    // Defaults (NULL opts); then misuse on a live object.
    ASSERT_EQ(quorum_partial_create(comm, 4, QUORUM_INT64, QUORUM_SUM, nullptr, &pa), QUORUM_OK);
    int64_t v[4] = {1, 2, 3, 4}, out[4];
    EXPECT_EQ(quorum_partial_rounds_behind(pa, nullptr), QUORUM_ERR_INVALID_ARG);
    EXPECT_NE(std::string(quorum_last_error()).find("NULL output"), std::string::npos);
    // The other rank may have run its first rounds already: at most 2 of them.
    ASSERT_EQ(quorum_partial_rounds_behind(pa, &behind), QUORUM_OK);
    EXPECT_LE(behind, 2u);
    EXPECT_EQ(quorum_partial_post(pa, nullptr), QUORUM_ERR_INVALID_ARG);
    EXPECT_EQ(quorum_partial_wait(pa, nullptr, nullptr), QUORUM_ERR_INVALID_ARG);
    ASSERT_EQ(quorum_partial_post(pa, v), QUORUM_OK);
    EXPECT_EQ(quorum_partial_post(pa, v), QUORUM_ERR_INVALID_ARG);
    EXPECT_NE(std::string(quorum_last_error()).find("posted twice"), std::string::npos)
        << quorum_last_error();
    EXPECT_EQ(quorum_partial_flush(pa, out), QUORUM_ERR_INVALID_ARG);
    ASSERT_EQ(quorum_partial_wait(pa, out, nullptr), QUORUM_OK) << quorum_last_error();
    // The same rules for a lent post.
    EXPECT_EQ(quorum_partial_post_ref(pa, nullptr), QUORUM_ERR_INVALID_ARG);
    ASSERT_EQ(quorum_partial_post_ref(pa, v), QUORUM_OK) << quorum_last_error();
    EXPECT_EQ(quorum_partial_post_ref(pa, v), QUORUM_ERR_INVALID_ARG);
    EXPECT_NE(std::string(quorum_last_error()).find("posted twice"), std::string::npos)
        << quorum_last_error();
    EXPECT_EQ(quorum_partial_post(pa, v), QUORUM_ERR_INVALID_ARG);
    ASSERT_EQ(quorum_partial_wait(pa, out, nullptr), QUORUM_OK) << quorum_last_error();
    ASSERT_EQ(quorum_partial_flush(pa, out), QUORUM_OK) << quorum_last_error();
    EXPECT_EQ(quorum_partial_destroy(pa), QUORUM_OK) << quorum_last_error();
  });
}

// quorum_finalize before quorum_partial_destroy (an error path of an
// application): the object is released at finalize, later calls on it are
// INVALID_ARG naming the finalize, and destroy frees the handle; nothing
// touches the finalized communicator. Once with a round waited, once with a
// post still in flight.
TEST(PartialCApi, FinalizeBeforeDestroyReleasesTheObject) {
  for (bool in_flight : {false, true}) {
    auto group = ThreadGroup::create(2);
    std::vector<std::thread> threads;
    for (int r = 0; r < 2; ++r) {
      threads.emplace_back([&, r] {
        CommOptions o;
        o.transport = "inproc";
        auto *h = new quorum_comm;
        ASSERT_EQ(Communicator::create(group->bootstrap(r), &h->comm, o), QUORUM_OK);
        quorum_partial_t pa = nullptr;
        ASSERT_EQ(quorum_partial_create(h, 4, QUORUM_INT64, QUORUM_SUM, nullptr, &pa), QUORUM_OK);
        int64_t v[4] = {1, 2, 3, 4}, out[4];
        ASSERT_EQ(quorum_partial_post(pa, v), QUORUM_OK);
        if (!in_flight) {
          ASSERT_EQ(quorum_partial_wait(pa, out, nullptr), QUORUM_OK);
        }
        // Both ranks are past their partial calls before either finalizes.
        ASSERT_EQ(quorum_barrier(h), QUORUM_OK);
        EXPECT_EQ(quorum_finalize(h), QUORUM_OK) << quorum_last_error();
        EXPECT_EQ(quorum_partial_post(pa, v), QUORUM_ERR_INVALID_ARG);
        EXPECT_NE(std::string(quorum_last_error()).find("finalized"), std::string::npos)
            << quorum_last_error();
        EXPECT_EQ(quorum_partial_wait(pa, out, nullptr), QUORUM_ERR_INVALID_ARG);
        if (in_flight) {
          EXPECT_EQ(quorum_partial_free(pa), QUORUM_OK);  // the quiet way after a finalize
        } else {
          EXPECT_EQ(quorum_partial_destroy(pa), QUORUM_ERR_INVALID_ARG);
          EXPECT_NE(std::string(quorum_last_error()).find("finalized"), std::string::npos)
              << quorum_last_error();
        }
      });
    }
    for (auto &t : threads) t.join();
  }
}

// quorum_partial_free is local: with a post in flight on every rank it
// returns at once, the communicator keeps working, and a new partial object
// after it runs its rounds undisturbed. NULL is refused.
TEST(PartialCApi, FreeIsLocal) {
  run_c_ranks(3, [](quorum_comm_t comm) {
    EXPECT_EQ(quorum_partial_free(nullptr), QUORUM_ERR_INVALID_ARG);
    quorum_partial_t pa = nullptr;
    ASSERT_EQ(quorum_partial_create(comm, 1000, QUORUM_FLOAT32, QUORUM_SUM, nullptr, &pa),
              QUORUM_OK);
    std::vector<float> v(1000, 1.0f), out(1000);
    ASSERT_EQ(quorum_partial_post(pa, v.data()), QUORUM_OK);
    EXPECT_EQ(quorum_partial_free(pa), QUORUM_OK) << quorum_last_error();
    ASSERT_EQ(quorum_barrier(comm), QUORUM_OK) << quorum_last_error();
    quorum_partial_opts_t sync_every_round{QUORUM_PARTIAL_SOLO, 0, 1, 0, 0, 0, 0};
    ASSERT_EQ(quorum_partial_create(comm, 1000, QUORUM_FLOAT32, QUORUM_SUM, &sync_every_round, &pa),
              QUORUM_OK);
    for (int step = 0; step < 3; ++step) {
      ASSERT_EQ(quorum_partial_post(pa, v.data()), QUORUM_OK);
      ASSERT_EQ(quorum_partial_wait(pa, out.data(), nullptr), QUORUM_OK) << quorum_last_error();
      EXPECT_EQ(out[0], 3.0f) << "step " << step;
      EXPECT_EQ(out[999], 3.0f) << "step " << step;
    }
    ASSERT_EQ(quorum_partial_flush(pa, out.data()), QUORUM_OK) << quorum_last_error();
    EXPECT_EQ(quorum_partial_destroy(pa), QUORUM_OK) << quorum_last_error();
  });
}

TEST(PartialCApi, OtherOpsUseTheirIdentity) {
  run_c_ranks(3, [](quorum_comm_t comm) {
    const int r = quorum_comm_rank(comm);
    for (quorum_op_t op : {QUORUM_MAX, QUORUM_MIN, QUORUM_PROD}) {
      quorum_partial_opts_t opts{QUORUM_PARTIAL_SOLO, 0, 1, 0, 0, 0, 0};
      quorum_partial_t pa = nullptr;
      ASSERT_EQ(quorum_partial_create(comm, 2, QUORUM_INT32, op, &opts, &pa), QUORUM_OK);
      int32_t in[2] = {r + 2, -r - 2}, out[2];
      ASSERT_EQ(quorum_partial_post(pa, in), QUORUM_OK);
      ASSERT_EQ(quorum_partial_wait(pa, out, nullptr), QUORUM_OK) << quorum_last_error();
      if (op == QUORUM_MAX) {
        EXPECT_EQ(out[0], 4);
      }
      if (op == QUORUM_MIN) {
        EXPECT_EQ(out[1], -4);
      }
      if (op == QUORUM_PROD) {
        EXPECT_EQ(out[0], 24);
      }
      // A flush with nothing carried gives the identity's reduction.
      ASSERT_EQ(quorum_partial_flush(pa, out), QUORUM_OK);
      if (op == QUORUM_PROD) {
        EXPECT_EQ(out[0], 1);
      }
      EXPECT_EQ(quorum_partial_destroy(pa), QUORUM_OK);
    }
  });
}

TEST(PartialErrors, DestroyWithRoundsInFlightIsAnErrorNotAHang) {
  KnobOverride timeout("QUORUM_TIMEOUT_MS", "3000");
  for (int p : {2, 4}) {
    run_ranks(p, [](Communicator &c) {
      PartialOptions o;
      std::unique_ptr<PartialAllreduce> pa;
      ASSERT_EQ(PartialAllreduce::create(c, 100000, QUORUM_FLOAT32, QUORUM_SUM, o, &pa), QUORUM_OK);
      std::vector<float> v(100000, 1.0f);
      ASSERT_EQ(pa->post(v.data()), QUORUM_OK);
      Status s = pa->destroy();
      EXPECT_EQ(s, QUORUM_ERR_INVALID_ARG) << last_error();
      EXPECT_NE(std::string(last_error()).find("in flight"), std::string::npos) << last_error();
      EXPECT_EQ(pa->post(v.data()), QUORUM_ERR_INVALID_ARG);
      EXPECT_EQ(pa->destroy(), QUORUM_ERR_INVALID_ARG);
      // The communicator still works.
      int one = 1, sum = 0;
      ASSERT_EQ(c.allreduce(&one, &sum, 1, QUORUM_INT32, QUORUM_SUM), QUORUM_OK);
      EXPECT_EQ(sum, c.size());
    });
  }
}

TEST(PartialErrors, MajorityInitiatorThatNeverPostsTimesOutNamingIt) {
  KnobOverride timeout("QUORUM_TIMEOUT_MS", "400");
  run_ranks(
      3,
      [](Communicator &c) {
        PartialOptions o;
        o.mode = QUORUM_PARTIAL_MAJORITY;
        o.seed = 5;
        std::unique_ptr<PartialAllreduce> pa;
        ASSERT_EQ(PartialAllreduce::create(c, 4, QUORUM_INT64, QUORUM_SUM, o, &pa), QUORUM_OK);
        const int init = partial::majority_initiator(5, 0, 3);
        int64_t v[4] = {1, 1, 1, 1};
        if (c.rank() != init) {
          ASSERT_EQ(pa->post(v), QUORUM_OK);
          Status s = pa->wait(v);
          EXPECT_EQ(s, QUORUM_ERR_TIMEOUT);
          std::string e = last_error();
          EXPECT_NE(e.find("initiator, rank " + std::to_string(init)), std::string::npos) << e;
        }
        // Everyone releases locally (no collective destroy after a failure).
        std::this_thread::sleep_for(std::chrono::milliseconds(c.rank() == init ? 1000 : 600));
        pa.reset();
      },
      "inproc", {}, false);
}

TEST(PartialErrors, FlushAtDifferentRoundsIsAMismatchNotAHang) {
  KnobOverride timeout("QUORUM_TIMEOUT_MS", "2000");
  for (int p : {2, 3}) {
    run_ranks(
        p,
        [](Communicator &c) {
          PartialOptions o;
          o.max_staleness = 8;
          std::unique_ptr<PartialAllreduce> pa;
          ASSERT_EQ(PartialAllreduce::create(c, 4, QUORUM_INT64, QUORUM_SUM, o, &pa), QUORUM_OK);
          int64_t v[4] = {1, 2, 3, 4};
          Status s;
          if (c.rank() == 0) {
            s = pa->flush(v);  // the others post for this round instead
          } else {
            s = pa->post(v);
            if (s == QUORUM_OK) s = pa->wait(v);
          }
          // The flushing rank always learns of the mismatch: either its flush
          // finds the round activated already (the round then runs as an
          // ordinary one for the others), or the round's header disagrees.
          if (c.rank() == 0) {
            EXPECT_EQ(s, QUORUM_ERR_MISMATCH) << last_error();
          } else {
            EXPECT_TRUE(s == QUORUM_OK || s == QUORUM_ERR_MISMATCH || s == QUORUM_ERR_TIMEOUT)
                << "rank " << c.rank() << ": " << last_error();
          }
          pa.reset();
        },
        "inproc", {}, false);
  }
}

TEST(PartialErrors, RankThatNeverArrivesAtASynchronousRoundTimesOutNamingIt) {
  KnobOverride timeout("QUORUM_TIMEOUT_MS", "300");
  run_ranks(
      3,
      [](Communicator &c) {
        PartialOptions o;
        o.max_staleness = 0;
        std::unique_ptr<PartialAllreduce> pa;
        ASSERT_EQ(PartialAllreduce::create(c, 4, QUORUM_INT64, QUORUM_SUM, o, &pa), QUORUM_OK);
        int64_t v[4] = {1, 2, 3, 4};
        if (c.rank() != 2) {
          ASSERT_EQ(pa->post(v), QUORUM_OK);
          EXPECT_EQ(pa->wait(v), QUORUM_ERR_TIMEOUT);
          std::string e = last_error();
          EXPECT_NE(e.find("timed out"), std::string::npos) << e;
          EXPECT_NE(e.find("round 0"), std::string::npos) << e;
          EXPECT_EQ(pa->wait(v), QUORUM_ERR_TIMEOUT) << "the object keeps its error";
        }
        std::this_thread::sleep_for(std::chrono::milliseconds(c.rank() == 2 ? 700 : 400));
        pa.reset();
      },
      "inproc", {}, false);
}

TEST(PartialSingleRank, RoundsAreTheOwnPost) {
  run_ranks(1, [](Communicator &c) {
    test::partial_cases::conservation(c, QUORUM_PARTIAL_SOLO, 2, 8, 0);
    test::partial_cases::conservation(c, QUORUM_PARTIAL_MAJORITY, 0, 5, 0);
  });
}

}  // namespace
}  // namespace quorum
