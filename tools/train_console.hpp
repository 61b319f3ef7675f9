// train_console.hpp: quorum-train's observer of a training run: the live
// progress line on stderr (rewritten on a terminal), one report per epoch on
// stdout, the decisions of --batch auto, and the JSON-lines log (--log); every
// line and record starts with its wall-clock time (UTC).
#pragma once

#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "tools/wall_time.hpp"
#include "trainer/distributed/collective_reducer.hpp"
#include "trainer/trainer.hpp"
#include "trainer/tuner/online_tuner.hpp"

namespace quorum::train_console {

namespace qt = quorum::trainer;
namespace tu = quorum::trainer::tuner;
using nlohmann::json;

inline std::string format_duration(double s) {
  if (s < 0 || !std::isfinite(s)) return "?";
  long t = long(s + 0.5);
  if (t >= 3600) return fmt::format("{}h{:02}m", t / 3600, (t / 60) % 60);
  if (t >= 60) return fmt::format("{}m{:02}s", t / 60, t % 60);
  return fmt::format("{}s", t);
}

// A text report line starts with its wall-clock time, to the second.
inline std::string stamp() {
  return quorum_tools::utc_now(quorum_tools::TimePrecision::Seconds) + " ";
}

inline std::string host_name() {
  char host[256] = {0};
  if (gethostname(host, sizeof(host) - 1) != 0) return "?";
  return host;
}

// The training recipe: what every rank must share, and what the JSON start
// record gives of the configuration.
inline json recipe_of(const qt::TrainConfig &c) {
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

}  // namespace quorum::train_console
