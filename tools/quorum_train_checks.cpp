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
