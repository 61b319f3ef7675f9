// engine.cpp: drives the active requests of one communicator, from callers in
// wait()/test() and from an optional progress thread that sleeps on events.
#include "runtime/progress/engine.hpp"

#include <poll.h>
#include <sys/eventfd.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstring>

#include "runtime/knobs.hpp"
#include "runtime/log.hpp"

namespace quorum {

Knob<int64_t> knob_spin_us("QUORUM_SPIN_US", -1,
                           "Microseconds a waiter keeps polling without progress before it "
                           "sleeps on the transport's event fd; -1 (auto): 200 when this host's "
                           "ranks have a core each (their affinity masks together cover as many "
                           "cores as there are ranks), else 10 (ranks share cores, so polling "
                           "would steal time from the rank it waits for); the progress thread of "
                           "a rank bound to one core polls at most 10 (it shares that core with "
                           "the rank's own work)");

Knob<int64_t> knob_memory_nap_us("QUORUM_MEMORY_NAP_US", 20,
                                 "Microseconds an idle waiter first naps between polls while a "
                                 "task waits on flags in shared memory (nothing wakes it there); "
                                 "the naps then grow to 1/16 of the time waited");
Knob<int64_t> knob_memory_nap_max_us("QUORUM_MEMORY_NAP_MAX_US", 1000,
                                     "Longest nap (microseconds) of an idle waiter on flags in "
                                     "shared memory (see QUORUM_MEMORY_NAP_US)");

int64_t memory_nap_us(uint64_t stalled_ns, int64_t first_us, int64_t max_us) {
  const int64_t first = std::max<int64_t>(1, first_us);
  const int64_t grown = static_cast<int64_t>(stalled_ns / 16000);
  return std::max(first, std::min(grown, max_us));
}

namespace {
// Longest nap of a waiter whose request is past its deadline (its aborted
// tasks settling: a transport's grace runs out only in a progress pass).
constexpr int kSettleNapMs = 10;
// How long a timed-out call waits for the answers to its liveness probe: a
// quarter of the timeout, at most a second (peers answer from their progress,
// within milliseconds when they are reachable).
int64_t probe_window_ms() {
  return std::clamp<int64_t>(knob_timeout_ms.get() / 4, 1, 1000);
}

std::string rank_list(const std::vector<int> &ranks) {
  std::string out;
  for (int r : ranks) out += (out.empty() ? "" : ",") + std::to_string(r);
  return out;
}
}  // namespace

ProgressEngine::ProgressEngine(ProgressSource source, int rank)
    : source_(std::move(source)), rank_(rank) {
  wake_fd_ = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
}

ProgressEngine::~ProgressEngine() {
  stop_thread();
  if (wake_fd_ >= 0) close(wake_fd_);
}

void ProgressEngine::start_thread() {
  // Two threads may ask at once (callers of the C++ API, which does not
  // enforce the C API's one-caller rule): assigning a thread that already
  // runs would terminate the process.
  std::lock_guard<std::mutex> lock(thread_mutex_);
  if (thread_.joinable()) return;
  stop_.store(false);
  thread_ = std::thread([this] { thread_main(); });
  thread_on_.store(true, std::memory_order_release);
}

void ProgressEngine::stop_thread() {
  std::lock_guard<std::mutex> lock(thread_mutex_);
  if (!thread_.joinable()) return;
  stop_.store(true);
  wake();
  done_cv_.notify_all();
  thread_.join();
  thread_on_.store(false, std::memory_order_release);
}

void ProgressEngine::wake() {
  if (wake_fd_ < 0) return;
  uint64_t one = 1;
  ssize_t r = write(wake_fd_, &one, sizeof(one));
  (void)r;
}

void ProgressEngine::wake_at(uint64_t deadline_ns) {
  uint64_t cur = timer_ns_.load();
  while ((cur == 0 || deadline_ns < cur) &&
         !timer_ns_.compare_exchange_weak(cur, std::max<uint64_t>(deadline_ns, 1))) {
  }
}

int ProgressEngine::add_poller(Poller poller) {
  std::lock_guard<std::mutex> lock(mutex_);
  int id = next_poller_id_++;
  pollers_.emplace_back(id, std::move(poller));
  return id;
}

void ProgressEngine::remove_poller(int id) {
  std::lock_guard<std::mutex> lock(mutex_);
  for (auto it = pollers_.begin(); it != pollers_.end(); ++it) {
    if (it->first == id) {
      pollers_.erase(it);
      return;
    }
  }
}

void ProgressEngine::set_spin(int local_ranks, int cores, int process_cores) {
  constexpr int64_t kShortUs = 10;
  int64_t us = knob_spin_us.get();
  int64_t thread_us = us;
  if (us < 0) {
    us = (cores > 0 && local_ranks <= cores) ? 200 : kShortUs;
    thread_us = process_cores == 1 ? std::min(us, kShortUs) : us;
  }
  spin_ns_ = static_cast<uint64_t>(us) * 1000;
  thread_spin_ns_ = static_cast<uint64_t>(thread_us) * 1000;
}

void ProgressEngine::submit(const RequestPtr &request, bool caller_waits) {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    active_.push_back(request);
    progress_locked();
  }
  // A caller about to wait drives progress itself: do not wake the thread.
  if (!caller_waits && thread_running() && waiters_.load() == 0) wake();
}

bool ProgressEngine::progress_once() {
  std::lock_guard<std::mutex> lock(mutex_);
  return progress_locked();
}

bool ProgressEngine::progress_locked() {
  bool made = source_.progress ? source_.progress() : false;
  for (size_t i = 0; i < pollers_.size(); ++i) made |= pollers_[i].second();
  if (source_.failed_peer && !active_.empty()) {
    if (const int dead = source_.failed_peer(); dead >= 0) fail_requests_for_dead_peer(dead);
  }
  for (auto it = active_.begin(); it != active_.end();) {
    Request &req = **it;
    Schedule &sched = req.schedule();
    if (!req.aborted_) {
      made |= sched.progress();
      if (!sched.done() && req.deadline_.expired()) {
        time_out(req);
        made = true;
      } else if (sched.done() && sched.status() != kOk) {
        // Name the operation in front of the cause the failing task recorded.
        std::string cause = last_error();
        std::string prefix = std::string(status_name(sched.status())) + ": ";
        if (cause.rfind(prefix, 0) == 0) cause.erase(0, prefix.size());
        req.detail_ =
            fmt::format("{}{} on rank {} failed: {}", prefix, req.what_.str(), rank_, cause);
      }
      if (sched.done() && sched.status() != kOk) req.aborted_ = true;
    }
    if (sched.done() && (!req.aborted_ || sched.quiescent()) &&
        (req.timeout_what_.empty() || report_timeout(req))) {
      req.status_ = sched.status();
      if (req.on_complete) req.on_complete(req.status_);
      req.complete_.store(true, std::memory_order_release);
      it = active_.erase(it);
      made = true;
      done_cv_.notify_all();
    } else {
      ++it;
    }
  }
  return made;
}

void ProgressEngine::time_out(Request &req) {
  Schedule &sched = req.schedule();
  req.timeout_what_ =
      fmt::format("{} on rank {} timed out after {} ms; waiting for rank(s) [{}]", req.what_.str(),
                  rank_, knob_timeout_ms.get(), rank_list(sched.waiting_peers()));
  req.timeout_stall_ = sched.stall_report();
  if (source_.probe_peers && source_.silent_peers) {
    // The ranks this call waits for may be alive and waiting themselves (a
    // ring behind an unreachable host): ask everyone who still answers.
    req.probe_ns_ = std::max<uint64_t>(1, now_ns());
    source_.probe_peers();
    wake_at(req.probe_ns_ + static_cast<uint64_t>(probe_window_ms()) * 1000000);
  }
  req.detail_ = req.timeout_what_ + ": " + req.timeout_stall_;
  sched.abort(QUORUM_ERR_TIMEOUT);
  if (req.probe_ns_ == 0) report_timeout(req);
}

bool ProgressEngine::report_timeout(Request &req) {
  std::vector<int> silent;
  if (req.probe_ns_ != 0) {
    silent = source_.silent_peers(req.probe_ns_);
    const uint64_t window_ns = static_cast<uint64_t>(probe_window_ms()) * 1000000;
    if (!silent.empty() && now_ns() - req.probe_ns_ < window_ns) return false;
    req.probe_ns_ = 0;
  }
  std::string unanswered;
  if (!silent.empty()) {
    unanswered = fmt::format(
        "; no answer within {} ms from rank(s) [{}] (unreachable, or not "
        "making progress)",
        probe_window_ms(), rank_list(silent));
  }
  fail(QUORUM_ERR_TIMEOUT, "progress", "{}{}: {}", req.timeout_what_, unanswered,
       req.timeout_stall_);
  req.detail_ = last_error();
  req.timeout_what_.clear();
  return true;
}

void ProgressEngine::fail_requests_for_dead_peer(int peer) {
  for (auto &req : active_) {
    if (req->aborted_ || req->schedule().done()) continue;
    fail(QUORUM_ERR_PEER_FAILED, "progress", "{} on rank {} failed: rank {} has failed",
         req->what_.str(), rank_, peer);
    req->aborted_ = true;
    req->detail_ = last_error();
    req->schedule().abort(QUORUM_ERR_PEER_FAILED);
  }
}

void ProgressEngine::sleep_for_events(int max_ms, uint64_t idle_ns) {
  int64_t max_us = std::max<int64_t>(0, max_ms) * 1000;
  if (uint64_t timer = timer_ns_.load(); timer != 0) {
    const uint64_t now = now_ns();
    if (now >= timer) {
      timer_ns_.compare_exchange_strong(timer, 0);  // due: make the pass now
      return;
    }
    max_us = std::min<int64_t>(max_us, static_cast<int64_t>((timer - now + 999) / 1000));
  }
  if (MemoryWaitGuard::count().load(std::memory_order_relaxed) > 0) {
    // A task waits on shared memory, which no fd reports: nap, then poll again.
    int64_t us = memory_nap_us(idle_ns, knob_memory_nap_us.get(), knob_memory_nap_max_us.get());
    std::this_thread::sleep_for(std::chrono::microseconds(std::min<int64_t>(us, max_us + 1)));
    return;
  }
  {
    std::lock_guard<std::mutex> lock(mutex_);
    if (source_.arm && !source_.arm()) return;  // events pending: progress instead
  }
  struct pollfd fds[2];
  int n = 0;
  int efd = source_.event_fd ? source_.event_fd() : -1;
  if (efd >= 0) fds[n++] = {efd, POLLIN, 0};
  if (wake_fd_ >= 0) fds[n++] = {wake_fd_, POLLIN, 0};
  // Without a transport fd, nap briefly so a pending send still gets polled.
  if (efd < 0) max_us = std::min<int64_t>(max_us, 1000);
  const struct timespec timeout = {static_cast<time_t>(max_us / 1000000),
                                   static_cast<long>(max_us % 1000000) * 1000};
  int r = ppoll(fds, n, &timeout, nullptr);
  if (r > 0 && wake_fd_ >= 0 && (fds[n - 1].revents & POLLIN)) {
    uint64_t v;
    ssize_t rr = read(wake_fd_, &v, sizeof(v));
    (void)rr;
  }
}

Status ProgressEngine::wait(const RequestPtr &request) {
  waiters_.fetch_add(1);
  const uint64_t spin_ns = spin_ns_;
  // Only a pass that moved something starts a new spin: a waiter woken
  // without progress (a nap on shared-memory flags, a bounded sleep) sleeps
  // again at once instead of polling for spin_ns after every nap.
  uint64_t last_progress = now_ns();
  while (!request->complete()) {
    bool made = progress_once();
    if (request->complete()) break;
    uint64_t now = now_ns();
    if (made) {
      last_progress = now;
      continue;
    }
    if (now - last_progress < spin_ns) continue;
    // Idle: sleep until the transport has events (bounded, so deadlines are
    // checked). Past the deadline the request waits for its aborted tasks to
    // settle, which events report too: nap rather than spin.
    const int left_ms = request->deadline_.remaining_ms(100);
    sleep_for_events(left_ms > 0 ? left_ms : kSettleNapMs, now - last_progress);
  }
  if (waiters_.fetch_sub(1) == 1 && thread_running()) done_cv_.notify_all();
  if (request->status() != kOk) restore_last_error(request->detail_);
  return request->status();
}

Status ProgressEngine::test(const RequestPtr &request, bool *done) {
  if (!request->complete()) progress_once();
  *done = request->complete();
  if (*done && request->status() != kOk) restore_last_error(request->detail_);
  return *done ? request->status() : kOk;
}

void ProgressEngine::abort_all(Status status) {
  std::lock_guard<std::mutex> lock(mutex_);
  for (auto &req : active_) {
    if (!req->aborted_) {
      req->aborted_ = true;
      req->detail_ = last_error();
      req->schedule().abort(status);
    }
  }
}

size_t ProgressEngine::abort_and_drain(Status status, Deadline deadline) {
  abort_all(status);
  for (;;) {
    const bool made = progress_once();
    {
      std::lock_guard<std::mutex> lock(mutex_);
      if (active_.empty()) return 0;
      if (deadline.expired()) {
        const size_t left = active_.size();
        static_cast<void>(new std::list<RequestPtr>(std::move(active_)));  // leaked on purpose
        active_.clear();
        return left;
      }
    }
    if (!made) std::this_thread::sleep_for(std::chrono::microseconds(20));
  }
}

size_t ProgressEngine::active_requests() {
  std::lock_guard<std::mutex> lock(mutex_);
  return active_.size();
}

void ProgressEngine::thread_main() {
  set_log_rank(rank_);
  if (thread_init_) thread_init_();
  const uint64_t spin_ns = thread_spin_ns_;
  uint64_t last_progress = now_ns();  // as in wait(): only progress restarts the spin
  while (!stop_.load()) {
    if (waiters_.load() > 0) {
      // A caller is progressing inside wait(): stand back until it is done.
      std::unique_lock<std::mutex> lock(mutex_);
      done_cv_.wait_for(lock, std::chrono::milliseconds(5),
                        [this] { return stop_.load() || waiters_.load() == 0; });
      last_progress = now_ns();
      continue;
    }
    if (progress_once()) {
      last_progress = now_ns();
      continue;
    }
    const uint64_t now = now_ns();
    if (now - last_progress < spin_ns) continue;
    sleep_for_events(100, now - last_progress);
  }
}

}  // namespace quorum
