// quorum_tune_report.cpp: see quorum_tune_report.hpp.
#include "tools/quorum_tune_report.hpp"

#include <fmt/format.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <fstream>

namespace quorum::tune_report {

namespace {
nlohmann::json fit_json(const tu::CurveFit &f) {
  return {{"model", "err(s) = a + b * s^-c"},
          {"a", f.a},
          {"b", f.b},
          {"c", f.c},
          {"rmse", f.rmse},
          {"points", f.points},
          {"crossing", f.crossing},
          {"crossing_error", std::isfinite(f.crossing_error) ? nlohmann::json(f.crossing_error)
                                                             : nlohmann::json(nullptr)}};
}
}  // namespace

std::string pilot_summary(const tu::PilotResult &pr, double target) {
  const double epochs = double(pr.steps) / double(pr.steps_per_epoch);
  std::string where =
      pr.extrapolated
          ? fmt::format(
                "pilot stopped at step {} ({:.2f} epochs, best {:.2f}%) and extrapolated: the "
                "fit err(s) = {:.4f} + {:.3g} s^-{:.3f} of {} evaluations (rmse {:.2f} points) "
                "crosses {:.2f}% at step {:.0f} +- {:.0f}; first seen there at step {:.0f}",
                pr.steps, epochs, 100 * pr.best_accuracy, pr.fit.a, pr.fit.b, pr.fit.c,
                pr.fit.points, 100 * pr.fit.rmse, target, pr.fit.crossing, pr.fit.crossing_error,
                pr.target_steps)
          : fmt::format("pilot reached {:.2f}% at step {} ({:.2f} epochs, measured)", target,
                        pr.steps, epochs);
  return fmt::format(
      "{}; {:.1f} s training + {:.1f} s evaluating, {} of {} evaluations decided on part of the "
      "test set; B_noise near the end {:.0f} +- {:.0f} (the last {} of {} samples; over the "
      "whole pilot {:.0f}, smoothed at its end {:.0f})",
      where, pr.train_seconds, pr.eval_seconds, pr.screened_out, pr.evaluations, pr.b_noise,
      pr.b_noise_error, pr.late_samples, pr.noise_samples, pr.b_noise_whole, pr.b_noise_ema);
}

nlohmann::json pilot_json(const tu::PilotResult &pr, double global_batch, double seconds) {
  nlohmann::json j{{"global_batch", global_batch},
                   {"steps", pr.steps},
                   {"steps_source", pr.extrapolated ? "extrapolated" : "measured"},
                   {"target_steps", pr.target_steps},
                   {"steps_per_epoch", pr.steps_per_epoch},
                   {"train_seconds", pr.train_seconds},
                   {"eval_seconds", pr.eval_seconds},
                   {"evaluations", pr.evaluations},
                   {"screened_out", pr.screened_out},
                   {"seconds", seconds}};
  if (pr.fit.points > 0) j["fit"] = fit_json(pr.fit);
  return j;
}

void print_table(const std::vector<tu::Prediction> &rows, size_t chosen,
                 const std::string &cost_unit) {
  std::printf("%7s %3s %6s %8s %6s %10s %11s %6s %6s %9s %9s %12s  %s\n", "B", "K", "b", "lr",
              "warmup", "tau(ms)", "examples/s", "fresh", "eff", "steps", "time(s)",
              fmt::format("cost({})", cost_unit).c_str(), "flags");
  for (size_t i = 0; i < rows.size(); ++i) {
    const auto &r = rows[i];
    std::string flags;
    if (r.pareto) flags += "P";
    if (r.knee) flags += "K";
    if (i == chosen) flags += "*";
    if (r.extrapolated) flags += "x";
    std::printf("%7d %3d %6d %8.4f %6.2f %10.2f %11.0f %6.2f %6.3f %9.0f %9.1f %12.4g  %s\n",
                r.global_batch, r.ranks, r.local_batch, r.lr, r.warmup_epochs, 1e3 * r.step_seconds,
                r.throughput, r.fresh, r.efficiency, r.steps, r.seconds, r.cost, flags.c_str());
  }
  std::printf(
      "flags: P on the time/cost Pareto front, K its knee, * chosen, x extrapolated "
      "(ranks beyond those launched, or a batch outside the profile)\n");
}

nlohmann::json row_json(const tu::Prediction &p) {
  return {{"global_batch", p.global_batch},
          {"ranks", p.ranks},
          {"local_batch", p.local_batch},
          {"lr", p.lr},
          {"warmup_epochs", p.warmup_epochs},
          {"step_seconds", p.step_seconds},
          {"compute_seconds", p.compute_seconds},
          {"comm_seconds", p.comm_seconds},
          {"throughput", p.throughput},
          {"fresh", p.fresh},
          {"efficiency", p.efficiency},
          {"steps", p.steps},
          {"seconds", p.seconds},
          {"cost", p.cost},
          {"pareto", p.pareto},
          {"knee", p.knee},
          {"extrapolated", p.extrapolated}};
}

std::string unwritable_output(const std::string &path, const char *flag) {
  if (path.empty()) return fmt::format("{} needs a file name", flag);
  struct stat st {};
  if (stat(path.c_str(), &st) == 0 && S_ISDIR(st.st_mode))
    return fmt::format("{} {}: is a folder, not a file", flag, path);
  const size_t slash = path.rfind('/');
  const std::string dir = slash == std::string::npos ? "."
                          : slash == 0               ? "/"
                                                     : path.substr(0, slash);
  if (stat(dir.c_str(), &st) != 0 || !S_ISDIR(st.st_mode))
    return fmt::format("{} {}: folder {} does not exist", flag, path, dir);
  if (access(dir.c_str(), W_OK) != 0)
    return fmt::format("{} {}: folder {} is not writable", flag, path, dir);
  return "";
}

Status write_atomically(const std::string &path, const std::string &text) {
  const std::string tmp = path + fmt::format(".tmp{}", getpid());
  {
    std::ofstream out(tmp, std::ios::trunc);
    out << text;
    out.flush();
    if (!out) {
      std::remove(tmp.c_str());
      return fail(QUORUM_ERR_INVALID_ARG, "tune", "{}: cannot write: {}", path,
                  std::strerror(errno));
    }
  }
  if (std::rename(tmp.c_str(), path.c_str()) != 0) {
    const int e = errno;
    std::remove(tmp.c_str());
    return fail(QUORUM_ERR_INVALID_ARG, "tune", "{}: cannot write: {}", path, std::strerror(e));
  }
  return kOk;
}

Status draw_plot(const std::string &script, const std::string &json_path, const std::string &png) {
  // The script writes to a temp name; it becomes the PNG only when complete.
  const std::string tmp = png + fmt::format(".tmp{}.png", getpid());
  // Debian's python3 (with its matplotlib) before whatever else is on the PATH.
  const char *python = access("/usr/bin/python3", X_OK) == 0 ? "/usr/bin/python3" : "python3";
  const std::string cmd = fmt::format("{} '{}' '{}' '{}'", python, script, json_path, tmp);
  if (script.find('\'') != std::string::npos || json_path.find('\'') != std::string::npos ||
      png.find('\'') != std::string::npos)
    return fail(QUORUM_ERR_INVALID_ARG, "tune", "--plot: file names with a ' are not supported");
  const int rc = std::system(cmd.c_str());
  if (rc != 0 || std::rename(tmp.c_str(), png.c_str()) != 0) {
    std::remove(tmp.c_str());
    return fail(QUORUM_ERR_INVALID_ARG, "tune",
                "--plot {}: the plot script {} failed (exit {}); is python3-matplotlib installed?",
                png, script, WIFEXITED(rc) ? WEXITSTATUS(rc) : rc);
  }
  return kOk;
}

}  // namespace quorum::tune_report
