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

namespace {

std::string format_duration(double s) {
  if (s < 0 || !std::isfinite(s)) return "?";
  long t = long(s + 0.5);
  if (t >= 3600) return fmt::format("{}h{:02}m", t / 3600, (t / 60) % 60);
  if (t >= 60) return fmt::format("{}m{:02}s", t / 60, t % 60);
  return fmt::format("{}s", t);
}

// A text report line starts with its wall-clock time, to the second.
std::string stamp() {
  return quorum_tools::utc_now(quorum_tools::TimePrecision::Seconds) + " ";
}

std::string host_name() {
  char host[256] = {0};
  if (gethostname(host, sizeof(host) - 1) != 0) return "?";
  return host;
}

// The training recipe: what every rank must share, and what the JSON start
// record gives of the configuration.
json recipe_of(const qt::TrainConfig &c) {
  return json{{"model", c.model},
              {"batch", c.batch},
              {"epochs", c.epochs},
              {"lr", c.lr},
              {"lr_reference_batch", c.lr_reference_batch},
              {"warmup_epochs", c.warmup_epochs},
              {"lr_decay", c.lr_decay},
              {"momentum", c.momentum},
              {"weight_decay", c.weight_decay},
              {"seed", c.seed},
              {"max_steps", c.max_steps},
              {"evals_per_epoch", c.evals_per_epoch},
              {"ema_decay", c.ema_decay}};
}

// Progress on stderr (a rewritten line on a TTY), reports on stdout, JSON lines to --log.
class ConsoleObserver : public qt::TrainObserver {
 public:
  ConsoleObserver(bool tty, int64_t plain_every, std::ofstream *log, int64_t log_every)
      : tty_(tty), plain_every_(plain_every), log_(log), log_every_(log_every) {}

  // Distributed runs: only rank 0 prints; every epoch's checksum is compared.
  void set_distributed(int rank, qt::CollectiveReducer *reducer) {
    rank_ = rank;
    reducer_ = reducer;
    if (rank_ != 0) log_ = nullptr;
  }
  // What the run does besides the training recipe (ranks, reduction,
  // imbalance), for the JSON start record.
  void set_run_info(json info) {
    run_info_ = std::move(info);
    ranks_ = run_info_.value("ranks", 1);
  }
  bool replicas_agree() const { return replicas_agree_; }
  // --batch auto: every decision of the tuner, as a line and a JSON record
  // (those taken before the start record, or at an epoch's end before its
  // report, follow it).
  void on_tuner_decision(const tu::TunerDecision &d) {
    if (rank_ != 0) return;
    const bool at_epoch_end = d.kind == tu::DecisionKind::Keep ||
                              d.kind == tu::DecisionKind::Switch ||
                              d.kind == tu::DecisionKind::TargetReached;
    if (!started_ || at_epoch_end) {
      pending_.push_back(d);
      return;
    }
    write_decision(d);
  }

  void write_decision(const tu::TunerDecision &d) {
    end_progress_line();
    const std::string when =
        d.kind == tu::DecisionKind::Start ? "start"
        : d.kind == tu::DecisionKind::Resumed
            ? "resumed"
            : fmt::format("{} after epoch {}", decision_kind_name(d.kind), d.epoch);
    const std::string what =
        d.kind == tu::DecisionKind::Profiled
            ? fmt::format("profiled in {:.2f} s", d.seconds)
            : fmt::format("{}: batch {} (global {}), lr {:.4g}{}", when, d.batch, d.batch * d.ranks,
                          d.lr,
                          d.warmup_steps > 0 ? fmt::format(" (warmup from {:.4g} over {} steps)",
                                                           d.warmup_from_lr, d.warmup_steps)
                                             : "");
    std::printf("%sbatch auto: %s; %s\n", stamp().c_str(), what.c_str(), d.reason.c_str());
    std::fflush(stdout);
    if (!log_) return;
    json r{{"event", "batch_decision"},
           {"decision", decision_kind_name(d.kind)},
           {"epoch", d.epoch},
           {"step", d.global_step},
           {"batch", d.batch},
           {"previous_batch", d.previous_batch},
           {"global_batch", d.batch * d.ranks},
           {"ranks", d.ranks},
           {"lr", d.lr},
           {"lr_recipe", tu::lr_scaling_name(tu::LrScaling::Sqrt)},
           {"warmup_from_lr", d.warmup_from_lr},
           {"warmup_steps", d.warmup_steps},
           {"b_noise", d.b_noise},
           {"b_noise_error", d.b_noise_error},
           {"noise_samples", d.noise_samples},
           {"predicted_gain", d.predicted_gain},
           {"test_accuracy", d.test_accuracy},
           {"ranks_agree", d.ranks_agree},
           {"reason", d.reason}};
    if (d.kind == tu::DecisionKind::Profiled || d.kind == tu::DecisionKind::Resumed)
      r["profile_seconds"] = d.seconds;
    write_record(std::move(r));
    log_->flush();
  }
  // One point per test evaluation: when (cumulative training seconds, and
  // epochs trained, fractional inside an epoch) and the test accuracy.
  struct CurvePoint {
    double seconds, accuracy, epochs;
  };
  const std::vector<CurvePoint> &curve() const { return curve_; }

  void on_start(const qt::TrainConfig &c, const qt::RunStart &s) override {
    epochs_ = c.epochs;
    steps_per_epoch_ = std::max<int64_t>(1, s.steps_per_epoch);
    if (rank_ != 0) return;
    const std::string resumed = s.start_step > 0
                                    ? fmt::format(", resumed at step {} after {:.2f} s of training",
                                                  s.start_step, s.start_train_seconds)
                                    : "";
    std::printf(
        "%squorum-train (quorum %s) on %s, %d rank%s, backend %s, model %s: %zu "
        "parameters, batch %s, %lld steps per epoch%s\n",
        stamp().c_str(), quorum_version(), host_name().c_str(), ranks_, ranks_ == 1 ? "" : "s",
        run_info_.value("backend", "?").c_str(), c.model.c_str(), s.param_count,
        (run_info_.contains("batch_policy") ? fmt::format("auto (now {})", s.batch)
                                            : std::to_string(c.batch))
            .c_str(),
        static_cast<long long>(s.steps_per_epoch), resumed.c_str());
    std::fflush(stdout);
    if (log_) {
      json start{{"event", "start"},
                 {"quorum_version", quorum_version()},
                 {"host", host_name()},
                 {"parameters", s.param_count},
                 {"steps_per_epoch", s.steps_per_epoch},
                 {"start_step", s.start_step},
                 {"start_train_seconds", s.start_train_seconds}};
      if (!c.resume_path.empty()) start["resume"] = c.resume_path;
      start.update(recipe_of(c));
      start.update(run_info_);
      write_record(std::move(start));
    }
    started_ = true;
    flush_decisions();
  }

  void flush_decisions() {
    std::vector<tu::TunerDecision> pending;
    pending.swap(pending_);
    for (const auto &d : pending) write_decision(d);
  }

  void on_step(const qt::StepProgress &p) override {
    steps_per_epoch_ = std::max<int64_t>(1, p.steps_per_epoch);  // --batch auto changes it
    if (rank_ != 0) return;
    log_step(p);
    const bool last = p.step_in_epoch == p.steps_per_epoch;
    if (tty_) {
      // At most ~10 redraws a second: a terminal is slower than a small model's steps.
      const auto now = std::chrono::steady_clock::now();
      if (now - last_draw_ < std::chrono::milliseconds(100) && !last) return;
      last_draw_ = now;
      std::fprintf(stderr, "\r%s\033[K", progress_line(p).c_str());
      std::fflush(stderr);
      line_open_ = true;
    } else if (plain_every_ > 0 && p.global_step % plain_every_ == 0) {
      std::fprintf(stderr, "%s\n", progress_line(p).c_str());
    }
  }

  // Clears the rewritten progress line (a TTY) before a report line.
  void end_progress_line() {
    if (!line_open_) return;
    std::fprintf(stderr, "\r\033[K");
    line_open_ = false;
  }

  std::string progress_line(const qt::StepProgress &p) const {
    return fmt::format("{}epoch {}/{} step {}/{} loss {:.4f} {:.0f} img/s ETA {}", stamp(),
                       p.epoch + 1, epochs_, p.step_in_epoch, p.steps_per_epoch, p.loss,
                       p.images_per_s, format_duration(p.eta_s));
  }

  // One JSON record, stamped with the wall-clock time.
  void write_record(json record) {
    record["time"] = quorum_tools::utc_now();
    *log_ << record.dump() << "\n";
  }

  void log_step(const qt::StepProgress &p) {
    if (log_ && log_every_ > 0 && p.global_step % log_every_ == 0)
      write_record({{"event", "step"},
                    {"epoch", p.epoch + 1},
                    {"step", p.global_step},
                    {"loss", p.loss},
                    {"lr", p.lr},
                    {"images_per_s", p.images_per_s},
                    {"train_seconds", p.train_seconds}});
  }

  void on_eval(const qt::EvalReport &e) override {
    curve_.push_back({e.train_seconds, e.test_accuracy,
                      double(e.epoch) + double(e.step_in_epoch) / double(steps_per_epoch_)});
    if (rank_ != 0) return;
    end_progress_line();
    std::printf(
        "%sepoch %lld step %lld: test loss %.4f acc %.2f%% | %.2f s training | eval %.2f s\n",
        stamp().c_str(), static_cast<long long>(e.epoch + 1),
        static_cast<long long>(e.step_in_epoch), e.test_loss, 100 * e.test_accuracy,
        e.train_seconds, e.eval_seconds);
    std::fflush(stdout);
    if (log_) {
      write_record({{"event", "eval"},
                    {"epoch", e.epoch + 1},
                    {"step", e.global_step},
                    {"step_in_epoch", e.step_in_epoch},
                    {"test_loss", e.test_loss},
                    {"test_accuracy", e.test_accuracy},
                    {"train_seconds", e.train_seconds},
                    {"eval_seconds", e.eval_seconds}});
      log_->flush();
    }
  }

  quorum::Status on_epoch(const qt::EpochReport &r) override {
    bool agree = true;
    if (reducer_ != nullptr) {
      // A check that cannot communicate fails the run (it says nothing of the replicas).
      QUORUM_CHECK(reducer_->check_replicas(r.param_crc32, &agree));
      replicas_agree_ = replicas_agree_ && agree;
    }
    curve_.push_back(
        {r.train_seconds, r.test_accuracy,
         double(r.epoch) + (r.complete ? 1.0 : double(r.steps) / double(steps_per_epoch_))});
    if (rank_ != 0) return quorum::kOk;
    end_progress_line();
    std::printf(
        "%sepoch %lld%s: train loss %.4f acc %.2f%% | test loss %.4f acc %.2f%% | %.0f img/s | "
        "%.0f img/cpu-s | %.2f s: data %.2f forward %.2f backward %.2f reduce %.2f update %.2f | "
        "eval %.2f s | imbalance %.2f s | fresh %.2f carried %lld (%.2f steps late) "
        "skipped %lld | params crc32 %08x sum %.6f%s\n",
        stamp().c_str(), static_cast<long long>(r.epoch + 1), r.complete ? "" : " (partial)",
        r.train_loss, 100 * r.train_accuracy, r.test_loss, 100 * r.test_accuracy, r.images_per_s,
        r.images_per_cpu_s, r.seconds, r.times.data, r.times.forward, r.times.backward,
        r.times.reduce, r.times.update, r.eval_seconds, r.times.imbalance, r.mean_contributors,
        static_cast<long long>(r.carried), r.mean_staleness, static_cast<long long>(r.skipped),
        r.param_crc32, r.param_sum,
        reducer_ == nullptr ? ""
        : agree             ? " (same on every rank)"
                            : " (REPLICAS DIFFER)");
    std::fflush(stdout);
    if (log_) {
      write_record({{"event", "epoch"},
                    {"epoch", r.epoch + 1},
                    {"complete", r.complete},
                    {"batch", r.batch},
                    {"steps", r.steps},
                    {"train_loss", r.train_loss},
                    {"train_accuracy", r.train_accuracy},
                    {"test_loss", r.test_loss},
                    {"test_accuracy", r.test_accuracy},
                    {"images_per_s", r.images_per_s},
                    {"seconds", r.seconds},
                    {"train_seconds", r.train_seconds},
                    {"cpu_seconds", r.cpu_seconds},
                    {"images_per_cpu_s", r.images_per_cpu_s},
                    {"time_data", r.times.data},
                    {"time_forward", r.times.forward},
                    {"time_backward", r.times.backward},
                    {"time_reduce", r.times.reduce},
                    {"time_update", r.times.update},
                    {"time_imbalance", r.times.imbalance},
                    {"mean_contributors", r.mean_contributors},
                    {"carried", r.carried},
                    {"mean_staleness", r.mean_staleness},
                    {"skipped", r.skipped},
                    {"replicas_agree", agree},
                    {"eval_seconds", r.eval_seconds},
                    {"lr", r.lr},
                    {"param_crc32", fmt::format("{:08x}", r.param_crc32)},
                    {"param_sum", r.param_sum}});
      log_->flush();
    }
    flush_decisions();
    return quorum::kOk;
  }

 private:
  bool tty_;
  int64_t plain_every_;
  std::ofstream *log_;
  int64_t log_every_;
  int epochs_ = 0;
  int64_t steps_per_epoch_ = 1;
  int rank_ = 0;
  int ranks_ = 1;
  json run_info_ = json::object();
  qt::CollectiveReducer *reducer_ = nullptr;
  bool replicas_agree_ = true;
  std::vector<CurvePoint> curve_;
  bool line_open_ = false;
  std::chrono::steady_clock::time_point last_draw_{};
  bool started_ = false;
  std::vector<tu::TunerDecision> pending_;
};

}  // namespace

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
                 "--batch auto: stop at the first epoch end whose test accuracy reaches this, "
                 "percent")
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
  if (batch_auto)
    run_info.update({{"batch_policy", "auto"},
                     {"target_accuracy", target_accuracy},
                     {"lr_recipe", tu::lr_scaling_name(tu::LrScaling::Sqrt)}});
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
