// partial_quorum_test.cpp: the k-of-P quorum allreduce (quorum_cases.hpp) for
// every k at P = 2..8, as threads over the inproc transport.
#include <gtest/gtest.h>

#include "tests/partial/quorum_cases.hpp"
#include "tests/support/thread_ranks.hpp"

namespace quorum {
namespace {

using test::run_ranks;
namespace cases = test::quorum_cases;

class PartialQuorum : public ::testing::TestWithParam<int> {};

TEST_P(PartialQuorum, ConservationEveryK) {
  const int p = GetParam();
  for (unsigned k = 1; k <= static_cast<unsigned>(p); ++k) {
    run_ranks(p, [k](Communicator &c) { cases::conservation(c, k); });
  }
}

TEST_P(PartialQuorum, OneDriverRoundsGatherWaitingRanks) {
  const int p = GetParam();
  for (unsigned k : {2u, static_cast<unsigned>(p)}) {
    for (int driver : {0, p - 1}) {
      run_ranks(p, [k, driver](Communicator &c) { cases::one_driver(c, k, driver); });
    }
  }
}

TEST_P(PartialQuorum, BadKIsRefused) {
  run_ranks(GetParam(), [](Communicator &c) { cases::bad_k(c); });
}

INSTANTIATE_TEST_SUITE_P(Ranks, PartialQuorum, ::testing::Values(2, 3, 4, 5, 6, 7, 8),
                         [](const ::testing::TestParamInfo<int> &i) {
                           return "P" + std::to_string(i.param);
                         });

}  // namespace
}  // namespace quorum
