// process_main.hpp: main() of a gtest binary whose ranks are processes (under
// quorum-run or mpirun): one communicator from the environment, shared by the
// test cases through process_comm(), finalized after the run.
#pragma once

#include <gtest/gtest.h>

#include <cstdio>
#include <memory>

#include "collectives/communicator.hpp"
#include "runtime/bootstrap/bootstrap.hpp"

namespace quorum::test {

inline Communicator *&process_comm() {
  static Communicator *comm = nullptr;
  return comm;
}

inline int run_process_tests(int argc, char **argv) {
  ::testing::InitGoogleTest(&argc, argv);
  std::unique_ptr<Bootstrap> bootstrap;
  if (bootstrap_from_environment(&bootstrap) != QUORUM_OK) {
    std::fprintf(stderr, "bootstrap failed: %s\n", last_error());
    return 1;
  }
  std::unique_ptr<Communicator> comm;
  if (Communicator::create(std::move(bootstrap), &comm) != QUORUM_OK) {
    std::fprintf(stderr, "communicator failed: %s\n", last_error());
    return 1;
  }
  process_comm() = comm.get();
  int rc = RUN_ALL_TESTS();
  if (comm->finalize() != QUORUM_OK && rc == 0) rc = 1;
  return rc;
}

}  // namespace quorum::test
