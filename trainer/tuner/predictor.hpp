// predictor.hpp: time and cost to a target accuracy for every (global batch,
// ranks), the Pareto front of (time, cost), its knee, and the choice.
//
// Per configuration: step time tau(B, K) from t_compute(B / K) and
// t_allreduce(M, K) (no overlap assumed: quorum-train's reductions wait for
// the whole gradient after the backward pass) through the round model
// (round_model.hpp: sync, solo or majority under an imbalance model; with
// none and sync, tau = t_compute + t_allreduce), throughput B / tau, steps
// S(B x fresh / K) from StepsModel and its statistical efficiency, time
// T = S tau, cost = T K price.
#pragma once

#include <string>
#include <vector>

#include "runtime/status.hpp"
#include "trainer/distributed/imbalance.hpp"
#include "trainer/tuner/alpha_beta.hpp"
#include "trainer/tuner/lr_recipe.hpp"
#include "trainer/tuner/round_model.hpp"
#include "trainer/tuner/step_profile.hpp"
#include "trainer/tuner/steps_model.hpp"

namespace quorum::trainer::tuner {

struct PredictorInputs {
  StepProfile compute;       // seconds per step against the local batch, one rank alone
  StepProfile compute_many;  // the same with every launched rank at work (K >= 2; empty: compute)
  AlphaBeta allreduce;
  double gradient_bytes = 0;
  StepsModel steps;
  // Runs are seen to reach the target at their test evaluations, every this
  // many examples (0: steps are not rounded up to an evaluation).
  double eval_every_examples = 0;
  std::vector<int> local_batches;         // grid of b per rank
  std::vector<int> ranks;                 // K values
  int launched_ranks = 1;                 // K beyond this is extrapolated
  double max_local_batch = 0;             // memory bound (0: none)
  double price = 1.0 / 3600;              // per rank-second (default 1 per rank-hour / 3600)
  Reduction reduction = Reduction::Sync;  // on K >= 2 (one rank has nothing to reduce)
  ImbalanceModel imbalance;               // on K >= 2 (default: none)
  uint64_t seed = 1;                      // of the majority initiators' draw
  uint64_t max_staleness = 32;            // a synchronous round every max_staleness + 1
  LrScaling scaling = LrScaling::Sqrt;
  double lr0 = 0.02, lr_b0 = 64, warmup_epochs = 1.0;
};

struct Prediction {
  int global_batch = 0, ranks = 0, local_batch = 0;
  double lr = 0, warmup_epochs = 0;
  double step_seconds = 0, compute_seconds = 0, comm_seconds = 0;
  double throughput = 0;  // examples per second
  double fresh = 0;       // fresh contributions per step (K under sync)
  double efficiency = 0;
  double steps = 0, seconds = 0, cost = 0;
  bool extrapolated = false;  // K above the launched ranks, or b outside the profile
  bool pareto = false, knee = false;
};

// One row per (b, K) of the grids; INVALID_ARG if an input is missing or the
// memory bound leaves no local batch.
Status predict_all(const PredictorInputs &in, std::vector<Prediction> *out);

enum class Objective { Knee, MinTime, MinCost };

struct Choice {
  size_t index = 0;
  Objective objective = Objective::Knee;
  std::string reason;
};

// Marks the Pareto front and its knee, then picks: with a deadline the
// cheapest row that meets it, with a budget the fastest within it (both: the
// cheapest within both), otherwise the knee (or, on a front too short or
// straight for a knee, the fastest). deadline/budget <= 0: none. INVALID_ARG
// when no row meets them, naming the nearest.
Status choose(std::vector<Prediction> *rows, double deadline_s, double budget, Choice *out);

}  // namespace quorum::trainer::tuner
