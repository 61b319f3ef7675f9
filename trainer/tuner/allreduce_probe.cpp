// allreduce_probe.cpp: see allreduce_probe.hpp.
#include "trainer/tuner/allreduce_probe.hpp"

#include <algorithm>
#include <chrono>

namespace quorum::trainer::tuner {

Status probe_allreduce(quorum_comm_t comm, const AllreduceProbeOptions &o,
                       std::vector<AllreduceSample> *samples, AlphaBeta *fit) {
  samples->clear();
  const int ranks = comm ? quorum_comm_size(comm) : 1;
  if (ranks < 2)
    return fail(QUORUM_ERR_INVALID_ARG, "tuner",
                "allreduce probe: runs on at least 2 launched ranks ({} here)", ranks);
  if (o.min_bytes < 4 || o.max_bytes < o.min_bytes || o.iterations < 1)
    return fail(QUORUM_ERR_INVALID_ARG, "tuner", "allreduce probe: bad sizes {}..{}", o.min_bytes,
                o.max_bytes);
  std::vector<size_t> sizes;
  for (size_t s = o.min_bytes; s < o.max_bytes; s *= 4) sizes.push_back(s);
  sizes.push_back(o.max_bytes);
  std::vector<float> buf(o.max_bytes / sizeof(float), 1.0f);
  auto check = [](quorum_status_t s) -> Status {
    if (s != QUORUM_OK)
      return fail(QUORUM_ERR_TRANSPORT, "tuner", "allreduce probe: {}", quorum_last_error());
    return kOk;
  };
  using Clock = std::chrono::steady_clock;
  for (size_t bytes : sizes) {
    const size_t count = bytes / sizeof(float);
    std::vector<double> times;
    for (int i = 0; i < o.warmup + o.iterations; ++i) {
      QUORUM_CHECK(check(quorum_barrier(comm)));
      const auto t0 = Clock::now();
      QUORUM_CHECK(check(
          quorum_allreduce(comm, QUORUM_IN_PLACE, buf.data(), count, QUORUM_FLOAT32, QUORUM_AVG)));
      if (i >= o.warmup) times.push_back(std::chrono::duration<double>(Clock::now() - t0).count());
    }
    std::nth_element(times.begin(), times.begin() + times.size() / 2, times.end());
    double median = times[times.size() / 2];
    QUORUM_CHECK(
        check(quorum_allreduce(comm, QUORUM_IN_PLACE, &median, 1, QUORUM_FLOAT64, QUORUM_MAX)));
    samples->push_back({double(count * sizeof(float)), median});
  }
  return fit_alpha_beta(*samples, ranks, fit);
}

}  // namespace quorum::trainer::tuner
