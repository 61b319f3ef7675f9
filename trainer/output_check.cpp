// output_check.cpp: see output_check.hpp.
#include "trainer/output_check.hpp"

#include <cerrno>
#include <cstring>

namespace quorum::trainer {

namespace {
std::string reason(int err) {
  return err != 0 ? std::strerror(err) : "write failed";
}
}  // namespace

Status check_stream_written(std::ostream &out, const std::string &what) {
  errno = 0;
  out.flush();
  if (out) return kOk;
  return fail(QUORUM_ERR_INVALID_ARG, "train", "{}: cannot write: {}", what, reason(errno));
}

Status check_file_written(std::FILE *file, const std::string &what) {
  errno = 0;
  const bool flushed = std::fflush(file) == 0;
  if (flushed && !std::ferror(file)) return kOk;
  return fail(QUORUM_ERR_INVALID_ARG, "train", "{}: cannot write: {}", what, reason(errno));
}

}  // namespace quorum::trainer
