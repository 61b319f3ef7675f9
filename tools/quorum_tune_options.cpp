// quorum_tune_options.cpp: see quorum_tune_options.hpp.
#include "tools/quorum_tune_options.hpp"

#include <map>

#include "tools/quorum_train_checks.hpp"

namespace quorum::tune_options {

namespace checks = quorum::train_checks;

void add_options(CLI::App &app, Options *op) {
  Options &o = *op;
  quorum::train_options::add_data_options(app, &o);
  quorum::train_options::add_sgd_options(app, &o, "the batch --lr is given for",
                                         "seed of the pilot's initial weights and data order");
  app.add_option("--lr-scaling", o.scaling,
                 "rate for a larger batch: sqrt (lr x sqrt(B / reference), the tuner's recipe) "
                 "or linear (lr x B / reference, the standard one, with warmup)")
      ->check(CLI::IsMember({"sqrt", "linear"}))
      ->capture_default_str();
  app.add_option("--reduce", o.reduce,
                 "reduction to predict on K >= 2: sync, solo or majority (quorum-train's "
                 "--reduce; the pilot itself reduces synchronously)")
      ->check(CLI::IsMember({"sync", "solo", "majority"}))
      ->capture_default_str();
  app.add_option("--imbalance", o.imbalance,
                 "the load imbalance to predict under, as quorum-train's --imbalance: none, "
                 "paper:D[:K|:1-2], slow:R:D or exp:M (ms)")
      ->capture_default_str();
  app.add_option("--max-staleness", o.max_staleness,
                 "solo/majority: a synchronous round every N+1 rounds, as quorum-train's")
      ->capture_default_str();
  app.add_option("--target-accuracy", o.target, "test accuracy to reach, percent (required)")
      ->check(checks::finite())
      ->check(CLI::Range(0.1, 100.0));
  app.add_option("--batch-min", o.batch_min, "smallest local batch of the grid")
      ->check(CLI::Range(2, 1 << 16))
      ->capture_default_str();
  app.add_option("--batch-max", o.batch_max, "largest local batch of the grid")
      ->check(CLI::Range(2, 1 << 16))
      ->capture_default_str();
  app.add_option("--grid-factor", o.grid_factor, "ratio of neighbouring grid batches")
      ->check(checks::finite())
      ->check(CLI::Range(1.1, 16.0))
      ->capture_default_str();
  app.add_option("--ranks", o.ranks, "rank counts K to predict (default: 1 to the launched ranks)")
      ->delimiter(',')
      ->check(CLI::Range(1, 1 << 20));
  app.add_flag("--extrapolate", o.extrapolate,
               "allow --ranks above the launched ranks (their rows are marked extrapolated)");
  app.add_option("--pilot-batch", o.pilot_batch, "local batch of the pilot run")
      ->check(CLI::Range(2, 1 << 16))
      ->capture_default_str();
  app.add_option("--pilot-max-epochs", o.pilot_max_epochs,
                 "the pilot gives up (target unreachable) after this many epochs")
      ->check(checks::finite())
      ->check(CLI::Range(0.01, 1000.0))
      ->capture_default_str();
  app.add_option("--pilot-extrapolate", o.pilot_extrapolate,
                 "on: the pilot stops short of the target once a fit of its accuracy curve "
                 "gives the step it crosses the target to within 5%, and takes that step; "
                 "off: it trains until an evaluation reaches the target")
      ->transform(
          CLI::CheckedTransformer(std::map<std::string, bool>{{"on", true}, {"off", false}}))
      ->default_str("on");
  app.add_option("--pilot-screen", o.pilot_screen,
                 "a pilot evaluation scores this fraction of the test set first, then three "
                 "times it, then the whole, and stops once the part scored lies 3 standard "
                 "errors from the target (parts under 200 examples are skipped; 1: every "
                 "evaluation scores the whole set)")
      ->check(checks::finite())
      ->check(CLI::Range(0.01, 1.0))
      ->capture_default_str();
  app.add_option("--evals-per-epoch", o.evals_per_epoch,
                 "pilot test evaluations per epoch (as quorum-train's; predictions count steps "
                 "to the first evaluation at or above the target)")
      ->check(CLI::Range(1, 1000))
      ->capture_default_str();
  app.add_option("--noise-every", o.noise_every,
                 "measure the gradient noise scale every N pilot steps (one process: costs "
                 "half a step each)")
      ->check(CLI::Range(1, 1 << 20))
      ->capture_default_str();
  app.add_option("--profile-steps", o.profile_steps, "timed steps per profiled batch size")
      ->check(CLI::Range(1, 100000))
      ->capture_default_str();
  app.add_option("--profile-seconds", o.profile_seconds,
                 "fewer timed steps (at least 3) per batch size once they took this long")
      ->check(checks::finite())
      ->check(CLI::PositiveNumber)
      ->capture_default_str();
  app.add_option("--profile-precision", o.profile_precision,
                 "fewer timed steps (at least 3) per batch size once the standard error of "
                 "their mean is at most this fraction of it (0: off)")
      ->check(checks::finite())
      ->check(CLI::Range(0.0, 1.0))
      ->capture_default_str();
  app.add_option("--profile-tight", o.profile_tight,
                 "leave the larger batches unmeasured (extrapolated, marked x) once three "
                 "neighbouring ones lie on a line in log-log to within this fraction (0: measure "
                 "every batch)")
      ->check(checks::finite())
      ->check(CLI::Range(0.0, 1.0))
      ->capture_default_str();
  app.add_flag("--no-calibrate{false}", o.calibrate,
               "keep the profile's step times as measured (default: scaled to the pilot's "
               "longer measurement at its batch)");
  app.add_option("--profile-warmup", o.profile_warmup, "untimed steps before them")
      ->check(CLI::Range(0, 100000))
      ->capture_default_str();
  app.add_option("--price", o.price, "price per rank-hour (default: cost in rank-seconds)")
      ->check(checks::finite())
      ->check(CLI::PositiveNumber);
  app.add_option("--deadline", o.deadline, "pick the cheapest configuration within S seconds")
      ->check(checks::finite())
      ->check(CLI::PositiveNumber);
  app.add_option("--budget", o.budget, "pick the fastest configuration within this cost")
      ->check(checks::finite())
      ->check(CLI::PositiveNumber);
  app.add_option("--memory-mb", o.memory_mb,
                 "memory per rank for the model (default: half the available memory shared "
                 "by the ranks)")
      ->check(checks::finite())
      ->check(CLI::PositiveNumber);
  app.add_option("--json", o.json_path, "write the predictions and the choice here (atomically)");
  app.add_option("--plot", o.plot_path,
                 "draw cost against time (front, knee, choice) to this PNG (python3-matplotlib)");
  app.add_option("--plot-script", o.plot_script, "the script --plot runs (perf/plot_tune.py)")
      ->capture_default_str();
}

}  // namespace quorum::tune_options
