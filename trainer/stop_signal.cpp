// stop_signal.cpp: see stop_signal.hpp. The handler only stores the signal
// number; the training loop polls it between steps. It runs on an alternate
// stack: a signal frame pushed onto the interrupted stack, in the middle of
// oneDNN's JIT-compiled sgemm, broke the heap there (glibc's "corrupted size
// vs. prev_size" a few calls later).
#include "trainer/stop_signal.hpp"

#include <signal.h>
#include <string.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <vector>

namespace quorum::trainer {

namespace {
std::atomic<int> g_stop_signal{0};
std::atomic<bool> g_installed{false};
static_assert(std::atomic<int>::is_always_lock_free, "stored from a signal handler");

void on_stop_signal(int signal) {
  g_stop_signal.store(signal);
}

// An alternate signal stack for the first thread that installs the handlers
// (quorum-train's main thread, the one that computes: the kernel hands a
// process-wide signal to the main thread while it runs), unless it has one
// already. One thread only: two threads must not share one alternate stack.
void use_alternate_signal_stack() {
  static std::vector<char> stack(std::max<size_t>(1 << 16, size_t(sysconf(_SC_SIGSTKSZ))));
  static std::atomic<bool> given{false};
  stack_t current = {};
  if (sigaltstack(nullptr, &current) == 0 && !(current.ss_flags & SS_DISABLE)) return;
  if (given.exchange(true)) return;
  stack_t alternate = {};
  alternate.ss_sp = stack.data(), alternate.ss_size = stack.size();
  sigaltstack(&alternate, nullptr);
}
}  // namespace

void stop_on_signals() {
  use_alternate_signal_stack();
  struct sigaction sa = {};
  sa.sa_handler = on_stop_signal;
  sigemptyset(&sa.sa_mask);
  // SA_RESETHAND: a second Ctrl-C kills at once; SA_RESTART: blocking calls go
  // on; SA_ONSTACK: on the alternate stack.
  sa.sa_flags = SA_RESETHAND | SA_RESTART | SA_ONSTACK;
  sigaction(SIGINT, &sa, nullptr);
  sigaction(SIGTERM, &sa, nullptr);
  g_installed.store(true);
}

void rearm_stop_signals() {
  if (g_installed.load()) stop_on_signals();
}

int stop_signal() {
  return g_stop_signal.load();
}

void request_stop(int signal) {
  g_stop_signal.store(signal);
}

std::string signal_name(int signal) {
  const char *abbrev = sigabbrev_np(signal);
  return abbrev ? std::string("SIG") + abbrev : "signal " + std::to_string(signal);
}

std::string stopped_message(const TrainConfig &config, const TrainResult &result) {
  std::string text = fmt::format("stopped by {} at step {}", signal_name(result.stopped_by_signal),
                                 result.global_step);
  if (config.checkpoint_path.empty()) return text + " (no --checkpoint: nothing saved)";
  return text + fmt::format("; checkpoint {} holds it (rank 0 writes it): --resume {} to go on",
                            config.checkpoint_path, config.checkpoint_path);
}

}  // namespace quorum::trainer
