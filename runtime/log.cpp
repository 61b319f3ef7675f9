// log.cpp: implementation of the leveled, prefixed, de-duplicated logger.
#include "log.hpp"

#include <unistd.h>

#include <atomic>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <mutex>
#include <sstream>
#include <string_view>
#include <unordered_map>
#include <vector>

namespace quorum {

namespace {

struct LogConfig {
  LogLevel level = LogLevel::Warn;
  std::vector<std::string> subsystems;  // empty: all
  std::string host;
};

LogLevel parse_level(const char *s) {
  if (!s || !*s) return LogLevel::Warn;
  std::string_view v(s);
  if (v == "error") return LogLevel::Error;
  if (v == "warn" || v == "warning") return LogLevel::Warn;
  if (v == "info") return LogLevel::Info;
  if (v == "debug") return LogLevel::Debug;
  if (v == "trace") return LogLevel::Trace;
  std::fprintf(stderr,
               "quorum: unknown QUORUM_LOG_LEVEL '%s' (error|warn|info|debug|trace), using warn\n",
               s);
  return LogLevel::Warn;
}

std::mutex g_mutex;
LogConfig *g_config = nullptr;
std::atomic<int> g_level{-1};
std::atomic<int> g_default_rank{-1};
thread_local int t_rank = -1;
std::unordered_map<std::string, unsigned> g_repeats;

LogConfig &config_locked() {
  if (!g_config) {
    g_config = new LogConfig();
    g_config->level = parse_level(std::getenv("QUORUM_LOG_LEVEL"));
    if (const char *subs = std::getenv("QUORUM_LOG_SUBSYS");
        subs && *subs && std::strcmp(subs, "all") != 0) {
      std::stringstream ss(subs);
      std::string item;
      while (std::getline(ss, item, ',')) {
        if (!item.empty()) g_config->subsystems.push_back(item);
      }
    }
    char host[256] = {0};
    gethostname(host, sizeof(host) - 1);
    g_config->host = host;
    g_level.store(static_cast<int>(g_config->level));
  }
  return *g_config;
}

const char *level_name(LogLevel l) {
  switch (l) {
    case LogLevel::Error:
      return "ERROR";
    case LogLevel::Warn:
      return "WARN";
    case LogLevel::Info:
      return "INFO";
    case LogLevel::Debug:
      return "DEBUG";
    case LogLevel::Trace:
      return "TRACE";
  }
  return "?";
}

}  // namespace

bool log_enabled(LogLevel level, const char *subsystem) {
  int cur = g_level.load(std::memory_order_relaxed);
  if (cur < 0) {
    std::lock_guard<std::mutex> lock(g_mutex);
    cur = static_cast<int>(config_locked().level);
  }
  if (static_cast<int>(level) > cur) return false;
  if (level <= LogLevel::Warn) return true;
  std::lock_guard<std::mutex> lock(g_mutex);
  const auto &subs = config_locked().subsystems;
  if (subs.empty()) return true;
  for (const auto &s : subs) {
    if (s == subsystem) return true;
  }
  return false;
}

void log_message(LogLevel level, const char *subsystem, const std::string &text) {
  std::lock_guard<std::mutex> lock(g_mutex);
  LogConfig &cfg = config_locked();
  int rank = t_rank >= 0 ? t_rank : g_default_rank.load();
  if (level <= LogLevel::Warn) {
    // Print an identical error/warning once per process and rank, then count.
    std::string key = std::to_string(rank) + "|" + text;
    unsigned &n = g_repeats[key];
    ++n;
    if (n > 1) {
      if ((n & (n - 1)) == 0) {
        std::fprintf(stderr, "[%s:%d:%d] quorum %s %s: (repeated %u times) %s\n", cfg.host.c_str(),
                     static_cast<int>(getpid()), rank, level_name(level), subsystem, n,
                     text.c_str());
      }
      return;
    }
  }
  std::fprintf(stderr, "[%s:%d:%d] quorum %s %s: %s\n", cfg.host.c_str(),
               static_cast<int>(getpid()), rank, level_name(level), subsystem, text.c_str());
}

void set_log_rank(int rank) {
  t_rank = rank;
}
void set_log_rank_default(int rank) {
  g_default_rank.store(rank);
}

void reload_log_config() {
  std::lock_guard<std::mutex> lock(g_mutex);
  delete g_config;
  g_config = nullptr;
  config_locked();
}

}  // namespace quorum
