// thread_ranks.hpp: runs P ranks as threads of this process, each with its own
// communicator over the inproc transport (or another, by name; run_c_ranks:
// a C handle, as the C API gives it), and collects their results. A failing
// check names the rank.
#pragma once

#include <gtest/gtest.h>

#include <functional>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "collectives/c_api_handles.hpp"
#include "collectives/communicator.hpp"
#include "runtime/bootstrap/thread_group_bootstrap.hpp"

namespace quorum::test {

// clean_finalize: expect finalize to succeed (false in tests where ranks fail).
inline void run_ranks(int p, const std::function<void(Communicator &)> &body,
                      const std::string &transport = "inproc", CommOptions options = {},
                      bool clean_finalize = true) {
  auto group = ThreadGroup::create(p);
  std::vector<std::thread> threads;
  options.transport = transport;
  for (int r = 0; r < p; ++r) {
    threads.emplace_back([&, r] {
      std::unique_ptr<Communicator> comm;
      Status s = Communicator::create(group->bootstrap(r), &comm, options);
      ASSERT_EQ(s, QUORUM_OK) << "rank " << r << ": " << last_error();
      body(*comm);
      Status fs = comm->finalize();
      if (clean_finalize) {
        EXPECT_EQ(fs, QUORUM_OK) << "rank " << r << ": " << last_error();
      }
    });
  }
  for (auto &t : threads) t.join();
}

// Runs P ranks, each with a C handle (quorum_comm_t) over inproc, as an
// application of the C API sees it; finalize is expected to succeed.
inline void run_c_ranks(int p, const std::function<void(quorum_comm_t)> &body) {
  auto group = ThreadGroup::create(p);
  std::vector<std::thread> threads;
  for (int r = 0; r < p; ++r) {
    threads.emplace_back([&, r] {
      CommOptions o;
      o.transport = "inproc";
      auto *h = new quorum_comm;
      ASSERT_EQ(Communicator::create(group->bootstrap(r), &h->comm, o), QUORUM_OK)
          << "rank " << r << ": " << last_error();
      body(h);
      EXPECT_EQ(quorum_finalize(h), QUORUM_OK) << "rank " << r << ": " << last_error();
    });
  }
  for (auto &t : threads) t.join();
}

}  // namespace quorum::test
