// log.hpp: leveled logging with a "host:pid:rank" prefix and subsystem filter.
//
// QUORUM_LOG_LEVEL = error|warn|info|debug|trace (default warn).
// QUORUM_LOG_SUBSYS = comma list of subsystems to show below warn (default all).
// The same message repeated by one process is printed once, then counted.
#pragma once

#include <fmt/format.h>

#include <string>

namespace quorum {

enum class LogLevel { Error = 0, Warn, Info, Debug, Trace };

bool log_enabled(LogLevel level, const char *subsystem);
void log_message(LogLevel level, const char *subsystem, const std::string &text);

// The rank shown in the prefix. Thread-local so that ranks running as threads
// (inproc) each get their own; set_log_rank_default covers threads not set.
void set_log_rank(int rank);
void set_log_rank_default(int rank);

// Re-reads QUORUM_LOG_LEVEL / QUORUM_LOG_SUBSYS (tests change them).
void reload_log_config();

template <typename... Args>
void log(LogLevel level, const char *subsystem, fmt::format_string<Args...> f, Args &&...args) {
  if (!log_enabled(level, subsystem)) return;
  log_message(level, subsystem, fmt::format(f, std::forward<Args>(args)...));
}

}  // namespace quorum

#define QLOG_ERROR(sub, ...) ::quorum::log(::quorum::LogLevel::Error, sub, __VA_ARGS__)
#define QLOG_WARN(sub, ...) ::quorum::log(::quorum::LogLevel::Warn, sub, __VA_ARGS__)
#define QLOG_INFO(sub, ...) ::quorum::log(::quorum::LogLevel::Info, sub, __VA_ARGS__)
#define QLOG_DEBUG(sub, ...) ::quorum::log(::quorum::LogLevel::Debug, sub, __VA_ARGS__)
#define QLOG_TRACE(sub, ...) ::quorum::log(::quorum::LogLevel::Trace, sub, __VA_ARGS__)
