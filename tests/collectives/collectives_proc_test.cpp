// collectives_proc_test.cpp: the same collective checks as the inproc test, run
// by ranks that are processes: under quorum-run (TCP store bootstrap) or mpirun
// (PMIx), over the ucx transport. Every rank runs the gtest cases in the same
// order on one communicator created from the environment.
#include <gtest/gtest.h>

#include <cstdlib>

#include "runtime/bootstrap/bootstrap.hpp"
#include "tests/collectives/collective_cases.hpp"

namespace quorum {
namespace {

Communicator *g_comm = nullptr;

class ProcessCollectives : public ::testing::Test {
 protected:
  void SetUp() override { ASSERT_NE(g_comm, nullptr); }
};

TEST_F(ProcessCollectives, RunsOverUcx) {
  EXPECT_GT(g_comm->size(), 1) << "run under quorum-run or mpirun";
  EXPECT_STREQ(g_comm->transport_name(), "ucx");
}
TEST_F(ProcessCollectives, Allreduce) {
  test::AllreduceEveryDtypeAndOp(*g_comm);
}
TEST_F(ProcessCollectives, NonBlocking) {
  test::NonBlockingAllreduceOverlaps(*g_comm);
}
TEST_F(ProcessCollectives, Bcast) {
  test::BcastFromEveryRoot(*g_comm);
}
TEST_F(ProcessCollectives, Allgather) {
  test::AllgatherInAndOutOfPlace(*g_comm);
}
TEST_F(ProcessCollectives, ReduceScatter) {
  test::ReduceScatterEveryDtype(*g_comm);
}
TEST_F(ProcessCollectives, Barrier) {
  test::BarrierAndMixedSequence(*g_comm);
}

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
