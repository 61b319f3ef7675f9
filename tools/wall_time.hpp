// wall_time.hpp: wall-clock timestamps for the tools' logs, ISO 8601 in UTC
// ("2026-12-07T13:20:00.123Z"), so that records of ranks, hosts and resumed
// runs line up whatever the local time zone.
#pragma once

#include <fmt/format.h>

#include <chrono>
#include <ctime>
#include <string>

namespace quorum_tools {

enum class TimePrecision { Seconds, Milliseconds };

inline std::string utc_timestamp(std::chrono::system_clock::time_point t,
                                 TimePrecision precision = TimePrecision::Milliseconds) {
  using namespace std::chrono;
  const auto ms = duration_cast<milliseconds>(t.time_since_epoch()).count();
  // Whole seconds rounded down (also before 1970), and the milliseconds after them.
  const long long secs = ms >= 0 ? ms / 1000 : -((-ms + 999) / 1000);
  const std::time_t whole = static_cast<std::time_t>(secs);
  std::tm tm{};
  gmtime_r(&whole, &tm);
  const std::string date = fmt::format("{:04}-{:02}-{:02}T{:02}:{:02}:{:02}", tm.tm_year + 1900,
                                       tm.tm_mon + 1, tm.tm_mday, tm.tm_hour, tm.tm_min, tm.tm_sec);
  if (precision == TimePrecision::Seconds) return date + "Z";
  return fmt::format("{}.{:03}Z", date, ms - secs * 1000);
}

inline std::string utc_now(TimePrecision precision = TimePrecision::Milliseconds) {
  return utc_timestamp(std::chrono::system_clock::now(), precision);
}

}  // namespace quorum_tools
