// quorum_train_checks.cpp: see quorum_train_checks.hpp.
#include "tools/quorum_train_checks.hpp"

#include <fmt/format.h>

namespace quorum::train_checks {

std::string partial_only_misuse(const CLI::App &app, const std::string &mode) {
  if (mode == "solo" || mode == "majority") return "";
  for (const char *name : {"--drop-late", "--sync-epochs", "--partial-scale",
                           "--activation-delay-ms", "--max-staleness", "--no-catch-up"}) {
    if (app.count(name) == 0) continue;
    return fmt::format(
        "{} applies to --reduce solo and majority only; this run {}", name,
        mode == "local" ? "trains on one process without --reduce" : "reduces with --reduce sync");
  }
  return "";
}

}  // namespace quorum::train_checks
