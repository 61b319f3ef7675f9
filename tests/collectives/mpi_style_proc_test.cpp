// mpi_style_proc_test.cpp: the checks of mpi_style_inproc_test.cpp, run by ranks that are processes
// (under quorum-run or mpirun) over ucx, on one communicator from quorum_init.
#include <gtest/gtest.h>

#include <cstdio>

#include "tests/collectives/more_cases.hpp"
#include "tests/collectives/subcomm_cases.hpp"

namespace quorum {
namespace {

quorum_comm_t g_comm = nullptr;

TEST(ProcessSubComm, RunsOverUcx) {
  EXPECT_GT(quorum_comm_size(g_comm), 1) << "run under quorum-run or mpirun";
  EXPECT_STREQ(quorum_comm_transport(g_comm), "ucx");
}
TEST(ProcessSubComm, SplitEvenOdd) {
  test::SplitEvenOdd(g_comm);
}
TEST(ProcessSubComm, SplitUndefinedColor) {
  test::SplitUndefinedColor(g_comm);
}
TEST(ProcessSubComm, DupIsIndependent) {
  test::DupIsIndependent(g_comm);
}
TEST(ProcessSubComm, PointToPointRing) {
  test::PointToPointRing(g_comm);
}
TEST(ProcessSubComm, PointToPointOnSplit) {
  test::PointToPointOnSplit(g_comm);
}

TEST(ProcessSubComm, GatherScatterEveryRoot) {
  test::GatherScatterEveryRoot(g_comm);
}
TEST(ProcessSubComm, AlltoallAndV) {
  test::AlltoallAndV(g_comm);
}
TEST(ProcessSubComm, ReduceEveryOp) {
  test::ReduceEveryOp(g_comm);
}
TEST(ProcessSubComm, NonBlockingAllInFlight) {
  test::NonBlockingAllInFlight(g_comm);
}
TEST(ProcessSubComm, MoreOnSplit) {
  test::MoreOnSplit(g_comm);
}

}  // namespace
}  // namespace quorum

int main(int argc, char **argv) {
  ::testing::InitGoogleTest(&argc, argv);
  if (quorum_init(&quorum::g_comm) != QUORUM_OK) {
    std::fprintf(stderr, "quorum_init failed: %s\n", quorum_last_error());
    return 1;
  }
  int rc = RUN_ALL_TESTS();
  if (quorum_finalize(quorum::g_comm) != QUORUM_OK && rc == 0) rc = 1;
  return rc;
}
