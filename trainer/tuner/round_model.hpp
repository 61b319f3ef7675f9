// round_model.hpp: the expected step time and fresh contributions of a
// gradient reduction (sync, solo, majority) under an injected imbalance
// model, by simulating the ranks' timelines.
//
// Rank i is ready to post round r at R_i(r) = T_i(r) + delay_i(r) + compute.
// The round activates at A_r: sync at max_i R_i(r), solo at min_i R_i(r),
// majority at the drawn initiator's R_i(r) (PartialAllreduce's own draw);
// every (max_staleness + 1)-th partial round is synchronous, as there. It completes at A_r + comm.
// A rank ready by A_r is fresh in it and waits for the result; a later one missed it (its gradient
// is carried to the next round) and its wait returns once the round is done: T_i(r + 1) =
// max(R_i(r), A_r + comm). The job ends with its slowest rank, so a round costs max_i T_i(N) / N
// over N simulated rounds.
//
// The steps a partial run needs are taken as those of a synchronous run at
// the fresh part of the batch (a carried gradient is counted as nothing
// extra): S(B x fresh / K), a model the validation checks, not a law.
#pragma once

#include <cstdint>
#include <string>

#include "runtime/status.hpp"
#include "trainer/distributed/imbalance.hpp"

namespace quorum::trainer::tuner {

enum class Reduction { Sync, Solo, Majority };

const char *reduction_name(Reduction r);
// "sync", "solo" or "majority" (quorum-train's --reduce names); false otherwise.
bool parse_reduction(const std::string &name, Reduction *out);

struct RoundEstimate {
  double round_seconds = 0;  // wall time per round (per step) of the whole job
  double fresh = 0;          // mean fresh contributions per round (1..K)
};

// compute_seconds and comm_seconds >= 0, ranks >= 1, rounds >= 1; the delays
// are the model's (delay_ms) for ranks 0..ranks-1 and steps 0..rounds-1;
// max_staleness as quorum-train's --max-staleness (0: every round synchronous).
// INVALID_ARG on bad input or a model that cannot run on `ranks`.
Status simulate_rounds(const ImbalanceModel &imbalance, Reduction reduction, int ranks,
                       double compute_seconds, double comm_seconds, int rounds, uint64_t seed,
                       uint64_t max_staleness, RoundEstimate *out);

}  // namespace quorum::trainer::tuner
