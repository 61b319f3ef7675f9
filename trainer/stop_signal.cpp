// stop_signal.cpp: see stop_signal.hpp. The handler only stores the signal
// number; the training loop polls it between steps.
#include "trainer/stop_signal.hpp"

#include <signal.h>
#include <string.h>

#include <atomic>

namespace quorum::trainer {

namespace {
std::atomic<int> g_stop_signal{0};
std::atomic<bool> g_installed{false};
static_assert(std::atomic<int>::is_always_lock_free, "stored from a signal handler");

void on_stop_signal(int signal) {
  g_stop_signal.store(signal);
}
}  // namespace

void stop_on_signals() {
  struct sigaction sa = {};
  sa.sa_handler = on_stop_signal;
  sigemptyset(&sa.sa_mask);
  // SA_RESETHAND: a second Ctrl-C kills at once; SA_RESTART: blocking calls go on.
  sa.sa_flags = SA_RESETHAND | SA_RESTART;
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
