// collectives_inproc_test.cpp: every collective for P = 1..8, every dtype and
// op, in place and out of place, as threads over the inproc transport.
#include <gtest/gtest.h>

#include "tests/collectives/collective_cases.hpp"
#include "tests/support/knob_override.hpp"
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
TEST_P(Collectives, InPlaceOnSomeRanksOnly) {
  test::run_ranks(GetParam(), test::InPlaceOnSomeRanksOnly);
}
TEST_P(Collectives, SymmetricBuffers) {
  test::run_ranks(GetParam(), test::SymmetricBuffers);
}
TEST_P(Collectives, HugeAllocationsAreRefused) {
  test::run_ranks(GetParam(), test::HugeAllocationsAreRefused);
}
TEST_P(Collectives, ZeroCopyOvertakesCopy) {
  test::run_ranks(GetParam(), test::ZeroCopyOvertakesCopy);
}
TEST_P(Collectives, RandomMixOfAllreduces) {
  test::run_ranks(GetParam(), test::RandomMixOfAllreduces);
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

// Every algorithm forced in turn, at sizes the default rule would not pick
// ("hierarchical": ranks as threads share one host, so the default rule).
TEST_P(Collectives, AllreduceEveryAlgorithm) {
  for (const char *algo : {"recursive_doubling", "rabenseifner", "ring", "hierarchical"}) {
    SCOPED_TRACE(algo);
    test::KnobOverride force("QUORUM_ALLREDUCE_ALGO", algo);
    test::run_ranks(GetParam(), test::AllreduceEveryDtypeAndOp);
  }
}

TEST_P(Collectives, BcastEveryAlgorithm) {
  for (const char *algo : {"binomial", "scatter_allgather", "hierarchical"}) {
    SCOPED_TRACE(algo);
    test::KnobOverride force("QUORUM_BCAST_ALGO", algo);
    test::run_ranks(GetParam(), test::BcastFromEveryRoot);
  }
}

TEST_P(Collectives, BarrierEveryAlgorithm) {
  for (const char *algo : {"dissemination", "hierarchical"}) {
    SCOPED_TRACE(algo);
    test::KnobOverride force("QUORUM_BARRIER_ALGO", algo);
    test::run_ranks(GetParam(), test::BarrierAndMixedSequence);
  }
}

INSTANTIATE_TEST_SUITE_P(P, Collectives, ::testing::Range(1, 9),
                         [](const auto &info) { return "P" + std::to_string(info.param); });

}  // namespace
}  // namespace quorum
