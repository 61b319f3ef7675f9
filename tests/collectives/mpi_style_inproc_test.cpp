// mpi_style_inproc_test.cpp: what an MPI programmer expects beyond the core
// collectives (sub-communicators, point-to-point, gather, scatter, alltoall(v),
// rooted reduce) for P = 1..8 ranks as threads over inproc, through the C API.
#include <gtest/gtest.h>

#include "tests/collectives/more_cases.hpp"
#include "tests/collectives/subcomm_cases.hpp"
#include "tests/support/thread_ranks.hpp"

namespace quorum {
namespace {

class SubComm : public ::testing::TestWithParam<int> {};

TEST_P(SubComm, SplitEvenOdd) {
  test::run_c_ranks(GetParam(), test::SplitEvenOdd);
}
TEST_P(SubComm, SplitUndefinedColor) {
  test::run_c_ranks(GetParam(), test::SplitUndefinedColor);
}
TEST_P(SubComm, DupIsIndependent) {
  test::run_c_ranks(GetParam(), test::DupIsIndependent);
}
TEST_P(SubComm, PointToPointRing) {
  test::run_c_ranks(GetParam(), test::PointToPointRing);
}
TEST_P(SubComm, PointToPointOnSplit) {
  test::run_c_ranks(GetParam(), test::PointToPointOnSplit);
}

TEST_P(SubComm, GatherScatterEveryRoot) {
  test::run_c_ranks(GetParam(), test::GatherScatterEveryRoot);
}
TEST_P(SubComm, AlltoallAndV) {
  test::run_c_ranks(GetParam(), test::AlltoallAndV);
}
TEST_P(SubComm, ReduceEveryOp) {
  test::run_c_ranks(GetParam(), test::ReduceEveryOp);
}
TEST_P(SubComm, NonBlockingAllInFlight) {
  test::run_c_ranks(GetParam(), test::NonBlockingAllInFlight);
}
TEST_P(SubComm, MoreOnSplit) {
  test::run_c_ranks(GetParam(), test::MoreOnSplit);
}

INSTANTIATE_TEST_SUITE_P(P, SubComm, ::testing::Range(1, 9),
                         [](const auto &info) { return "P" + std::to_string(info.param); });

}  // namespace
}  // namespace quorum
