// quorum-tune: predicts time and cost to a target accuracy for every global
// batch size and rank count, and picks one (after Tula; TRAINER-AND-TUNER.md).
//
// Run on one process, or on K ranks under quorum-run / mpirun / srun like
// quorum-train (same model, backend and data flags). Four short phases:
//   1. profile: seconds per training step over a geometric grid of local
//      batches on the real backend (alone on rank 0, then on every rank at
//      once), bounded by the memory each batch needs;
//   2. allreduce: this runtime's allreduce up to the gradient's size on the
//      launched ranks, fitted to an alpha-beta model (K >= 2 only);
//   3. pilot: quorum-train's own training at --pilot-batch until the target
//      accuracy, measuring the gradient noise scale on the way (its length is
//      the steps the target takes, at most --pilot-max-epochs);
//   4. predict (S(B) = S_min (1 + B_noise / B), tau = compute + allreduce),
//      the Pareto front of (time, cost), its knee, and the choice.
// Then a table, one line with the choice and the quorum-train flags that run
// it, --json and --plot.
#include <unistd.h>

#include <CLI/CLI.hpp>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <nlohmann/json.hpp>

#include "quorum/quorum.h"
#include "runtime/status.hpp"
#include "tools/cli_common.hpp"
#include "tools/quorum_train_checks.hpp"
#include "tools/quorum_tune_options.hpp"
#include "tools/quorum_tune_report.hpp"
#include "tools/train_common_options.hpp"
#include "trainer/backend.hpp"
#include "trainer/dataset.hpp"
#include "trainer/distributed/collective_reducer.hpp"
#include "trainer/distributed/setup_agreement.hpp"
#include "trainer/trainer.hpp"
#include "trainer/tuner/allreduce_probe.hpp"
#include "trainer/tuner/compute_profiler.hpp"
#include "trainer/tuner/pilot.hpp"
#include "trainer/tuner/predictor.hpp"

namespace qt = quorum::trainer;
namespace tu = quorum::trainer::tuner;
namespace report = quorum::tune_report;
namespace checks = quorum::train_checks;
using nlohmann::json;

namespace {

using quorum::tune_options::Options;

int rank_of(quorum_comm_t comm) {
  return comm ? quorum_comm_rank(comm) : 0;
}

// Memory each rank may use: --memory-mb, or half the available memory shared
// by the ranks on this host.
double memory_bound_bytes(const Options &o, int local_ranks) {
  if (o.memory_mb > 0) return o.memory_mb * 1048576.0;
  const double avail = double(sysconf(_SC_AVPHYS_PAGES)) * double(sysconf(_SC_PAGESIZE));
  return 0.5 * avail / std::max(1, local_ranks);
}

// quorum-train's --lr / --lr-reference-batch / --warmup-epochs for a peak rate
// `peak` at global batch B warmed up from the rate at lr0's batch.
std::string train_flags(const tu::Prediction &p, const Options &o) {
  int ref = p.global_batch;
  double lr = p.lr;
  if (p.warmup_epochs > 0) {
    // Start the warmup from the unscaled rate: lr x B / ref = peak.
    const double base = o.lr;
    ref = std::max(1, int(std::lround(p.global_batch * base / p.lr)));
    lr = p.lr * ref / p.global_batch;
  }
  std::string flags =
      fmt::format("--batch {} --lr {:.6g} --lr-reference-batch {} --warmup-epochs {:.3g}",
                  p.local_batch, lr, ref, p.warmup_epochs);
  if (p.ranks > 1 && o.reduction != tu::Reduction::Sync)
    flags += fmt::format(" --reduce {} --max-staleness {}", tu::reduction_name(o.reduction),
                         o.max_staleness);
  if (p.ranks > 1 && o.imbalance != "none") flags += " --imbalance " + o.imbalance;
  return flags;
}

}  // namespace

int main(int argc, char **argv) {
  CLI::App app{
      "quorum-tune: predict the time and cost to a target accuracy for every batch size and "
      "rank count, and pick one (run it as quorum-train is run: alone, or under quorum-run, "
      "mpirun or srun)"};
  Options o;
  quorum::tune_options::add_options(app, &o);
  quorum_tools::add_version_flag(app, "quorum-tune");
  QUORUM_TOOL_PARSE(app, argc, argv);
  auto usage = [](const std::string &e) {
    std::fprintf(stderr, "quorum-tune: %s\n", e.c_str());
    return 2;
  };
  // Checked here rather than by CLI11's required(), which would name this
  // flag before an unknown one.
  if (app.count("--target-accuracy") == 0) return usage("--target-accuracy is required");
  (void)tu::parse_reduction(o.reduce, &o.reduction);  // the option checked the name
  qt::ImbalanceModel imbalance;
  if (qt::ImbalanceModel::parse(o.imbalance, o.seed, &imbalance) != quorum::kOk)
    return usage(quorum::last_error());
  if (o.batch_max < o.batch_min)
    return usage(fmt::format("--batch-max {} is below --batch-min {}", o.batch_max, o.batch_min));
  for (const auto &[path, flag] : {std::pair{o.json_path, "--json"}, {o.plot_path, "--plot"}})
    if (app.count(flag) > 0)
      if (const std::string e = report::unwritable_output(path, flag); !e.empty()) return usage(e);

  const bool launched = std::getenv("QUORUM_RANK") != nullptr ||
                        std::getenv("PMIX_RANK") != nullptr ||
                        std::getenv("OMPI_COMM_WORLD_RANK") != nullptr;
  quorum_comm_t comm = nullptr;
  if (launched && quorum_init(&comm) != QUORUM_OK) {
    std::fprintf(stderr, "quorum-tune: %s\n", quorum_last_error());
    return 1;
  }
  const int world = comm ? quorum_comm_size(comm) : 1, rank = rank_of(comm);
  auto finish = [&](int code) {
    if (comm) quorum_finalize(comm);
    return code;
  };
  if (const std::string e = checks::lone_rank_of_many(world); !e.empty()) return finish(usage(e));
  if (o.ranks.empty())
    for (int k = 1; k <= world; ++k) o.ranks.push_back(k);
  std::sort(o.ranks.begin(), o.ranks.end());
  o.ranks.erase(std::unique(o.ranks.begin(), o.ranks.end()), o.ranks.end());
  if (o.ranks.back() > world && (world < 2 || !o.extrapolate))
    return finish(usage(
        world < 2 ? fmt::format("--ranks {}: only 1 rank is launched, so no allreduce can be "
                                "measured; launch at least 2 ranks (quorum-run -n 2 ...), then "
                                "--extrapolate to predict more",
                                o.ranks.back())
                  : fmt::format("--ranks {} is above the {} launched ranks; add --extrapolate to "
                                "predict it from the allreduce measured on {}",
                                o.ranks.back(), world, world)));
  if (o.pilot_batch < o.batch_min || o.pilot_batch > o.batch_max)
    return finish(usage(fmt::format("--pilot-batch {} is outside the grid {}..{}", o.pilot_batch,
                                    o.batch_min, o.batch_max)));
  auto say = [&](const std::string &line) {
    if (rank == 0) std::fprintf(stderr, "quorum-tune: %s\n", line.c_str());
  };

  // Setup on every rank; all learn at once whether one failed.
  std::unique_ptr<qt::Backend> backend;
  std::unique_ptr<qt::CollectiveReducer> dist;
  qt::DataSplit data;
  std::vector<int> grid;
  double bound = 0, grad_bytes = 0;
  auto set_up = [&]() -> int {
    qt::BackendOptions bopts;
    bopts.threads = o.threads;
    if (qt::make_backend(o.backend, bopts, &backend) != quorum::kOk) return 1;
    if (qt::load_dataset(o.data, o.data_dir, !o.no_verify, &data) != quorum::kOk) return 1;
    if (o.train_limit > 0) data.train.truncate(size_t(o.train_limit));
    if (o.test_limit > 0) data.test.truncate(size_t(o.test_limit));
    if (tu::geometric_grid(o.batch_min, o.batch_max, o.grid_factor, &grid) != quorum::kOk) return 2;
    const char *local = std::getenv("QUORUM_LOCAL_SIZE");
    bound = memory_bound_bytes(o, local ? std::atoi(local) : world);
    std::vector<int> fits;
    for (int b : grid) {
      double bytes = 0;
      size_t params = 0;
      if (tu::estimate_model_bytes(o.model, b, &bytes, &params) != quorum::kOk) return 2;
      grad_bytes = double(params) * sizeof(float);
      if (bytes <= bound) fits.push_back(b);
    }
    if (fits.empty()) {
      double bytes = 0;
      size_t params = 0;
      (void)tu::estimate_model_bytes(o.model, grid.front(), &bytes, &params);
      quorum::fail(QUORUM_ERR_NO_MEMORY, "tune",
                   "the batch range {}..{} does not fit in memory: batch {} needs {:.3g} MB, "
                   "{:.3g} MB per rank are available (--memory-mb)",
                   o.batch_min, o.batch_max, grid.front(), bytes / 1048576, bound / 1048576);
      return 2;
    }
    if (fits.size() < grid.size())
      say(fmt::format("batches above {} need more than the {:.0f} MB per rank: left out",
                      fits.back(), bound / 1048576));
    grid = fits;
    if (o.pilot_batch > grid.back()) {
      quorum::fail(QUORUM_ERR_NO_MEMORY, "tune", "--pilot-batch {} does not fit in memory",
                   o.pilot_batch);
      return 2;
    }
    if (comm) {
      qt::ReducerOptions ro;
      ro.mode = "sync";
      ro.seed = o.seed;
      if (qt::CollectiveReducer::create(comm, ro, nullptr, &dist) != quorum::kOk) return 2;
      dist->set_backend(backend.get());
    }
    return 0;
  };
  using Clock = std::chrono::steady_clock;
  const auto t_setup = Clock::now();
  int code = set_up();
  const double setup_seconds = std::chrono::duration<double>(Clock::now() - t_setup).count();
  std::string error = code != 0 ? quorum::last_error() : "";
  if (comm && world > 1) {
    int agreed = code;
    const quorum::Status s = qt::agree_on_setup(comm, error, code, &agreed);
    if (s == QUORUM_ERR_INVALID_ARG) {
      error = quorum::last_error(), code = agreed;
    } else if (s != quorum::kOk && code == 0) {
      error = quorum::last_error(), code = 1;
    }
  }
  auto stop = [&](int c, const std::string &e) {
    if (rank == 0) std::fprintf(stderr, "quorum-tune: %s\n", e.c_str());
    if (dist) dist->abandon();
    return finish(c);
  };
  if (code != 0) return stop(code, error);
  const auto t_start = Clock::now();
  auto elapsed = [&] { return std::chrono::duration<double>(Clock::now() - t_start).count(); };

  // 1. Compute profile: alone (K = 1 rows), then all ranks at once.
  tu::ProfileOptions po;
  po.model = o.model, po.batches = grid, po.warmup = o.profile_warmup, po.timed = o.profile_steps;
  po.max_seconds = o.profile_seconds, po.precision = o.profile_precision;
  po.tight = o.profile_tight;
  tu::StepProfile alone, together;
  auto show = [&](const char *what) {
    return [&, what](int b, double s) {
      say(fmt::format("profile ({}): local batch {}: {:.2f} ms per step, {:.0f} examples/s", what,
                      b, 1e3 * s, b / s));
    };
  };
  quorum::Status st = quorum::kOk;
  double alone_seconds = 0;  // rank 0's profile alone (the others wait)
  if (rank == 0)
    st = tu::profile_compute(po, backend.get(), data.train, nullptr, show("one rank"), &alone);
  if (comm && world > 1) {
    // Broadcast rank 0's table (the others waited at the broadcast).
    std::vector<double> times(grid.size(), 0);
    if (rank == 0 && st == quorum::kOk)
      for (size_t i = 0; i < alone.points().size(); ++i) times[i] = alone.points()[i].seconds;
    if (quorum_bcast(comm, times.data(), times.size() * sizeof(double), 0) != QUORUM_OK)
      return stop(1, quorum_last_error());
    if (rank != 0)
      for (size_t i = 0; i < grid.size(); ++i)
        if (times[i] > 0) (void)alone.add(grid[i], times[i]);
    alone_seconds = elapsed();
    if (st == quorum::kOk && !alone.empty())
      st = tu::profile_compute(po, backend.get(), data.train, comm,
                               show(fmt::format("{} ranks", world).c_str()), &together);
  }
  if (st != quorum::kOk || alone.empty())
    return stop(1, st != quorum::kOk ? quorum::last_error() : "profile failed on rank 0");
  const double profile_seconds = elapsed();
  if (alone_seconds == 0) alone_seconds = profile_seconds;
  for (const tu::StepProfile *p : {&alone, &together})
    if (!p->empty() && p->points().back().batch < grid.back())
      say(fmt::format(
          "profile ({}): batches above {} left unmeasured, extended from the last "
          "three, which lie on a line to within {:.0f}% (--profile-tight)",
          p == &alone ? "one rank" : "all ranks", p->points().back().batch, 100 * o.profile_tight));
  say(
      fmt::format("profile took {:.1f} s (one rank {:.1f} s, all ranks {:.1f} s); setup and data "
                  "load {:.1f} s before it",
                  profile_seconds, alone_seconds, profile_seconds - alone_seconds, setup_seconds));

  // 2. Allreduce on the launched ranks.
  tu::AlphaBeta ab;
  std::vector<tu::AllreduceSample> samples;
  if (comm && world > 1) {
    tu::AllreduceProbeOptions ao;
    ao.max_bytes = size_t(grad_bytes);
    ao.min_bytes = std::min<size_t>(4096, ao.max_bytes);
    if (tu::probe_allreduce(comm, ao, &samples, &ab) != quorum::kOk)
      return stop(1, quorum::last_error());
    say(
        fmt::format("allreduce on {} ranks: alpha {:.1f} us per hop, beta {:.3f} ns per byte "
                    "(r2 {:.3f}); the gradient ({:.0f} KiB) takes {:.2f} ms",
                    world, 1e6 * ab.alpha, 1e9 * ab.beta, ab.r2, grad_bytes / 1024,
                    1e3 * ab.seconds(grad_bytes, world)));
  }
  const double comm_seconds = elapsed() - profile_seconds;

  // 3. Pilot at --pilot-batch on the launched ranks.
  const tu::LrScaling scaling = o.scaling == "sqrt" ? tu::LrScaling::Sqrt : tu::LrScaling::Linear;
  const double b0 = double(o.pilot_batch) * world;
  tu::PilotOptions pilot;
  pilot.model = o.model, pilot.local_batch = o.pilot_batch;
  pilot.lr = tu::lr_for_batch(scaling, o.lr, o.lr_reference_batch, b0).lr;
  pilot.momentum = o.momentum, pilot.weight_decay = o.weight_decay, pilot.seed = o.seed;
  pilot.target_accuracy = o.target / 100, pilot.evals_per_epoch = o.evals_per_epoch;
  pilot.max_epochs = o.pilot_max_epochs, pilot.noise_every = o.noise_every;
  pilot.screen_fraction = o.pilot_screen;
  pilot.extrapolate = o.pilot_extrapolate;
  say(fmt::format("pilot: batch {} ({} per rank), lr {:.4g}, until {:.2f}% (at most {} epochs{})",
                  b0, o.pilot_batch, pilot.lr, o.target, o.pilot_max_epochs,
                  o.pilot_extrapolate ? "; or until a fit of its curve gives the step" : ""));
  qt::LocalGradientReducer local;
  qt::GradientReducer *reducer = dist ? static_cast<qt::GradientReducer *>(dist.get()) : &local;
  tu::PilotResult pr;
  if (tu::run_pilot(
          pilot, backend.get(), data, reducer,
          [&](int64_t step, double acc, double bn) {
            say(fmt::format("pilot step {}: test accuracy {:.2f}%, B_noise {:.0f}", step, 100 * acc,
                            bn));
          },
          &pr) != quorum::kOk)
    return stop(1, quorum::last_error());
  const double pilot_seconds = elapsed() - profile_seconds - comm_seconds;
  if (!pr.reached)
    return stop(
        3, fmt::format("the target {:.2f}% is unreachable here: the pilot's best test "
                       "accuracy was {:.2f}% after {} steps ({:.2f} epochs, {:.1f} s "
                       "training, {:.1f} s in all); lower --target-accuracy or raise "
                       "--pilot-max-epochs",
                       o.target, 100 * pr.best_accuracy, pr.steps,
                       double(pr.steps) / double(pr.steps_per_epoch), pr.train_seconds, elapsed()));
  if (!(pr.b_noise > 0))
    return stop(1, fmt::format("the pilot could not measure the gradient noise scale: {} samples "
                               "gave no positive |G|^2 (a short pilot); lower --noise-every",
                               pr.noise_samples));
  say(report::pilot_summary(pr, o.target));

  // The profile gives the shape of step time against the batch from a few
  // seconds per batch; the pilot timed quorum-train's own step at its batch
  // over far longer. On a shared machine the two differ by the load of the
  // moment: set the profile's level by the pilot (reported, and in the JSON).
  const tu::StepProfile &at_pilot = world > 1 ? together : alone;
  const double profiled = at_pilot.seconds_at(o.pilot_batch);
  const double pilot_compute = pr.step_seconds - ab.seconds(grad_bytes, world);
  double calibration = 1;
  if (o.calibrate && profiled > 0 && pilot_compute > 0) calibration = pilot_compute / profiled;
  alone.scale(calibration), together.scale(calibration);
  say(
      fmt::format("step time at batch {} per rank: profiled {:.2f} ms, in the pilot {:.2f} ms: "
                  "profile scaled by {:.2f}{}",
                  o.pilot_batch, 1e3 * profiled, 1e3 * pilot_compute, calibration,
                  !o.calibrate        ? " (not: --no-calibrate)"
                  : pilot_compute > 0 ? ""
                                      : " (not: no pilot step without a noise measurement)"));

  // 4. Predict and choose. Steps count to the first evaluation at or above the
  // target: the pilot's count (measured or extrapolated) is anchored half an
  // evaluation interval earlier.
  tu::PredictorInputs in;
  in.compute = alone;
  in.compute_many = together;
  in.allreduce = ab;
  in.gradient_bytes = grad_bytes;
  in.steps = tu::StepsModel::anchored(pr.target_steps, b0, pr.b_noise);
  in.eval_every_examples = double(data.train.count) / o.evals_per_epoch;
  in.local_batches = grid;
  in.ranks = o.ranks;
  in.launched_ranks = world;
  in.price = o.price > 0 ? o.price / 3600 : 1;
  in.reduction = o.reduction;
  in.imbalance = imbalance;
  in.seed = o.seed;
  in.max_staleness = o.max_staleness;
  in.scaling = scaling;
  in.lr0 = o.lr, in.lr_b0 = o.lr_reference_batch;
  std::vector<tu::Prediction> rows;
  tu::Choice choice;
  if (tu::predict_all(in, &rows) != quorum::kOk ||
      tu::choose(&rows, o.deadline, o.budget, &choice) != quorum::kOk)
    return stop(2, quorum::last_error());
  const double tuning_seconds = elapsed();
  // What tuning costs against one quorum-train run with its defaults (epochs
  // and local batch) on the launched ranks: its predicted training time.
  const qt::TrainConfig defaults;
  const tu::StepProfile &launched_profile = world > 1 ? together : alone;
  const double default_run_seconds =
      double(defaults.epochs) *
      std::floor(double(data.train.count / size_t(world)) / defaults.batch) *
      (launched_profile.seconds_at(defaults.batch) + ab.seconds(grad_bytes, world));
  const std::string unit = o.price > 0 ? "price" : "rank-s";
  const auto &c = rows[choice.index];
  if (rank == 0) {
    report::print_table(rows, choice.index, unit);
    std::printf(
        "choice: global batch %d on %d rank(s) (local %d), lr %.4g (%s scaling), warmup %.2f "
        "epochs: predicted %.1f s and cost %.4g %s to %.2f%%; %s\n",
        c.global_batch, c.ranks, c.local_batch, c.lr, tu::lr_scaling_name(scaling), c.warmup_epochs,
        c.seconds, c.cost, unit.c_str(), o.target, choice.reason.c_str());
    std::printf("run it: quorum-train %s (on %d rank(s))\n", train_flags(c, o).c_str(), c.ranks);
    std::printf(
        "tuning took %.1f s: profile %.1f (one rank %.1f), allreduce %.1f, pilot %.1f (%lld "
        "steps %s, %.1f s of it training, %.1f s evaluating); setup and data load %.1f s "
        "before\n",
        tuning_seconds, profile_seconds, alone_seconds, comm_seconds, pilot_seconds,
        static_cast<long long>(pr.steps), pr.extrapolated ? "then extrapolated" : "to the target",
        pr.train_seconds, pr.eval_seconds, setup_seconds);
    std::printf(
        "tuning cost: %.0f%% of one default run (%d epochs at local batch %d on %d rank(s): "
        "%.1f s of training predicted)\n",
        100 * tuning_seconds / default_run_seconds, defaults.epochs, defaults.batch, world,
        default_run_seconds);
    std::fflush(stdout);
  }
  if (rank == 0 && (!o.json_path.empty() || !o.plot_path.empty())) {
    json doc{{"model", o.model},
             {"backend", o.backend},
             {"data", o.data},
             {"train_examples", data.train.count},
             {"target_accuracy", o.target},
             {"launched_ranks", world},
             {"lr_scaling", tu::lr_scaling_name(scaling)},
             {"reduce", tu::reduction_name(o.reduction)},
             {"imbalance", o.imbalance},
             {"cost_unit", unit},
             {"b_noise", pr.b_noise},
             {"b_noise_error", pr.b_noise_error},
             {"b_noise_smoothed", pr.b_noise_ema},
             {"b_noise_whole_pilot", pr.b_noise_whole},
             {"s_min", in.steps.s_min},
             {"pilot", report::pilot_json(pr, b0, pilot_seconds)},
             {"allreduce", {{"alpha", ab.alpha}, {"beta", ab.beta}, {"r2", ab.r2}}},
             {"tuning_seconds", tuning_seconds},
             {"phase_seconds",
              {{"setup", setup_seconds},
               {"profile_one_rank", alone_seconds},
               {"profile_all_ranks", profile_seconds - alone_seconds},
               {"allreduce", comm_seconds},
               {"pilot_training", pr.train_seconds},
               {"pilot_evaluating", pr.eval_seconds},
               {"pilot", pilot_seconds}}},
             {"default_run_seconds", default_run_seconds},
             {"profile_calibration", calibration},
             {"rows", json::array()}};
    for (const auto &r : rows) {
      doc["rows"].push_back(report::row_json(r));
      doc["rows"].back()["train_flags"] = train_flags(r, o);
    }
    doc["choice"] = report::row_json(c);
    doc["choice"]["reason"] = choice.reason;
    doc["choice"]["train_flags"] = train_flags(c, o);
    const std::string text = doc.dump(1) + "\n";
    std::string json_for_plot = o.json_path;
    if (json_for_plot.empty()) json_for_plot = o.plot_path + fmt::format(".{}.json", getpid());
    if (report::write_atomically(json_for_plot, text) != quorum::kOk)
      return stop(1, quorum::last_error());
    if (!o.plot_path.empty()) {
      const quorum::Status ps = report::draw_plot(o.plot_script, json_for_plot, o.plot_path);
      if (o.json_path.empty()) std::remove(json_for_plot.c_str());
      if (ps != quorum::kOk) return stop(1, quorum::last_error());
    }
  }
  double drained = 0;
  if (dist && dist->finish(&drained) != quorum::kOk) return stop(1, quorum::last_error());
  return finish(0);
}
