// distributed_setup_test.cpp: what the distributed trainer checks before
// training: an injected imbalance that would do nothing on the ranks there
// are.
#include <gtest/gtest.h>

#include <string>

#include "quorum/quorum.h"
#include "tests/support/thread_ranks.hpp"
#include "trainer/distributed/collective_reducer.hpp"
#include "trainer/distributed/imbalance.hpp"

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

}  // namespace
}  // namespace quorum::trainer
