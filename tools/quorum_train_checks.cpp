// quorum_train_checks.cpp: see quorum_train_checks.hpp.
#include "tools/quorum_train_checks.hpp"

#include <fmt/format.h>

#include <cmath>
#include <cstdlib>

namespace quorum::train_checks {

CLI::Validator finite() {
  return CLI::Validator(
      [](std::string &text) {
        char *end = nullptr;
        const double v = std::strtod(text.c_str(), &end);
        if (end == text.c_str() || *end != '\0') return std::string();  // the conversion says it
        return std::isfinite(v) ? std::string() : text + " is not a finite number";
      },
      "FINITE");
}

CLI::Validator steps_or_all() {
  return CLI::Validator(
      [](std::string &text) {
        char *end = nullptr;
        const long long v = std::strtoll(text.c_str(), &end, 10);
        if (end == text.c_str() || *end != '\0') return std::string();  // the conversion says it
        return v == -1 || v > 0 ? std::string()
                                : text + ": give -1 (all epochs) or a positive number of steps";
      },
      "-1 or >0");
}

CLI::Validator batch_size() {
  return CLI::Validator(
      [](std::string &text) {
        if (text == "auto") return std::string();
        char *end = nullptr;
        const long v = std::strtol(text.c_str(), &end, 10);
        if (end != text.c_str() && *end == '\0' && v >= 1 && v <= (1 << 16)) return std::string();
        return text + ": give a batch size from 1 to 65536, or auto";
      },
      "1..65536|auto");
}

std::string batch_auto_misuse(const CLI::App &app, bool automatic, const std::string &mode) {
  if (!automatic) return "";
  if (app.count("--target-accuracy") == 0)
    return "--batch auto needs --target-accuracy (the test accuracy, percent, the tuner "
           "trains to)";
  if (mode != "sync" && mode != "local")
    return fmt::format(
        "--batch auto reduces with sync only (its noise scale reads every rank's whole "
        "gradient); this run asks --reduce {}",
        mode);
  for (const char *name : {"--imbalance", "--bucket-kb", "--warmup-epochs", "--lr-decay"}) {
    if (app.count(name) == 0) continue;
    return fmt::format(
        "--batch auto cannot honour {}: {}", name,
        std::string(name) == "--warmup-epochs" || std::string(name) == "--lr-decay"
            ? "the tuner sets the rate of each batch it picks (square-root scaling of --lr from "
              "--lr-reference-batch, with its own warmup)"
            : "the tuner's step and noise measurements assume a plain synchronous allreduce "
              "after the backward pass");
  }
  return "";
}

CLI::Validator reduce_mode() {
  return CLI::Validator(
      [](std::string &text) {
        if (text == "sync" || text == "solo" || text == "majority") return std::string();
        if (text.rfind("quorum:", 0) == 0) {
          const std::string k = text.substr(7);
          char *end = nullptr;
          const long v = std::strtol(k.c_str(), &end, 10);
          if (!k.empty() && *end == '\0' && v >= 1 && v <= (1 << 20)) return std::string();
          return text + ": give quorum:K with K the number of ranks (1..P) that activate a round";
        }
        return text + ": expected sync, solo, majority or quorum:K";
      },
      "sync|solo|majority|quorum:K");
}

std::string partial_only_misuse(const CLI::App &app, const std::string &mode) {
  if (mode == "solo" || mode == "majority" || mode.rfind("quorum:", 0) == 0) return "";
  for (const char *name : {"--drop-late", "--carry-weight", "--sync-epochs", "--partial-scale",
                           "--activation-delay-ms", "--max-staleness", "--no-catch-up"}) {
    if (app.count(name) == 0) continue;
    return fmt::format(
        "{} applies to --reduce solo, majority and quorum:K only; this run {}", name,
        mode == "local" ? "trains on one process without --reduce" : "reduces with --reduce sync");
  }
  return "";
}

std::string lone_rank_of_many(int world) {
  if (world > 1) return "";
  // Step variables, not SLURM_NTASKS: a plain run inside an salloc shell has
  // the allocation's task count but is one process.
  for (const char *name : {"SLURM_STEP_NUM_TASKS", "PMI_SIZE", "OMPI_COMM_WORLD_SIZE"}) {
    const char *value = std::getenv(name);
    if (value == nullptr || std::atol(value) <= 1) continue;
    return fmt::format(
        "{}={}: this process is one of {} tasks, but quorum found no launcher to join them (no "
        "PMIx, no quorum-run): each would train alone as rank 0 and overwrite the others' --log "
        "and --checkpoint; launch with srun --mpi=pmix, an mpirun with PMIx, or quorum-run",
        name, value, value);
  }
  return "";
}

}  // namespace quorum::train_checks
