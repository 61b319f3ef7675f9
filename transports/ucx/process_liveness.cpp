// process_liveness.cpp: /proc-based identity and liveness of local processes.
#include "transports/ucx/process_liveness.hpp"

#include <sys/stat.h>
#include <unistd.h>

#include <cstring>
#include <fstream>
#include <sstream>
#include <string>

namespace quorum {

namespace {
// Reads state and start time from /proc/<pid>/stat. The command name (field
// 2) may contain spaces and parentheses, so parsing starts after the last ')'.
bool read_stat(int64_t pid, char *state, uint64_t *start_time) {
  std::ifstream file("/proc/" + std::to_string(pid) + "/stat");
  if (!file) return false;
  std::string line;
  std::getline(file, line);
  size_t close = line.rfind(')');
  if (close == std::string::npos) return false;
  std::istringstream fields(line.substr(close + 1));
  std::string field;
  // After ')' come field 3 (state) ... field 22 (starttime).
  for (int index = 3; index <= 22; ++index) {
    if (!(fields >> field)) return false;
    if (index == 3) *state = field.empty() ? '?' : field[0];
  }
  *start_time = std::stoull(field);
  return true;
}
}  // namespace

ProcessIdentity ProcessIdentity::self() {
  ProcessIdentity id{};
  std::ifstream boot("/proc/sys/kernel/random/boot_id");
  std::string text;
  if (boot && std::getline(boot, text)) {
    std::strncpy(id.boot_id, text.c_str(), sizeof(id.boot_id) - 1);
  }
  struct stat ns {};
  if (stat("/proc/self/ns/pid", &ns) == 0) id.pid_namespace = ns.st_ino;
  id.pid = getpid();
  char state = 0;
  if (!read_stat(id.pid, &state, &id.start_time)) id.start_time = 0;
  return id;
}

bool ProcessIdentity::can_watch(const ProcessIdentity &other) const {
  // A peer in this very process (ranks as threads) needs no watching.
  return boot_id[0] != '\0' && pid_namespace != 0 && start_time != 0 && other.pid > 0 &&
         other.pid != pid && other.start_time != 0 && pid_namespace == other.pid_namespace &&
         std::strncmp(boot_id, other.boot_id, sizeof(boot_id)) == 0;
}

Liveness process_liveness(const ProcessIdentity &process) {
  char state = 0;
  uint64_t start_time = 0;
  try {
    if (!read_stat(process.pid, &state, &start_time)) {
      // No /proc entry: the process is gone (the entry of a live one is
      // readable within the same PID namespace).
      return access(("/proc/" + std::to_string(process.pid)).c_str(), F_OK) == 0 ? Liveness::Unknown
                                                                                 : Liveness::Gone;
    }
  } catch (const std::exception &) {
    return Liveness::Unknown;
  }
  if (start_time != process.start_time) return Liveness::Gone;  // pid reused
  if (state == 'Z' || state == 'X') return Liveness::Gone;
  return Liveness::Alive;
}

}  // namespace quorum
