// collectives_proc_test.cpp: the same collective checks as the inproc test, run
// by ranks that are processes: under quorum-run (TCP store bootstrap) or mpirun
// (PMIx), over the ucx transport. Every rank runs the gtest cases in the same
// order on one communicator created from the environment.
#include <gtest/gtest.h>
#include <stdlib.h>

#include <chrono>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <thread>

#include "tests/collectives/collective_cases.hpp"
#include "tests/support/process_main.hpp"

namespace quorum {
namespace {

class ProcessCollectives : public ::testing::Test {
 protected:
  void SetUp() override { ASSERT_NE(test::process_comm(), nullptr); }
};

TEST_F(ProcessCollectives, RunsOverUcx) {
  EXPECT_GT(test::process_comm()->size(), 1) << "run under quorum-run or mpirun";
  EXPECT_STREQ(test::process_comm()->transport_name(), "ucx");
}
TEST_F(ProcessCollectives, CrossMemoryPathChosenTogether) {
  test::CrossMemoryPathChosenTogether(*test::process_comm());
}
TEST_F(ProcessCollectives, Allreduce) {
  test::AllreduceEveryDtypeAndOp(*test::process_comm());
}
TEST_F(ProcessCollectives, NonBlocking) {
  test::NonBlockingAllreduceOverlaps(*test::process_comm());
}
TEST_F(ProcessCollectives, InPlaceOnSomeRanksOnly) {
  test::InPlaceOnSomeRanksOnly(*test::process_comm());
}
TEST_F(ProcessCollectives, SmallAndLargeInterleaved) {
  test::SmallAndLargeInterleaved(*test::process_comm());
}
TEST_F(ProcessCollectives, SymmetricBuffers) {
  test::SymmetricBuffers(*test::process_comm());
}
TEST_F(ProcessCollectives, CrossMemoryOnOrdinaryBuffers) {
  test::CrossMemoryOnOrdinaryBuffers(*test::process_comm());
}
TEST_F(ProcessCollectives, HugeAllocationsAreRefused) {
  test::HugeAllocationsAreRefused(*test::process_comm());
}
TEST_F(ProcessCollectives, ZeroCopyOvertakesCopy) {
  test::ZeroCopyOvertakesCopy(*test::process_comm());
}
TEST_F(ProcessCollectives, RandomMixOfAllreduces) {
  test::RandomMixOfAllreduces(*test::process_comm());
}
TEST_F(ProcessCollectives, Bcast) {
  test::BcastFromEveryRoot(*test::process_comm());
}
TEST_F(ProcessCollectives, Allgather) {
  test::AllgatherInAndOutOfPlace(*test::process_comm());
}
TEST_F(ProcessCollectives, MessagesAroundTheSegmentSize) {
  test::MessagesAroundTheSegmentSize(*test::process_comm());
}
TEST_F(ProcessCollectives, ReduceScatter) {
  test::ReduceScatterEveryDtype(*test::process_comm());
}
TEST_F(ProcessCollectives, Barrier) {
  test::BarrierAndMixedSequence(*test::process_comm());
}
// No rank leaves a barrier before every rank entered it: each rank leaves a
// file in a directory all ranks share (one machine) before the barrier, one
// rank of each round late, and after it finds the files of every rank. (The
// signature check's exchange is a barrier too: run with it off to test the
// barrier algorithm alone.)
TEST_F(ProcessCollectives, BarrierWaitsForEveryRank) {
  Communicator &c = *test::process_comm();
  const int p = c.size();
  namespace fs = std::filesystem;
  std::string dir = (fs::temp_directory_path() / "quorum_barrier_XXXXXX").string();
  char name[256] = {};
  if (c.rank() == 0) {
    ASSERT_NE(mkdtemp(dir.data()), nullptr);
    snprintf(name, sizeof(name), "%s", dir.c_str());
  }
  ASSERT_EQ(c.bcast(name, sizeof(name), 0), QUORUM_OK) << last_error();
  const fs::path shared(name);
  // Ranks on other machines do not see the directory: then every rank skips.
  int32_t unseen = fs::is_directory(shared) ? 0 : 1;
  ASSERT_EQ(c.allreduce(QUORUM_IN_PLACE, &unseen, 1, QUORUM_INT32, QUORUM_MAX), QUORUM_OK);
  if (unseen) {
    ASSERT_EQ(c.barrier(), QUORUM_OK) << last_error();
    if (c.rank() == 0) fs::remove_all(shared);
    GTEST_SKIP() << "ranks on several machines: no shared directory";
  }
  for (int round = 0; round < 2 * p; ++round) {
    if (c.rank() == round % p) std::this_thread::sleep_for(std::chrono::milliseconds(30));
    std::ofstream(shared / (std::to_string(round) + "_" + std::to_string(c.rank())));
    ASSERT_EQ(c.barrier(), QUORUM_OK) << last_error();
    for (int r = 0; r < p; ++r) {
      ASSERT_TRUE(fs::exists(shared / (std::to_string(round) + "_" + std::to_string(r))))
          << "rank " << c.rank() << " left barrier " << round << " before rank " << r
          << " entered it";
    }
  }
  ASSERT_EQ(c.barrier(), QUORUM_OK) << last_error();
  if (c.rank() == 0) fs::remove_all(shared);
}

}  // namespace
}  // namespace quorum

int main(int argc, char **argv) {
  return quorum::test::run_process_tests(argc, argv);
}
