// partial_proc_test.cpp: the partial-collective cases of the inproc test, run
// by ranks that are processes over ucx (under quorum-run or mpirun), with the
// progress thread answering activations while a rank sleeps.
#include <gtest/gtest.h>

#include "tests/partial/partial_cases.hpp"
#include "tests/support/process_main.hpp"

namespace quorum {
namespace {

namespace cases = test::partial_cases;

TEST(ProcessPartial, RunsOverUcx) {
  EXPECT_GT(test::process_comm()->size(), 1) << "run under quorum-run or mpirun";
  EXPECT_STREQ(test::process_comm()->transport_name(), "ucx");
}
TEST(ProcessPartial, AllPostTogether) {
  cases::all_post_together(*test::process_comm());
}
TEST(ProcessPartial, OneDriverFirstAndLast) {
  cases::one_driver(*test::process_comm(), 0);
  cases::one_driver(*test::process_comm(), test::process_comm()->size() - 1);
}
TEST(ProcessPartial, MajorityOneDriver) {
  cases::majority_one_driver(*test::process_comm());
}
TEST(ProcessPartial, ConservationSolo) {
  cases::conservation(*test::process_comm(), QUORUM_PARTIAL_SOLO, 4);
}
TEST(ProcessPartial, ConservationMajority) {
  cases::conservation(*test::process_comm(), QUORUM_PARTIAL_MAJORITY, 3);
}
// Large vectors: the rounds' buffers are symmetric, so the data phase goes
// zero-copy, and ranks that join with nothing posted contribute the identity
// without writing it (skipped as sources).
TEST(ProcessPartial, ConservationSoloZeroCopy) {
  cases::conservation(*test::process_comm(), QUORUM_PARTIAL_SOLO, 4, 24, 1500, 0, 20000);
}
TEST(ProcessPartial, LatePost) {
  cases::late_post(*test::process_comm(), true);
  cases::late_post(*test::process_comm(), false);
}
TEST(ProcessPartial, DropMode) {
  cases::drop_mode(*test::process_comm());
}
TEST(ProcessPartial, SimultaneousInitiators) {
  cases::simultaneous_initiators(*test::process_comm());
}
TEST(ProcessPartial, StalenessBound) {
  cases::staleness_bound(*test::process_comm(), 3);
}
TEST(ProcessPartial, Majority) {
  cases::majority(*test::process_comm(), 40);
}
TEST(ProcessPartial, Interleaved) {
  cases::interleaved(*test::process_comm());
}

}  // namespace
}  // namespace quorum

int main(int argc, char **argv) {
  return quorum::test::run_process_tests(argc, argv);
}
