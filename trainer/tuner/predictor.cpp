// predictor.cpp: see predictor.hpp.
#include "trainer/tuner/predictor.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <limits>

#include "trainer/tuner/kneedle.hpp"

namespace quorum::trainer::tuner {

namespace {
// Enough rounds for a stable mean, fewer on many ranks (a paper-model delay
// costs O(K) to draw).
int simulated_rounds(int ranks) {
  return int(std::clamp(4.0e6 / (double(ranks) * ranks), 200.0, 2000.0));
}
}  // namespace

Status predict_all(const PredictorInputs &in, std::vector<Prediction> *out) {
  out->clear();
  if (in.compute.empty() || in.local_batches.empty() || in.ranks.empty() || !(in.steps.s_min > 0) ||
      !(in.price > 0))
    return fail(QUORUM_ERR_INVALID_ARG, "tuner",
                "predict: needs a compute profile, batch and rank grids, a positive S_min and "
                "a positive price");
  for (int k : in.ranks) {
    if (k < 1) return fail(QUORUM_ERR_INVALID_ARG, "tuner", "predict: {} ranks", k);
    if (k > 1 && in.allreduce.measured_ranks < 2)
      return fail(QUORUM_ERR_INVALID_ARG, "tuner",
                  "predict: {} ranks asked, but no allreduce was measured (launch at least 2 "
                  "ranks)",
                  k);
  }
  for (int k : in.ranks) {
    for (int b : in.local_batches) {
      if (in.max_local_batch > 0 && b > in.max_local_batch) continue;
      Prediction p;
      p.ranks = k, p.local_batch = b, p.global_batch = b * k;
      bool outside = false;
      const StepProfile &table = k > 1 && !in.compute_many.empty() ? in.compute_many : in.compute;
      p.compute_seconds = table.seconds_at(b, &outside);
      p.comm_seconds = in.allreduce.seconds(in.gradient_bytes, k);
      RoundEstimate round;
      // One rank has nobody to wait for or to reduce with: no delays injected.
      QUORUM_CHECK(simulate_rounds(k > 1 ? in.imbalance : ImbalanceModel{},
                                   k > 1 ? in.reduction : Reduction::Sync, k,
                                   p.compute_seconds, p.comm_seconds, simulated_rounds(k), in.seed,
                                   in.max_staleness, &round));
      p.step_seconds = round.round_seconds;
      p.fresh = round.fresh;
      p.throughput = p.global_batch / p.step_seconds;
      // A partial step counts as a synchronous one of its fresh examples.
      const double effective_batch = std::max(1.0, p.global_batch * round.fresh / k);
      p.steps = in.steps.steps(effective_batch);
      p.efficiency = in.steps.steps(in.steps.b0) * in.steps.b0 / (p.steps * p.global_batch);
      if (in.eval_every_examples > 0) {
        const double interval = std::max(1.0, in.eval_every_examples / p.global_batch);
        p.steps = std::ceil(p.steps / interval) * interval;
      }
      p.seconds = p.steps * p.step_seconds;
      p.cost = p.seconds * k * in.price;
      const LrChoice lr =
          lr_for_batch(in.scaling, in.lr0, in.lr_b0, p.global_batch, in.warmup_epochs);
      p.lr = lr.lr, p.warmup_epochs = lr.warmup_epochs;
      p.extrapolated = outside || k > in.launched_ranks;
      out->push_back(p);
    }
  }
  if (out->empty())
    return fail(QUORUM_ERR_INVALID_ARG, "tuner",
                "predict: no local batch of {}..{} fits the memory bound of {} examples per rank",
                in.local_batches.front(), in.local_batches.back(), in.max_local_batch);
  return kOk;
}

namespace {

// Marks the rows no other row beats in both time and cost; returns them by time.
std::vector<size_t> mark_pareto(std::vector<Prediction> *rows) {
  std::vector<size_t> order(rows->size());
  for (size_t i = 0; i < order.size(); ++i) order[i] = i;
  std::sort(order.begin(), order.end(), [&](size_t a, size_t b) {
    const auto &x = (*rows)[a], &y = (*rows)[b];
    return x.seconds != y.seconds ? x.seconds < y.seconds : x.cost < y.cost;
  });
  std::vector<size_t> front;
  double best_cost = std::numeric_limits<double>::infinity();
  for (size_t i : order) {
    auto &r = (*rows)[i];
    r.pareto = r.knee = false;
    if (r.cost < best_cost) {
      r.pareto = true;
      best_cost = r.cost;
      front.push_back(i);
    }
  }
  return front;
}

std::string describe(const Prediction &p) {
  return fmt::format("batch {} on {} rank(s) ({:.1f} s, cost {:.4g})", p.global_batch, p.ranks,
                     p.seconds, p.cost);
}

}  // namespace

Status choose(std::vector<Prediction> *rows, double deadline_s, double budget, Choice *out) {
  *out = Choice{};
  if (rows->empty()) return fail(QUORUM_ERR_INVALID_ARG, "tuner", "choose: no configurations");
  const std::vector<size_t> front = mark_pareto(rows);
  // Time rises and cost falls along the front: a convex, decreasing curve.
  std::vector<double> t, c;
  for (size_t i : front) t.push_back((*rows)[i].seconds), c.push_back((*rows)[i].cost);
  Knee knee;
  if (front.size() >= 3) QUORUM_CHECK(find_knee(t, c, CurveShape::ConvexDecreasing, &knee));
  if (knee.found) (*rows)[front[knee.index]].knee = true;

  const bool has_deadline = deadline_s > 0, has_budget = budget > 0;
  if (has_deadline || has_budget) {
    size_t best = rows->size();
    for (size_t i = 0; i < rows->size(); ++i) {
      const auto &r = (*rows)[i];
      if ((has_deadline && r.seconds > deadline_s) || (has_budget && r.cost > budget)) continue;
      const bool better =
          best == rows->size() ||
          (has_deadline ? r.cost < (*rows)[best].cost : r.seconds < (*rows)[best].seconds);
      if (better) best = i;
    }
    if (best == rows->size()) {
      const auto &fastest = (*rows)[front.front()], &cheapest = (*rows)[front.back()];
      return fail(QUORUM_ERR_INVALID_ARG, "tuner",
                  "no configuration meets {}{}{}: the fastest is {}, the cheapest {}",
                  has_deadline ? fmt::format("--deadline {:.4g} s", deadline_s) : "",
                  has_deadline && has_budget ? " and " : "",
                  has_budget ? fmt::format("--budget {:.4g}", budget) : "", describe(fastest),
                  describe(cheapest));
    }
    out->index = best;
    out->objective = has_deadline ? Objective::MinCost : Objective::MinTime;
    out->reason = has_deadline ? fmt::format("the cheapest within the {} s deadline{}", deadline_s,
                                             has_budget ? " and the budget" : "")
                               : fmt::format("the fastest within the budget of {}", budget);
    return kOk;
  }
  if (knee.found) {
    out->index = front[knee.index];
    out->objective = Objective::Knee;
    out->reason = fmt::format(
        "the knee of the time/cost Pareto front ({} configurations on it): faster ones cost "
        "more per second saved",
        front.size());
  } else {
    out->index = front.front();
    out->objective = Objective::MinTime;
    out->reason =
        front.size() == 1
            ? "the fastest, and also the cheapest (the front is one point)"
            : fmt::format("the fastest: the Pareto front ({} points) has no knee", front.size());
    (*rows)[out->index].knee = false;
  }
  return kOk;
}

}  // namespace quorum::trainer::tuner
