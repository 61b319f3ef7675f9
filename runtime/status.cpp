// status.cpp: status names, strerror text and the thread-local last error.
#include "status.hpp"

#include "log.hpp"

namespace quorum {

namespace {
thread_local std::string t_last_error;
}

const char *status_name(Status s) {
  switch (s) {
    case QUORUM_OK:
      return "QUORUM_OK";
    case QUORUM_ERR_INVALID_ARG:
      return "QUORUM_ERR_INVALID_ARG";
    case QUORUM_ERR_TIMEOUT:
      return "QUORUM_ERR_TIMEOUT";
    case QUORUM_ERR_PEER_FAILED:
      return "QUORUM_ERR_PEER_FAILED";
    case QUORUM_ERR_MISMATCH:
      return "QUORUM_ERR_MISMATCH";
    case QUORUM_ERR_NO_MEMORY:
      return "QUORUM_ERR_NO_MEMORY";
    case QUORUM_ERR_TRANSPORT:
      return "QUORUM_ERR_TRANSPORT";
    case QUORUM_ERR_BOOTSTRAP:
      return "QUORUM_ERR_BOOTSTRAP";
    case QUORUM_ERR_UNSUPPORTED:
      return "QUORUM_ERR_UNSUPPORTED";
    case QUORUM_ERR_INTERNAL:
      return "QUORUM_ERR_INTERNAL";
  }
  return "QUORUM_ERR_UNKNOWN";
}

const char *status_text(Status s) {
  switch (s) {
    case QUORUM_OK:
      return "success";
    case QUORUM_ERR_INVALID_ARG:
      return "invalid argument";
    case QUORUM_ERR_TIMEOUT:
      return "operation timed out";
    case QUORUM_ERR_PEER_FAILED:
      return "a peer rank failed";
    case QUORUM_ERR_MISMATCH:
      return "collective call mismatch across ranks";
    case QUORUM_ERR_NO_MEMORY:
      return "out of memory";
    case QUORUM_ERR_TRANSPORT:
      return "transport error";
    case QUORUM_ERR_BOOTSTRAP:
      return "bootstrap error";
    case QUORUM_ERR_UNSUPPORTED:
      return "operation not supported";
    case QUORUM_ERR_INTERNAL:
      return "internal error";
  }
  return "unknown status";
}

void set_last_error(Status s, std::string detail) {
  t_last_error = fmt::format("{}: {}", status_name(s), detail);
}

const char *last_error() {
  return t_last_error.c_str();
}

void restore_last_error(std::string text) {
  t_last_error = std::move(text);
}

void clear_last_error() {
  t_last_error.clear();
}

Status fail_message(Status s, const char *subsystem, std::string detail) {
  log_message(LogLevel::Error, subsystem, fmt::format("{}: {}", status_name(s), detail));
  set_last_error(s, std::move(detail));
  return s;
}

}  // namespace quorum
