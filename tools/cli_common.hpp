// cli_common.hpp: what the command lines of every quorum tool share:
// `--version` (the tool, quorum's version and the build type), and the exit
// status of a usage error (an unknown flag, a bad value): 2, as for most Unix
// tools, whatever CLI11's own code for that kind of error is. `--help` and
// `--version` exit 0.
#pragma once
#include <CLI/CLI.hpp>
#include <string>

#include "quorum_build_config.h"

namespace quorum_tools {

constexpr int kUsageError = 2;

inline void add_version_flag(CLI::App &app, const std::string &tool) {
  app.set_version_flag("--version", tool + " (quorum) " QUORUM_BUILD_VERSION,
                       "print the version and exit");
}

// Parses the command line; returns -1 to go on, else the status to exit
// with (CLI11 has printed the help, the version or the error).
inline int parse_command_line(CLI::App &app, int argc, char **argv) {
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError &e) {
    return app.exit(e) == 0 ? 0 : kUsageError;
  }
  return -1;
}

}  // namespace quorum_tools

// In main(): parse, or return the exit status.
#define QUORUM_TOOL_PARSE(app, argc, argv)                                      \
  do {                                                                          \
    int quorum_tool_status = quorum_tools::parse_command_line(app, argc, argv); \
    if (quorum_tool_status >= 0) return quorum_tool_status;                     \
  } while (0)
