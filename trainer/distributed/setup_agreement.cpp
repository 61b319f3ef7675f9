// setup_agreement.cpp: see setup_agreement.hpp.
#include "trainer/distributed/setup_agreement.hpp"

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <vector>

namespace quorum::trainer {

namespace {
// What each rank sends: its exit code (0: set up) and its error, cut to fit.
struct Record {
  int32_t code;
  char error[1020];
};
}  // namespace

Status agree_on_setup(quorum_comm_t comm, const std::string &error, int code, int *exit_code) {
  Record mine{};
  mine.code = error.empty() ? 0 : (code != 0 ? code : 1);
  std::memcpy(mine.error, error.data(), std::min(error.size(), sizeof mine.error - 1));
  const int size = quorum_comm_size(comm);
  std::vector<Record> all(static_cast<size_t>(size));
  quorum_status_t s = quorum_allgather(comm, &mine, all.data(), sizeof mine);
  if (s != QUORUM_OK)
    return fail(s, "setup", "gathering whether the ranks could set up: {}", quorum_last_error());
  std::string failed;
  int first = -1;
  for (int r = 0; r < size; ++r) {
    if (all[static_cast<size_t>(r)].code == 0) continue;
    if (first < 0) first = r;
    failed += fmt::format("{}{}", failed.empty() ? "" : ", ", r);
  }
  if (first < 0) return kOk;
  const Record &f = all[static_cast<size_t>(first)];
  *exit_code = f.code;
  // The reason without its status name ("QUORUM_ERR_...: "), which ours repeats.
  std::string why(f.error, strnlen(f.error, sizeof f.error));
  if (why.rfind("QUORUM_ERR_", 0) == 0 && why.find(": ") != std::string::npos)
    why = why.substr(why.find(": ") + 2);
  return fail(QUORUM_ERR_INVALID_ARG, "setup", "rank {} failed to set up: {}{}", first, why,
              failed.find(',') == std::string::npos ? "" : " (ranks " + failed + " failed)");
}

}  // namespace quorum::trainer
