// collectives_failures_test.cpp: bad arguments, mismatched calls, a rank that
// never joins (timeout) and a rank that dies (peer failure), over inproc.
#include <gtest/gtest.h>

#include <cstdint>
#include <cstring>
#include <string>
#include <vector>

#include "runtime/knobs.hpp"
#include "tests/support/knob_override.hpp"
#include "tests/support/thread_ranks.hpp"
#include "transports/inproc/inproc_transport.hpp"

namespace quorum {
namespace {

using test::KnobOverride;
using test::run_ranks;

TEST(CollectiveFailures, InvalidArguments) {
  run_ranks(2, [](Communicator &c) {
    float x = 1;
    EXPECT_EQ(c.allreduce(nullptr, &x, 1, QUORUM_FLOAT32, QUORUM_SUM), QUORUM_ERR_INVALID_ARG);
    EXPECT_NE(std::string(last_error()).find("NULL send buffer"), std::string::npos)
        << last_error();
    EXPECT_EQ(c.allreduce(&x, &x, 1, static_cast<quorum_dtype_t>(42), QUORUM_SUM),
              QUORUM_ERR_INVALID_ARG);
    EXPECT_NE(std::string(last_error()).find("unknown dtype 42"), std::string::npos);
    EXPECT_EQ(c.allreduce(&x, &x, 1, QUORUM_FLOAT32, static_cast<quorum_op_t>(-1)),
              QUORUM_ERR_INVALID_ARG);
    EXPECT_EQ(c.bcast(&x, 4, 2), QUORUM_ERR_INVALID_ARG);
    EXPECT_NE(std::string(last_error()).find("root 2"), std::string::npos);
    EXPECT_EQ(c.bcast(nullptr, 4, 0), QUORUM_ERR_INVALID_ARG);
    EXPECT_EQ(c.allgather(nullptr, &x, 4), QUORUM_ERR_INVALID_ARG);
    // Zero counts with NULL buffers are fine.
    EXPECT_EQ(c.allreduce(nullptr, nullptr, 0, QUORUM_FLOAT32, QUORUM_SUM), QUORUM_OK);
  });
}

// The last error names the call and the reason.
void expect_error_names(const char *call, const char *reason) {
  const std::string e = last_error();
  EXPECT_NE(e.find(call), std::string::npos) << e;
  EXPECT_NE(e.find(reason), std::string::npos) << e;
}

// A send buffer that overlaps the receive buffer without being it (or, for
// allgather, this rank's block of it): refused on every rank before anything
// is sent, since the result would depend on the order of the writes.
TEST(CollectiveFailures, OverlappingBuffersAreRefused) {
  run_ranks(2, [](Communicator &c) {
    float x[32] = {};
    EXPECT_EQ(c.allreduce(x, x + 2, 4, QUORUM_FLOAT32, QUORUM_SUM), QUORUM_ERR_INVALID_ARG);
    expect_error_names("allreduce", "overlap");
    EXPECT_EQ(c.allreduce(x + 2, x, 4, QUORUM_FLOAT32, QUORUM_SUM), QUORUM_ERR_INVALID_ARG);
    // reduce_scatter's send holds one block per rank: 8 floats here.
    EXPECT_EQ(c.reduce_scatter(x, x + 7, 4, QUORUM_FLOAT32, QUORUM_SUM), QUORUM_ERR_INVALID_ARG);
    expect_error_names("reduce_scatter", "overlap");
    EXPECT_EQ(c.allgather(x + 1, x, 16), QUORUM_ERR_INVALID_ARG);
    expect_error_names("allgather", "overlap");
    // Touching is not overlapping; the buffers stay usable.
    for (int i = 0; i < 4; ++i) x[i] = 1.0f;
    ASSERT_EQ(c.allreduce(x, x + 4, 4, QUORUM_FLOAT32, QUORUM_SUM), QUORUM_OK) << last_error();
    EXPECT_EQ(x[7], 2.0f);
  });
}

// Sizes whose buffers no process could hold (their byte counts, times the
// ranks, overflow): refused before anything is sent, never a crash.
TEST(CollectiveFailures, HugeSizesAreRefused) {
  run_ranks(2, [](Communicator &c) {
    float x[4] = {};
    for (size_t n : {SIZE_MAX, SIZE_MAX / 2 + 1, (size_t{1} << 62) + 1}) {
      SCOPED_TRACE(n);
      EXPECT_EQ(c.allreduce(x, x + 2, n, QUORUM_FLOAT32, QUORUM_SUM), QUORUM_ERR_INVALID_ARG);
      expect_error_names("allreduce", "too large");
      EXPECT_EQ(c.allgather(x, x + 2, n), QUORUM_ERR_INVALID_ARG);
      expect_error_names("allgather", "too large");
      EXPECT_EQ(c.reduce_scatter(x, x + 2, n, QUORUM_FLOAT32, QUORUM_SUM), QUORUM_ERR_INVALID_ARG);
      expect_error_names("reduce_scatter", "too large");
      EXPECT_EQ(c.bcast(x, n, 0), QUORUM_ERR_INVALID_ARG);
      expect_error_names("bcast", "too large");
    }
    // The communicator still works.
    int32_t one = 1;
    ASSERT_EQ(c.allreduce(QUORUM_IN_PLACE, &one, 1, QUORUM_INT32, QUORUM_SUM), QUORUM_OK);
    EXPECT_EQ(one, 2);
  });
}

TEST(CollectiveFailures, MismatchedCountsAreReportedByEveryRank) {
  KnobOverride sig("QUORUM_SIGNATURE_CHECK", "1");
  for (int p : {2, 3, 5}) {
    run_ranks(p, [p](Communicator &c) {
      ASSERT_TRUE(c.signature_check());
      std::vector<float> v(100, 1.0f);
      size_t n = c.rank() == p - 1 ? 99 : 100;
      Status s = c.allreduce(QUORUM_IN_PLACE, v.data(), n, QUORUM_FLOAT32, QUORUM_SUM);
      EXPECT_EQ(s, QUORUM_ERR_MISMATCH) << "rank " << c.rank();
      std::string e = last_error();
      EXPECT_NE(e.find("count=99"), std::string::npos) << e;
      EXPECT_NE(e.find("count=100"), std::string::npos) << e;
      EXPECT_NE(e.find("rank " + std::to_string(p - 1)), std::string::npos) << e;
      // The communicator still works afterwards.
      int32_t one = 1;
      ASSERT_EQ(c.allreduce(QUORUM_IN_PLACE, &one, 1, QUORUM_INT32, QUORUM_SUM), QUORUM_OK)
          << last_error();
      EXPECT_EQ(one, p);
    });
  }
}

TEST(CollectiveFailures, MismatchedKindsAreReported) {
  KnobOverride sig("QUORUM_SIGNATURE_CHECK", "1");
  run_ranks(3, [](Communicator &c) {
    std::vector<uint8_t> buf(64, 0);
    Status s = c.rank() == 1
                   ? c.bcast(buf.data(), 64, 0)
                   : c.allreduce(QUORUM_IN_PLACE, buf.data(), 16, QUORUM_INT32, QUORUM_SUM);
    EXPECT_EQ(s, QUORUM_ERR_MISMATCH) << "rank " << c.rank() << ": " << last_error();
    EXPECT_NE(std::string(last_error()).find("bcast"), std::string::npos) << last_error();
  });
}

TEST(CollectiveFailures, WithoutSignatureCheckShortMessageIsAMismatch) {
  KnobOverride sig("QUORUM_SIGNATURE_CHECK", "0");
  KnobOverride timeout("QUORUM_TIMEOUT_MS", "2000");
  run_ranks(
      2,
      [](Communicator &c) {
        std::vector<int32_t> v(8, 1);
        size_t n = c.rank() == 0 ? 4 : 8;
        Status s = c.allreduce(QUORUM_IN_PLACE, v.data(), n, QUORUM_INT32, QUORUM_SUM);
        // Rank 0 receives 32 B into a 16 B buffer (truncation), rank 1 gets 16 B for 32 B.
        EXPECT_NE(s, QUORUM_OK) << "rank " << c.rank();
      },
      "inproc", {}, false);
}

TEST(CollectiveFailures, RankThatNeverJoinsTimesOutNamingIt) {
  KnobOverride timeout("QUORUM_TIMEOUT_MS", "300");
  run_ranks(
      3,
      [](Communicator &c) {
        if (c.rank() == 2) return;  // never calls the allreduce
        float v = 1;
        Status s = c.allreduce(QUORUM_IN_PLACE, &v, 1, QUORUM_FLOAT32, QUORUM_SUM);
        EXPECT_EQ(s, QUORUM_ERR_TIMEOUT) << "rank " << c.rank();
        std::string e = last_error();
        EXPECT_NE(e.find("allreduce"), std::string::npos) << e;
        EXPECT_NE(e.find("timed out"), std::string::npos) << e;
      },
      "inproc", {}, false);
}

TEST(CollectiveFailures, DeadRankTurnsIntoPeerFailed) {
  KnobOverride timeout("QUORUM_TIMEOUT_MS", "3000");
  run_ranks(
      4,
      [](Communicator &c) {
        if (c.rank() == 3) {
          inproc_simulate_failure(*c.transport());
          return;
        }
        std::vector<float> v(100000, 1.0f);
        Status s = c.allreduce(QUORUM_IN_PLACE, v.data(), v.size(), QUORUM_FLOAT32, QUORUM_SUM);
        // Ranks that talk to rank 3 directly see PEER_FAILED; the others then
        // stall on them and time out or see the failure propagate.
        EXPECT_TRUE(s == QUORUM_ERR_PEER_FAILED || s == QUORUM_ERR_TIMEOUT) << "rank " << c.rank();
        if (c.rank() == 2 || c.rank() == 0) {
          EXPECT_EQ(s, QUORUM_ERR_PEER_FAILED) << "rank " << c.rank() << ": " << last_error();
        }
      },
      "inproc", {}, false);
}

}  // namespace
}  // namespace quorum
