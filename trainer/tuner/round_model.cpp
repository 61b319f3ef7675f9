// round_model.cpp: see round_model.hpp.
#include "trainer/tuner/round_model.hpp"

#include <algorithm>
#include <cmath>
#include <vector>

#include "collectives/partial/activation.hpp"

namespace quorum::trainer::tuner {

const char *reduction_name(Reduction r) {
  switch (r) {
    case Reduction::Sync:
      return "sync";
    case Reduction::Solo:
      return "solo";
    case Reduction::Majority:
      return "majority";
  }
  return "?";
}

bool parse_reduction(const std::string &name, Reduction *out) {
  for (Reduction r : {Reduction::Sync, Reduction::Solo, Reduction::Majority})
    if (name == reduction_name(r)) {
      *out = r;
      return true;
    }
  return false;
}

Status simulate_rounds(const ImbalanceModel &imbalance, Reduction reduction, int ranks,
                       double compute_seconds, double comm_seconds, int rounds, uint64_t seed,
                       uint64_t max_staleness, RoundEstimate *out) {
  *out = RoundEstimate{};
  if (ranks < 1 || rounds < 1 || !(compute_seconds >= 0) || !(comm_seconds >= 0) ||
      !std::isfinite(compute_seconds) || !std::isfinite(comm_seconds))
    return fail(QUORUM_ERR_INVALID_ARG, "tuner",
                "round model: need ranks >= 1, rounds >= 1 and finite times >= 0 (got {} ranks, "
                "{} rounds, compute {} s, comm {} s)",
                ranks, rounds, compute_seconds, comm_seconds);
  std::vector<double> clock(size_t(ranks), 0.0);
  std::vector<double> ready(size_t(ranks), 0.0);
  double fresh_total = 0;
  for (int r = 0; r < rounds; ++r) {
    for (int i = 0; i < ranks; ++i)
      ready[size_t(i)] =
          clock[size_t(i)] + 1e-3 * imbalance.delay_ms(i, ranks, r) + compute_seconds;
    double activation = 0;
    const bool sync =
        reduction == Reduction::Sync || partial::scheduled_sync_round(uint64_t(r), max_staleness);
    switch (sync ? Reduction::Sync : reduction) {
      case Reduction::Sync:
        activation = *std::max_element(ready.begin(), ready.end());
        break;
      case Reduction::Solo:
        activation = *std::min_element(ready.begin(), ready.end());
        break;
      case Reduction::Majority:
        activation = ready[size_t(partial::majority_initiator(seed, uint64_t(r), ranks))];
        break;
    }
    const double done = activation + comm_seconds;
    for (int i = 0; i < ranks; ++i) {
      fresh_total += ready[size_t(i)] <= activation ? 1 : 0;
      clock[size_t(i)] = std::max(ready[size_t(i)], done);
    }
  }
  out->round_seconds = *std::max_element(clock.begin(), clock.end()) / rounds;
  out->fresh = fresh_total / rounds;
  return kOk;
}

}  // namespace quorum::trainer::tuner
