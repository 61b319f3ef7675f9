// distributed_setup_test.cpp: what the distributed trainer checks before
// training: an injected imbalance that would do nothing on the ranks there
// are, a non-finite --sync-epochs, and (ranks as threads on inproc) whether
// every rank could set up.
#include <gtest/gtest.h>

#include <cmath>
#include <string>

#include "quorum/quorum.h"
#include "tests/support/thread_ranks.hpp"
#include "trainer/distributed/collective_reducer.hpp"
#include "trainer/distributed/imbalance.hpp"
#include "trainer/distributed/setup_agreement.hpp"

namespace quorum::trainer {
namespace {

Status check(const std::string &spec, int world) {
  ImbalanceModel m;
  const Status s = ImbalanceModel::parse(spec, 1, &m);
  return s != kOk ? s : m.check_world(world);
}

TEST(ImbalanceModel, RefusesModelsThatDelayNoRankOrAMissingOne) {
  EXPECT_EQ(check("slow:3:10", 4), kOk);
  EXPECT_EQ(check("paper:10:4", 4), kOk);
  EXPECT_EQ(check("paper:10:0-2", 2), kOk);
  EXPECT_EQ(check("exp:5", 1), kOk);
  EXPECT_EQ(check("paper:10:1", 1), kOk);
  EXPECT_EQ(check("none", 1), kOk);
  const struct {
    const char *spec;
    int world;
    const char *why;
  } bad[] = {
      {"slow:4:10", 4, "there is no rank 4 (ranks are 0 to 3)"},
      {"slow:0:10", 1, "one process has no other rank to be slower than"},
      {"paper:10:0", 4, "K = 0 delays no rank"},
      {"paper:10:0-0", 4, "K = 0 delays no rank"},
      {"paper:10:5", 4, "on 4 ranks: cannot draw 5 ranks"},
      {"paper:10:1-3", 2, "on 2 ranks: cannot draw 3 ranks"},
      {"paper:10", 1, "on 1 rank: cannot draw 2 ranks"},
  };
  for (const auto &b : bad) {
    EXPECT_EQ(check(b.spec, b.world), QUORUM_ERR_INVALID_ARG) << b.spec << " on " << b.world;
    EXPECT_NE(std::string(last_error()).find(b.why), std::string::npos) << last_error();
  }
}

// The reducer knows the world size: it refuses such a model.
TEST(CollectiveReducer, RefusesAnImbalanceForAnotherWorld) {
  test::run_c_ranks(2, [](quorum_comm_t comm) {
    ReducerOptions o;
    ASSERT_EQ(ImbalanceModel::parse("slow:2:10", 1, &o.imbalance), kOk);
    std::unique_ptr<CollectiveReducer> red;
    ASSERT_EQ(CollectiveReducer::create(comm, o, nullptr, &red), QUORUM_ERR_INVALID_ARG);
    EXPECT_NE(std::string(last_error()).find("--imbalance 'slow:2:10' on 2 ranks"),
              std::string::npos)
        << last_error();
  });
}

// NaN passes a range check (every comparison is false): create refuses it.
TEST(CollectiveReducer, RefusesNonFiniteSyncEpochs) {
  test::run_c_ranks(1, [](quorum_comm_t comm) {
    for (double bad : {std::nan(""), double(INFINITY), -1.0}) {
      ReducerOptions o;
      o.mode = "solo";
      o.sync_epochs = bad;
      std::unique_ptr<CollectiveReducer> red;
      EXPECT_EQ(CollectiveReducer::create(comm, o, nullptr, &red), QUORUM_ERR_INVALID_ARG) << bad;
      EXPECT_NE(std::string(last_error()).find("--sync-epochs"), std::string::npos);
    }
  });
}

// Ranks 1 and 2 fail to set up: every rank learns it from the one exchange,
// naming the lowest (its reason and exit status) and the others that failed.
TEST(SetupAgreement, EveryRankLearnsWhoFailed) {
  test::run_c_ranks(4, [](quorum_comm_t comm) {
    const int rank = quorum_comm_rank(comm);
    int code = -1;
    ASSERT_EQ(agree_on_setup(comm, "", 0, &code), kOk) << last_error();
    EXPECT_EQ(code, -1);
    const std::string error = rank == 1   ? "QUORUM_ERR_INVALID_ARG: --log /x/log: cannot open"
                              : rank == 2 ? std::string(5000, 'z')
                                          : "";
    ASSERT_EQ(agree_on_setup(comm, error, rank == 1 ? 1 : 2, &code), QUORUM_ERR_INVALID_ARG);
    EXPECT_EQ(std::string(last_error()),
              "QUORUM_ERR_INVALID_ARG: rank 1 failed to set up: --log /x/log: cannot open (ranks "
              "1, 2 failed)")
        << "rank " << rank;
    EXPECT_EQ(code, 1) << "rank " << rank;
  });
}

}  // namespace
}  // namespace quorum::trainer
