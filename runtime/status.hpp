// status.hpp: the runtime's status codes and the per-thread "last error" detail.
//
// Functions return a Status; the first place that detects an error calls
// fail(...) once, which records the exact cause for quorum_last_error() and logs
// it, and the callers above just pass the Status up.
#pragma once

#include <fmt/format.h>

#include <string>

#include "quorum/quorum.h"

namespace quorum {

using Status = quorum_status_t;
constexpr Status kOk = QUORUM_OK;

const char *status_name(Status s);  // "QUORUM_ERR_TIMEOUT", ...
const char *status_text(Status s);  // human description, as quorum_strerror

// Records `detail` as this thread's last error (no logging).
void set_last_error(Status s, std::string detail);
const char *last_error();
// Sets the last error to text already formatted by set_last_error (carried across threads).
void restore_last_error(std::string text);
void clear_last_error();

// Records and logs the error at the place of detection; returns s so that the
// caller can write `return fail(QUORUM_ERR_..., "...", args...)`.
Status fail_message(Status s, const char *subsystem, std::string detail);

template <typename... Args>
Status fail(Status s, const char *subsystem, fmt::format_string<Args...> f, Args &&...args) {
  return fail_message(s, subsystem, fmt::format(f, std::forward<Args>(args)...));
}

}  // namespace quorum

#define QUORUM_CHECK(expr)                                              \
  do {                                                                  \
    ::quorum::Status quorum_check_status_ = (expr);                     \
    if (quorum_check_status_ != QUORUM_OK) return quorum_check_status_; \
  } while (0)
