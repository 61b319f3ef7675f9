// transport_test_util.hpp: helpers for transport tests: wait for a request by
// driving progress (sleeping on the event fd when the transport can be armed),
// and run P ranks as threads, each with its own transport and bootstrap.
#pragma once

#include <gtest/gtest.h>
#include <poll.h>

#include <chrono>
#include <functional>
#include <memory>
#include <thread>
#include <vector>

#include "runtime/bootstrap/thread_group_bootstrap.hpp"
#include "runtime/clock.hpp"
#include "runtime/log.hpp"
#include "transports/transport.hpp"

namespace quorum::test {

// Progress until `done()` or the deadline; sleeps on the event fd when armed.
inline bool progress_until(Transport &transport, const std::function<bool()> &done,
                           int timeout_ms = 10000) {
  Deadline deadline = Deadline::after_ms(timeout_ms);
  while (!done()) {
    if (deadline.expired()) return false;
    if (transport.progress()) continue;
    if (done()) break;
    int fd = transport.event_fd();
    if (fd >= 0 && transport.arm()) {
      pollfd p{fd, POLLIN, 0};
      poll(&p, 1, deadline.remaining_ms(100));
    } else if (fd < 0) {
      std::this_thread::sleep_for(std::chrono::microseconds(50));
    }
  }
  return true;
}

inline bool wait_request(Transport &transport, TransportRequest &req, int timeout_ms = 10000) {
  return progress_until(
      transport, [&] { return !req.pending(); }, timeout_ms);
}

inline bool wait_all(Transport &transport, std::vector<TransportRequest> &reqs,
                     int timeout_ms = 10000) {
  return progress_until(
      transport,
      [&] {
        for (auto &r : reqs) {
          if (r.pending()) return false;
        }
        return true;
      },
      timeout_ms);
}

// Runs body(transport, bootstrap) on P threads, each with a fresh transport
// from `factory`, initialised before and shut down after the body.
inline void run_ranks(int size, std::unique_ptr<Transport> (*factory)(),
                      const std::function<void(Transport &, Bootstrap &)> &body) {
  auto group = ThreadGroup::create(size);
  std::vector<std::thread> threads;
  for (int r = 0; r < size; ++r) {
    threads.emplace_back([&, r] {
      set_log_rank(r);
      std::unique_ptr<Bootstrap> bootstrap = group->bootstrap(r);
      std::unique_ptr<Transport> transport = factory();
      Status init = transport->init(*bootstrap);
      EXPECT_EQ(init, kOk) << "rank " << r << ": " << last_error();
      if (init != kOk) return;
      EXPECT_EQ(transport->rank(), r);
      EXPECT_EQ(transport->size(), size);
      body(*transport, *bootstrap);
      Status down = transport->shutdown(*bootstrap);
      EXPECT_EQ(down, kOk) << "rank " << r << ": " << last_error();
    });
  }
  for (auto &t : threads) t.join();
}

}  // namespace quorum::test
