// output_check.hpp: a run whose output did not reach its file (a full disk,
// a closed pipe) must not end with status 0. These flush the outputs and
// report the first write error with the file's name.
#pragma once

#include <cstdio>
#include <ostream>
#include <string>

#include "runtime/status.hpp"

namespace quorum::trainer {

// Flushes `out` (e.g. the --log file) and fails naming `what` if any write to
// it has failed since it was opened.
Status check_stream_written(std::ostream &out, const std::string &what);
// Flushes `file` (stdout by default) and fails naming `what` on a write error.
Status check_file_written(std::FILE *file, const std::string &what);

}  // namespace quorum::trainer
