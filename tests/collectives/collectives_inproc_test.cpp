// collectives_inproc_test.cpp: every collective for P = 1..8, every dtype and
// op, in place and out of place, as threads over the inproc transport.
#include <gtest/gtest.h>

#include "tests/collectives/collective_cases.hpp"
#include "tests/support/thread_ranks.hpp"

namespace quorum {
namespace {

class Collectives : public ::testing::TestWithParam<int> {};

TEST_P(Collectives, AllreduceEveryDtypeAndOp) {
  test::run_ranks(GetParam(), test::AllreduceEveryDtypeAndOp);
}
TEST_P(Collectives, NonBlockingAllreduceOverlaps) {
  test::run_ranks(GetParam(), test::NonBlockingAllreduceOverlaps);
}
TEST_P(Collectives, BcastFromEveryRoot) {
  test::run_ranks(GetParam(), test::BcastFromEveryRoot);
}
TEST_P(Collectives, AllgatherInAndOutOfPlace) {
  test::run_ranks(GetParam(), test::AllgatherInAndOutOfPlace);
}
TEST_P(Collectives, ReduceScatterEveryDtype) {
  test::run_ranks(GetParam(), test::ReduceScatterEveryDtype);
}
TEST_P(Collectives, BarrierAndMixedSequence) {
  test::run_ranks(GetParam(), test::BarrierAndMixedSequence);
}

INSTANTIATE_TEST_SUITE_P(P, Collectives, ::testing::Range(1, 9),
                         [](const auto &info) { return "P" + std::to_string(info.param); });

}  // namespace
}  // namespace quorum
