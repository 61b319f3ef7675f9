// collectives_proc_test.cpp: the same collective checks as the inproc test, run
// by ranks that are processes: under quorum-run (TCP store bootstrap) or mpirun
// (PMIx), over the ucx transport. Every rank runs the gtest cases in the same
// order on one communicator created from the environment.
#include <gtest/gtest.h>

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

}  // namespace
}  // namespace quorum

int main(int argc, char **argv) {
  return quorum::test::run_process_tests(argc, argv);
}
