// engine.hpp: the progress engine of one communicator.
//
// It owns the list of active requests (each a Schedule with a deadline) and
// drives them together with the transport's progress. Progress is made by
// callers inside wait()/test(), and, when enabled, by a progress thread that
// sleeps on the transport's event fd while idle. While a caller is inside
// wait() the thread stands back, so the two never fight over the core.
// Every call into the transport happens with the engine's mutex held.
#pragma once

#include <atomic>
#include <condition_variable>
#include <cstring>
#include <functional>
#include <list>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <type_traits>
#include <vector>

#include "runtime/clock.hpp"
#include "runtime/knobs.hpp"
#include "runtime/progress/schedule.hpp"
#include "runtime/status.hpp"

namespace quorum {

// What the engine needs of the transport below it.
struct ProgressSource {
  std::function<bool()> progress;  // non-blocking; true if something completed
  std::function<int()> event_fd;   // -1: no fd, the engine naps briefly instead
  std::function<bool()> arm;       // false: events pending, do not sleep
  // The liveness source: a rank known to be gone, or -1 (Transport::failed_peer).
  std::function<int()> failed_peer;
  // Liveness probe of a timed-out call (Transport::probe_peers/silent_peers);
  // null: the timeout is reported at once, naming the ranks waited for only.
  std::function<void()> probe_peers;
  std::function<std::vector<int>(uint64_t since_ns)> silent_peers;
};

// Tasks that wait on flags in shared memory count themselves here while they
// wait: no transport event wakes a sleeping engine for them, so the engine
// then naps only briefly (QUORUM_MEMORY_NAP_US) instead of sleeping on the fd.
extern Knob<int64_t> knob_memory_nap_us;
extern Knob<int64_t> knob_memory_nap_max_us;
// How long such a waiter naps after `stalled_ns` without progress: first_us,
// growing to 1/16 of the time stalled (a peer that is late by t is then seen
// at most about t/16 after it arrives), at most max_us. A fixed short nap
// would wake the waiter tens of thousands of times a second while a peer
// computes, taking half a core from ranks that share cores.
int64_t memory_nap_us(uint64_t stalled_ns, int64_t first_us, int64_t max_us);
class MemoryWaitGuard {
 public:
  MemoryWaitGuard() = default;
  ~MemoryWaitGuard() { release(); }
  MemoryWaitGuard(const MemoryWaitGuard &) = delete;
  MemoryWaitGuard &operator=(const MemoryWaitGuard &) = delete;
  void acquire() {
    if (!held_) count().fetch_add(1);
    held_ = true;
  }
  void release() {
    if (held_) count().fetch_sub(1);
    held_ = false;
  }
  static std::atomic<int> &count() {
    static std::atomic<int> n{0};
    return n;
  }

 private:
  bool held_ = false;
};

// What a request does, for its error messages: a text, or a few fields and
// the function that formats them, run only when a message needs the text
// (formatting on every call cost more than a small allreduce's own work).
class RequestLabel {
 public:
  RequestLabel(std::string text) : text_(std::move(text)) {}  // NOLINT: implicit
  RequestLabel(const char *text) : text_(text) {}             // NOLINT: implicit
  template <typename Fields, std::string (*Format)(const Fields &)>
  static RequestLabel lazy(const Fields &fields) {
    static_assert(std::is_trivially_copyable_v<Fields> && sizeof(Fields) <= kRoom);
    RequestLabel label;
    std::memcpy(label.fields_, &fields, sizeof(Fields));
    label.format_ = [](const unsigned char *raw) {
      Fields f;
      std::memcpy(&f, raw, sizeof(Fields));
      return Format(f);
    };
    return label;
  }
  std::string str() const { return format_ ? format_(fields_) : text_; }

 private:
  static constexpr size_t kRoom = 48;
  RequestLabel() = default;
  std::string text_;
  std::string (*format_)(const unsigned char *) = nullptr;
  alignas(8) unsigned char fields_[kRoom] = {};
};

class Request {
 public:
  Request(std::unique_ptr<Schedule> schedule, Deadline deadline, RequestLabel what)
      : schedule_(std::move(schedule)), deadline_(deadline), what_(std::move(what)) {}
  bool complete() const { return complete_.load(std::memory_order_acquire); }
  Status status() const { return status_; }
  std::string what() const { return what_.str(); }
  Schedule &schedule() { return *schedule_; }
  // Called by the engine (mutex held) once the schedule ended or was aborted.
  std::function<void(Status)> on_complete;

 private:
  friend class ProgressEngine;
  std::unique_ptr<Schedule> schedule_;
  Deadline deadline_;
  RequestLabel what_;
  std::atomic<bool> complete_{false};
  bool aborted_ = false;
  uint64_t probe_ns_ = 0;      // when the liveness probe of a timed-out call began
  std::string timeout_what_;   // that call's timeout, reported once the probe ended
  std::string timeout_stall_;  // and what it was stuck on
  Status status_ = kOk;
  std::string detail_;  // the failure's detail, restored as last_error in wait()
};

using RequestPtr = std::shared_ptr<Request>;

class ProgressEngine {
 public:
  explicit ProgressEngine(ProgressSource source, int rank);
  ~ProgressEngine();
  ProgressEngine(const ProgressEngine &) = delete;
  ProgressEngine &operator=(const ProgressEngine &) = delete;

  // Runs first on the progress thread (e.g. to bind it to a core).
  void set_thread_init(std::function<void()> init) { thread_init_ = std::move(init); }
  void start_thread();
  void stop_thread();
  bool thread_running() const { return thread_on_.load(std::memory_order_acquire); }

  // Adds a request and makes a first pass over it; caller_waits: the caller
  // goes straight into wait() (the progress thread need not be woken).
  void submit(const RequestPtr &request, bool caller_waits = false);
  // How long waiters poll before sleeping (QUORUM_SPIN_US; auto from the
  // number of ranks on this host and the cores they can use together). The
  // progress thread polls as long, except, by default, in a process bound to
  // one core (process_cores 1; 0: unknown): there it shares that core with
  // the caller's own work, which its polling would slow down, and it polls
  // at most 10 us.
  void set_spin(int local_ranks, int cores, int process_cores = 0);
  // How long a waiter polls before it sleeps (set_spin's choice).
  uint64_t spin_ns() const { return spin_ns_; }
  // How long the progress thread polls before it sleeps (set_spin's choice).
  uint64_t thread_spin_ns() const { return thread_spin_ns_; }
  // Waits until the request completes or its deadline passes.
  Status wait(const RequestPtr &request);
  // One non-blocking pass; *done tells whether the request completed.
  Status test(const RequestPtr &request, bool *done);

  // One progress pass over the transport and every request (takes the mutex).
  bool progress_once();
  // Pending work that is not a request (e.g. partial activations) registers a
  // poller that runs on every pass with the mutex held.
  using Poller = std::function<bool()>;
  int add_poller(Poller poller);
  void remove_poller(int id);
  // Wakes a sleeping waiter or the thread (new work, shutdown).
  void wake();
  // Asks for a progress pass at `deadline_ns` (now_ns() clock) at the latest:
  // idle waiters and the thread sleep no longer than that. One pass at or
  // after the deadline consumes it, so a poller whose work is still not due
  // asks again from its pass. Does not wake a sleeper (call wake() from
  // outside a pass when the new deadline matters at once).
  void wake_at(uint64_t deadline_ns);
  std::mutex &mutex() { return mutex_; }

  // Fails every active request (dead peer seen by the communicator).
  void abort_all(Status status);
  // abort_all, then progress until every aborted request has completed (its
  // transfers stopped: nothing touches its buffers any more) or the deadline
  // passes. Requests that did not stop by then are leaked, never freed, so
  // that nothing frees what a transfer may still write. Returns how many.
  size_t abort_and_drain(Status status, Deadline deadline);
  size_t active_requests();

 private:
  bool progress_locked();
  // A peer is gone: fails every request still running, naming it.
  void fail_requests_for_dead_peer(int peer);
  // The request is past its deadline: aborts it (its transfers settle while
  // the peers are probed) and notes what it waited for.
  void time_out(Request &req);
  // Once the aborted request settled: false while probe answers may still
  // come; then records its QUORUM_ERR_TIMEOUT naming the ranks waited for
  // and those that did not answer.
  bool report_timeout(Request &req);
  // idle_ns: how long the caller has made no progress (the nap's length on
  // shared-memory waits).
  void sleep_for_events(int max_ms, uint64_t idle_ns);
  void thread_main();

  ProgressSource source_;
  int rank_;
  std::mutex mutex_;
  std::condition_variable done_cv_;
  std::list<RequestPtr> active_;
  std::vector<std::pair<int, Poller>> pollers_;
  int next_poller_id_ = 0;
  int wake_fd_ = -1;
  std::mutex thread_mutex_;  // start_thread / stop_thread
  std::thread thread_;
  std::atomic<bool> thread_on_{false};
  std::function<void()> thread_init_;
  std::atomic<bool> stop_{false};
  std::atomic<int> waiters_{0};
  std::atomic<uint64_t> timer_ns_{0};  // earliest wake_at deadline; 0: none
  uint64_t spin_ns_ = 10000;
  uint64_t thread_spin_ns_ = 10000;
};

}  // namespace quorum
