// quorum-train: trains a small CNN, on one process or data-parallel on many.
//
// Launched by quorum-run, mpirun or srun (or with --reduce), every rank trains
// a replica on its shard and reduces gradients with --reduce sync|solo|majority
// (quorum's allreduce or partial allreduce); --imbalance injects eager-SGD's
// load imbalance. Rank 0 prints a live progress line on a terminal (plain lines
// otherwise) and one report per epoch: train loss, test accuracy, images/s, the
// time split into data / forward / backward / reduce / update / injected
// imbalance, fresh contributions, and a parameter checksum that every epoch is
// compared across ranks. --log writes the same as JSON lines; the last line is
// a one-line summary (time to each epoch's accuracy) for scripts. Every line
// and record starts with its wall-clock time (UTC); epochs count from 1 in
// both; training times continue across --resume (the checkpoint carries them).
#include <unistd.h>

#include <CLI/CLI.hpp>
#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <nlohmann/json.hpp>

#include "quorum/quorum.h"
#include "runtime/status.hpp"
#include "tools/cli_common.hpp"
#include "tools/quorum_train_checks.hpp"
#include "tools/train_common_options.hpp"
#include "tools/train_console.hpp"
#include "tools/wall_time.hpp"
#include "trainer/backend.hpp"
#include "trainer/checkpoint.hpp"
#include "trainer/dataset.hpp"
#include "trainer/distributed/collective_reducer.hpp"
#include "trainer/distributed/setup_agreement.hpp"
#include "trainer/gradient_reducer.hpp"
#include "trainer/output_check.hpp"
#include "trainer/stop_signal.hpp"
#include "trainer/trainer.hpp"
#include "trainer/tuner/online_tuner.hpp"

namespace qt = quorum::trainer;
namespace tu = quorum::trainer::tuner;
namespace checks = quorum::train_checks;
using nlohmann::json;

using quorum::train_console::ConsoleObserver;
using quorum::train_console::recipe_of;
using quorum::train_console::stamp;

int main(int argc, char **argv) {
  CLI::App app{
      "quorum-train: train a small CNN, on one process or data-parallel under quorum-run, "
      "mpirun or srun (backends ref, cpu, cuda)"};
  qt::TrainConfig cfg;
  quorum::train_options::CommonOptions common;
  std::string log_path;
  std::string reduce_mode, imbalance;
  int64_t log_every = 100, progress_every = 100;
  quorum::train_options::add_data_options(app, &common);
  app.add_option("--epochs", cfg.epochs, "epochs")
      ->check(CLI::Range(1, 1 << 30))
      ->capture_default_str();
  std::string batch_text = "64";
  double target_accuracy = 0;
  app.add_option("--batch", batch_text,
                 "batch size per rank, or auto: the tuner profiles the step and the allreduce "
                 "first, measures the gradient noise scale while training, and picks the batch "
                 "and rate (square-root scaling) at every epoch end; needs --target-accuracy")
      ->check(checks::batch_size())
      ->capture_default_str();
  app.add_option("--target-accuracy", target_accuracy,
                 "stop at the first epoch end whose test accuracy reaches this, percent "
                 "(--batch auto: the target the tuner chooses for)")
      ->check(checks::finite())
      ->check(CLI::Range(0.1, 100.0));
  app.add_option("--warmup-epochs", cfg.warmup_epochs, "linear warmup to the scaled rate")
      ->check(checks::finite())
      ->check(CLI::NonNegativeNumber)
      ->capture_default_str();
  app.add_option(
         "--lr-decay", cfg.lr_decay,
         "after the warmup: none (constant rate) or cosine (down to 0 at the last epoch's end)")
      ->check(CLI::IsMember({"none", "cosine"}))
      ->capture_default_str();
  quorum::train_options::add_sgd_options(app, &common, "linear scaling: lr x global batch / this",
                                         "seed of the initial weights and the data order");
  app.add_option("--max-steps", cfg.max_steps, "stop at this global step (-1: all epochs)")
      ->check(checks::steps_or_all())
      ->capture_default_str();
  app.add_option("--evals-per-epoch", cfg.evals_per_epoch,
                 "test-set evaluations per epoch, evenly spaced, the last at its end (finer "
                 "time-to-accuracy; their time is not training time)")
      ->check(CLI::Range(1, 1000))
      ->capture_default_str();
  app.add_option("--ema-decay", cfg.ema_decay,
                 "score the test set with a moving average of the parameters, avg = d avg + "
                 "(1 - d) params after every step, d = min(this, (1 + step) / (10 + step)); "
                 "0: score the parameters themselves")
      ->check(checks::finite())
      ->check(CLI::Range(0.0, 0.999999))
      ->capture_default_str();
  app.add_option("--log", log_path,
                 "append JSON lines (start, steps, evaluations, epochs) to this file");
  app.add_option("--log-every", log_every, "steps between JSON step records (0: none)")
      ->check(CLI::NonNegativeNumber)
      ->capture_default_str();
  app.add_option("--progress-every", progress_every,
                 "steps between progress lines when stderr is not a terminal (0: none)")
      ->check(CLI::NonNegativeNumber)
      ->capture_default_str();
  app.add_option("--checkpoint", cfg.checkpoint_path,
                 "write the training state here (atomically) at each epoch end and at a stop");
  app.add_option("--checkpoint-every", cfg.checkpoint_every, "also every N steps (0: off)")
      ->check(CLI::NonNegativeNumber);
  app.add_option("--resume", cfg.resume_path, "continue from this checkpoint");
  unsigned max_staleness = 32;
  bool drop_late = false;
  double carry_weight = 0.5;
  bool no_catch_up = false;
  double activation_delay_ms = 0;
  double sync_epochs = 0;
  app.add_option("--reduce", reduce_mode,
                 "gradient reduction across ranks: sync (allreduce), solo or majority (partial "
                 "allreduce, eager-SGD), or quorum:K (partial allreduce whose rounds start once K "
                 "of the P ranks are ready; 1: solo, P: sync); default sync when launched on "
                 "several ranks")
      ->check(checks::reduce_mode());
  app.add_option("--imbalance", imbalance,
                 "inject load imbalance: none, paper:D[:K|:1-2] (K ranks drawn per step sleep D "
                 "ms), slow:R:D (rank R sleeps D ms every step), exp:M (exponential, mean M ms)");
  app.add_option("--max-staleness", max_staleness,
                 "solo/majority: a synchronous round every N+1 rounds (0: always synchronous)")
      ->capture_default_str();
  app.add_option("--sync-epochs", sync_epochs,
                 "solo/majority: reduce synchronously for the first E epochs (stale gradients "
                 "hurt most early; e.g. the warmup)")
      ->check(checks::finite())
      ->check(CLI::NonNegativeNumber)
      ->capture_default_str();
  app.add_flag("--drop-late", drop_late,
               "solo/majority: drop gradients that miss their round (the reference's "
               "behaviour) instead of carrying them into a later round");
  app.add_option("--carry-weight", carry_weight,
                 "solo/majority: a gradient that missed its round rides in a later one "
                 "multiplied by W, in (0, 1] (1: whole, as eager-SGD carries it; a stale "
                 "gradient is worth less than a fresh one; ignored with --drop-late unless "
                 "given)")
      ->check(checks::finite())
      ->check(CLI::Range(0.0, 1.0))
      ->capture_default_str();
  app.add_option("--activation-delay-ms", activation_delay_ms,
                 "solo/majority: the post that activates a round (solo: the first; majority: "
                 "the drawn initiator's) waits this long before it does, so gradients ready "
                 "meanwhile are fresh in the round (0: at once, as in eager-SGD)")
      ->check(checks::finite())
      ->check(CLI::Range(0.0, 10000.0))
      ->capture_default_str();
  std::string partial_scale = "world";
  app.add_option("--partial-scale", partial_scale,
                 "solo/majority: a round's sum of n gradients (fresh and carried) is divided by "
                 "P (world: each weighs as in a synchronous step), sqrt(P x n) (sqrt: the "
                 "square-root rate rule for the round's smaller batch) or n (count: their mean)")
      ->check(CLI::IsMember({"world", "sqrt", "count"}))
      ->capture_default_str();
  int64_t bucket_kb = 0;
  app.add_option("--bucket-kb", bucket_kb,
                 "sync (and the synchronous steps of solo/majority): allreduce the gradient in "
                 "buckets of about N KiB, each started once the backward pass made it final, so "
                 "communication overlaps the rest of the backward pass (host gradients; 0: one "
                 "allreduce after it)")
      ->check(CLI::Range(int64_t{0}, int64_t{1} << 30))
      ->capture_default_str();
  app.add_flag("--no-catch-up", no_catch_up,
               "solo/majority: a rank that fell behind still computes a gradient for every "
               "step (it can only be late) instead of applying the steps the others already "
               "ran and computing on the newest parameters");
  quorum_tools::add_version_flag(app, "quorum-train");
  QUORUM_TOOL_PARSE(app, argc, argv);
  cfg.model = common.model, cfg.seed = common.seed, cfg.lr = common.lr;
  cfg.lr_reference_batch = common.lr_reference_batch;
  cfg.momentum = common.momentum, cfg.weight_decay = common.weight_decay;
  const std::string &backend_name = common.backend, &data_name = common.data;
  const std::string &data_dir = common.data_dir;
  const int64_t train_limit = common.train_limit, test_limit = common.test_limit;
  const int threads = common.threads;
  const bool no_verify = common.no_verify;
  const bool batch_auto = batch_text == "auto";
  cfg.batch = batch_auto ? 64 : std::stoi(batch_text);  // auto: where the tuner starts
  // The default weight means nothing with --drop-late (the reducer refuses a given one).
  if (drop_late && app.count("--carry-weight") == 0) carry_weight = 1;

  // Several ranks (a launcher's environment) or an explicit --reduce: distributed.
  const bool launched = std::getenv("QUORUM_RANK") != nullptr ||
                        std::getenv("PMIX_RANK") != nullptr ||
                        std::getenv("OMPI_COMM_WORLD_RANK") != nullptr;
  const bool distributed = launched || !reduce_mode.empty() || !imbalance.empty();
  const std::string mode = !reduce_mode.empty() ? reduce_mode : distributed ? "sync" : "local";
  if (const std::string e = checks::batch_auto_misuse(app, batch_auto, mode); !e.empty()) {
    std::fprintf(stderr, "quorum-train: %s\n", e.c_str());
    return 2;
  }
  if (const std::string e = checks::partial_only_misuse(app, mode); !e.empty()) {
    std::fprintf(stderr, "quorum-train: %s\n", e.c_str());
    return 2;
  }
  quorum_comm_t comm = nullptr;
  if (distributed && quorum_init(&comm) != QUORUM_OK) {
    std::fprintf(stderr, "quorum-train: %s\n", quorum_last_error());
    return 1;
  }
  if (const std::string e = checks::lone_rank_of_many(comm ? quorum_comm_size(comm) : 1);
      !e.empty()) {
    std::fprintf(stderr, "quorum-train: %s\n", e.c_str());
    if (comm) quorum_finalize(comm);
    return 2;
  }
  if (backend_name == "ref" && data_name != "synthetic" && train_limit == 0)
    std::fprintf(stderr,
                 "quorum-train: note: the ref backend is slow (naive loops); "
                 "consider --train-limit\n");

  // This rank's setup: 0, or the exit status with the reason as the last error.
  std::unique_ptr<qt::CollectiveReducer> dist;
  std::unique_ptr<qt::Backend> backend;
  qt::DataSplit data;
  std::ofstream log;
  auto set_up = [&]() -> int {
    if (comm) {
      qt::ReducerOptions ro;
      ro.mode = mode;
      ro.max_staleness = max_staleness;
      ro.carry = !drop_late;
      ro.carry_weight = carry_weight;
      ro.sync_epochs = sync_epochs;
      ro.catch_up = !no_catch_up;
      ro.activation_delay_us = static_cast<unsigned>(std::llround(activation_delay_ms * 1000));
      ro.scale = partial_scale == "sqrt"    ? qt::PartialScale::Sqrt
                 : partial_scale == "count" ? qt::PartialScale::Count
                                            : qt::PartialScale::World;
      ro.bucket_bytes = static_cast<size_t>(bucket_kb) * 1024;
      ro.seed = cfg.seed;
      if (qt::ImbalanceModel::parse(imbalance, cfg.seed, &ro.imbalance) != quorum::kOk ||
          qt::CollectiveReducer::create(comm, ro, nullptr, &dist) != quorum::kOk)
        return 2;
    }
    qt::BackendOptions bopts;
    bopts.threads = threads;
    if (qt::make_backend(backend_name, bopts, &backend) != quorum::kOk) return 1;
    if (qt::load_dataset(data_name, data_dir, !no_verify, &data) != quorum::kOk) return 1;
    if (train_limit > 0) data.train.truncate(size_t(train_limit));
    if (test_limit > 0) data.test.truncate(size_t(test_limit));
    if (!log_path.empty()) {
      log.open(log_path, std::ios::app);
      if (!log) {
        quorum::fail(QUORUM_ERR_INVALID_ARG, "train", "--log {}: cannot open: {}", log_path,
                     std::strerror(errno));
        return 1;
      }
    }
    // Only rank 0 writes checkpoints; every rank reads the one it resumes.
    const bool writes = comm == nullptr || quorum_comm_rank(comm) == 0;
    if (writes && !cfg.checkpoint_path.empty() &&
        qt::check_checkpoint_path(cfg.checkpoint_path) != quorum::kOk)
      return 1;
    qt::TrainingState resumed;
    if (!cfg.resume_path.empty() && qt::load_checkpoint(cfg.resume_path, &resumed) != quorum::kOk)
      return 1;
    return 0;
  };
  int code = set_up();
  std::string error = code != 0 ? quorum::last_error() : "";
  if (comm && quorum_comm_size(comm) > 1) {
    // Every rank learns at once whether one failed (rather than waiting for
    // it in the first collective until the timeout).
    int agreed = code;
    const quorum::Status s = qt::agree_on_setup(comm, error, code, &agreed);
    if (s == QUORUM_ERR_INVALID_ARG) {
      error = quorum::last_error(), code = agreed;
    } else if (s != quorum::kOk && code == 0) {
      error = quorum::last_error(), code = 1;
    }
  }
  if (code != 0) {
    std::fprintf(stderr, "quorum-train: %s\n", error.c_str());
    if (dist) dist->abandon();
    if (comm) quorum_finalize(comm);
    return code;
  }

  if (!cfg.checkpoint_path.empty()) qt::stop_on_signals();  // save, then stop
  ConsoleObserver observer(isatty(STDERR_FILENO) != 0, progress_every, log ? &log : nullptr,
                           log_every);
  qt::LocalGradientReducer local;
  qt::GradientReducer *reducer = &local;
  // The example counts too: ranks with other copies of the data would take
  // other steps per epoch.
  json run_info{{"ranks", 1},
                {"reduce", "local"},
                {"backend", backend_name},
                {"data", data_name},
                {"train_limit", train_limit},
                {"test_limit", test_limit},
                {"train_examples", data.train.count},
                {"test_examples", data.test.count}};
  if (target_accuracy > 0) run_info["target_accuracy"] = target_accuracy;
  if (batch_auto)
    run_info.update(
        {{"batch_policy", "auto"}, {"lr_recipe", tu::lr_scaling_name(tu::LrScaling::Sqrt)}});
  if (dist) {
    dist->set_backend(backend.get());
    reducer = dist.get();
    observer.set_distributed(dist->rank(), dist.get());
    run_info.update({{"ranks", dist->size()},
                     {"reduce", dist->name()},
                     {"imbalance", imbalance.empty() ? "none" : imbalance},
                     {"drop_late", drop_late},
                     {"carry_weight", carry_weight},
                     {"sync_epochs", sync_epochs},
                     {"activation_delay_ms", activation_delay_ms},
                     {"partial_scale", partial_scale},
                     {"catch_up", !no_catch_up},
                     {"max_staleness", max_staleness},
                     {"bucket_kb", bucket_kb}});
  }
  if (dist) {
    // Ranks given different options would issue different collectives (or
    // train different models): stop them all with the first difference.
    json shared = recipe_of(cfg);
    shared.update(run_info);
    std::vector<std::pair<std::string, std::string>> settings;
    for (const auto &[key, value] : shared.items()) settings.emplace_back(key, value.dump());
    if (dist->check_same_settings(settings) != quorum::kOk) {
      std::fprintf(stderr, "quorum-train: %s\n", quorum::last_error());
      dist->abandon();
      quorum_finalize(comm);
      return 2;
    }
  }
  observer.set_run_info(std::move(run_info));
  // --batch auto: the tuner profiles now (a fresh run; a resumed one restores
  // its state from the checkpoint) and chooses each epoch's batch.
  tu::OnlineTunerOptions to;
  to.model = cfg.model, to.target_accuracy = target_accuracy / 100;
  to.lr0 = cfg.lr, to.lr_b0 = cfg.lr_reference_batch, to.start_batch = cfg.batch;
  tu::OnlineTuner tuner(to, dist ? dist->size() : 1,
                        [&](const tu::TunerDecision &d) { observer.on_tuner_decision(d); });
  if (batch_auto) {
    const quorum::Status ps =
        cfg.resume_path.empty() ? tuner.profile(backend.get(), data.train, comm) : quorum::kOk;
    if (ps != quorum::kOk) {
      std::fprintf(stderr, "quorum-train: %s\n", quorum::last_error());
      if (dist) dist->abandon();
      if (comm) quorum_finalize(comm);
      return ps == QUORUM_ERR_INVALID_ARG ? 2 : 1;
    }
    cfg.batch = tuner.plan().batch;
    cfg.batch_policy = &tuner;
  } else if (target_accuracy > 0) {
    cfg.stop_accuracy = target_accuracy / 100;
  }
  qt::TrainResult result;
  // On failure the peers may be gone or stuck elsewhere: free the partial
  // object locally (no collective destroy) and leave.
  if (qt::train(cfg, backend.get(), data, reducer, &observer, &result) != quorum::kOk) {
    std::fprintf(stderr, "quorum-train: %s\n", quorum::last_error());
    if (dist) dist->abandon();
    if (comm) quorum_finalize(comm);
    return 1;
  }
  if (result.stopped_by_signal != 0) {
    std::fprintf(stderr, "quorum-train: %s\n", qt::stopped_message(cfg, result).c_str());
    if (dist) dist->abandon();
    if (comm) quorum_finalize(comm);
    return 128 + result.stopped_by_signal;
  }
  double drained = 0;
  if (dist && dist->finish(&drained) != quorum::kOk) {
    std::fprintf(stderr, "quorum-train: %s\n", quorum::last_error());
    dist->abandon();
    quorum_finalize(comm);
    return 1;
  }
  const int rank = dist ? dist->rank() : 0;
  // A resumed run with no step left trains nothing: no summary of a training.
  const bool trained = result.global_step > result.start_step;
  if (rank == 0 && !trained) {
    const std::string where =
        cfg.max_steps >= 0 && result.start_step >= cfg.max_steps
            ? fmt::format("and --max-steps {} stops at step {}", cfg.max_steps, cfg.max_steps)
            : fmt::format("at or past the end of its --epochs {} (give more to train on)",
                          cfg.epochs);
    std::printf("%snothing to train: the run in %s is at step %lld, %s\n", stamp().c_str(),
                cfg.resume_path.c_str(), static_cast<long long>(result.start_step), where.c_str());
  }
  if (rank == 0) {
    std::printf("%sdone: %lld steps, params crc32 %08x\n", stamp().c_str(),
                static_cast<long long>(result.global_step), qt::params_crc32(result.params));
    std::fflush(stdout);
  }
  if (rank == 0 && trained) {
    // One line for scripts: at every evaluation, the training time, the test
    // accuracy and the epochs trained (SECONDSs:ACCURACY%:EPOCHSe).
    std::string curve;
    for (const auto &p : observer.curve()) {
      curve += fmt::format("{}{:.2f}s:{:.2f}%:{:.4g}e", curve.empty() ? "" : ",", p.seconds,
                           100 * p.accuracy, p.epochs);
    }
    // Bucketed runs: how many allreduces the last synchronous step took.
    const std::string buckets =
        dist && bucket_kb > 0 ? fmt::format(" bucket_allreduces={}", dist->last_step_allreduces())
                              : "";
    std::printf(
        "%ssummary reduce=%s ranks=%d imbalance=%s train_seconds=%.2f test_accuracy=%.2f "
        "replicas=%s drained_l1=%.3g%s curve=%s\n",
        stamp().c_str(), dist ? dist->name() : "local", dist ? dist->size() : 1,
        imbalance.empty() ? "none" : imbalance.c_str(),
        observer.curve().empty() ? 0.0 : observer.curve().back().seconds,
        100 * result.last.test_accuracy, observer.replicas_agree() ? "agree" : "DIFFER", drained,
        buckets.c_str(), curve.c_str());
    std::fflush(stdout);
  }
  if (comm && quorum_finalize(comm) != QUORUM_OK) {
    std::fprintf(stderr, "quorum-train: finalize: %s\n", quorum_last_error());
    return 1;
  }
  if ((!log_path.empty() && qt::check_stream_written(log, "--log " + log_path) != quorum::kOk) ||
      qt::check_file_written(stdout, "stdout") != quorum::kOk) {
    std::fprintf(stderr, "quorum-train: %s\n", quorum::last_error());
    return 1;
  }
  return observer.replicas_agree() ? 0 : 3;
}
