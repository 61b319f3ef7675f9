// partial_proc_test.cpp: the partial-collective cases of the inproc test, run
// by ranks that are processes over ucx (under quorum-run or mpirun), with the
// progress thread answering activations while a rank sleeps.
#include <gtest/gtest.h>

#include "runtime/bootstrap/bootstrap.hpp"
#include "tests/partial/partial_cases.hpp"

namespace quorum {
namespace {

namespace cases = test::partial_cases;
Communicator *g_comm = nullptr;

TEST(ProcessPartial, RunsOverUcx) {
  EXPECT_GT(g_comm->size(), 1) << "run under quorum-run or mpirun";
  EXPECT_STREQ(g_comm->transport_name(), "ucx");
}
TEST(ProcessPartial, AllPostTogether) { cases::all_post_together(*g_comm); }
TEST(ProcessPartial, OneDriverFirstAndLast) {
  cases::one_driver(*g_comm, 0);
  cases::one_driver(*g_comm, g_comm->size() - 1);
}
TEST(ProcessPartial, MajorityOneDriver) { cases::majority_one_driver(*g_comm); }
TEST(ProcessPartial, ConservationSolo) { cases::conservation(*g_comm, QUORUM_PARTIAL_SOLO, 4); }
TEST(ProcessPartial, ConservationMajority) {
  cases::conservation(*g_comm, QUORUM_PARTIAL_MAJORITY, 3);
}
TEST(ProcessPartial, LatePost) {
  cases::late_post(*g_comm, true);
  cases::late_post(*g_comm, false);
}
TEST(ProcessPartial, DropMode) { cases::drop_mode(*g_comm); }
TEST(ProcessPartial, SimultaneousInitiators) { cases::simultaneous_initiators(*g_comm); }
TEST(ProcessPartial, StalenessBound) { cases::staleness_bound(*g_comm, 3); }
TEST(ProcessPartial, Majority) { cases::majority(*g_comm, 40); }
TEST(ProcessPartial, Interleaved) { cases::interleaved(*g_comm); }

}  // namespace
}  // namespace quorum

int main(int argc, char **argv) {
  ::testing::InitGoogleTest(&argc, argv);
  std::unique_ptr<quorum::Bootstrap> bootstrap;
  if (quorum::bootstrap_from_environment(&bootstrap) != QUORUM_OK) {
    fprintf(stderr, "bootstrap failed: %s\n", quorum::last_error());
    return 1;
  }
  std::unique_ptr<quorum::Communicator> comm;
  if (quorum::Communicator::create(std::move(bootstrap), &comm) != QUORUM_OK) {
    fprintf(stderr, "communicator failed: %s\n", quorum::last_error());
    return 1;
  }
  quorum::g_comm = comm.get();
  int rc = RUN_ALL_TESTS();
  if (comm->finalize() != QUORUM_OK) rc = rc ? rc : 1;
  return rc;
}
