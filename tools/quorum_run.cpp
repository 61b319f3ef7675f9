// quorum-run: starts N ranks of a program on this host, like torchrun.
//
//   quorum-run -n N [--timeout S] [--grace S] [--] prog args...
//   quorum-run -n N --nnodes M --node-rank R --rdzv ADDR:PORT [--] prog args...
//
// Across nodes (one quorum-run per node, see quorum_run_nodes.hpp) node 0
// serves the store on ADDR:PORT with the token all nodes share.
//
// It serves a TcpStore on 127.0.0.1 (ephemeral port) with a random job token,
// starts each rank with QUORUM_RANK/QUORUM_SIZE/QUORUM_LOCAL_RANK/
// QUORUM_LOCAL_SIZE/QUORUM_STORE/QUORUM_TOKEN set, and prefixes every line a
// rank prints with "[rank] ". When a rank fails (non-zero exit or a signal) the
// others are sent SIGTERM, then SIGKILL after the grace period, and quorum-run
// exits non-zero naming the rank. SIGINT/SIGTERM/SIGHUP are forwarded to the
// ranks. --timeout S ends the job after S seconds with exit status 124.
// Ranks read stdin from /dev/null, run in their own process groups and get
// SIGKILL when quorum-run dies (parent-death signal), so none is orphaned.
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/random.h>
#include <sys/signalfd.h>
#include <sys/wait.h>
#include <unistd.h>

#include <CLI/CLI.hpp>
#include <cerrno>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <optional>
#include <string>
#include <vector>

#include "runtime/bootstrap/tcp_store.hpp"
#include "runtime/clock.hpp"
#include "runtime/knobs.hpp"
#include "tools/cli_common.hpp"
#include "tools/quorum_run_nodes.hpp"

extern char **environ;

namespace {

using quorum::Clock;

// Output of one rank's stdout or stderr, cut into lines.
struct Stream {
  int fd = -1;     // read end; -1 once closed
  int target = 1;  // where prefixed lines go (our stdout or stderr)
  std::string partial;
};

struct Rank {
  int rank = 0;
  pid_t pid = -1;
  bool running = false;
  int status = 0;
  Clock::time_point stopped_since = Clock::time_point::max();  // max while not stopped
  Stream out, err;
};

constexpr Clock::time_point kNever = Clock::time_point::max();
constexpr size_t kMaxLine = 64 * 1024;  // longer lines are cut so memory stays bounded

int g_output_errno = 0;  // the first failed write of the ranks' output (a full disk)

void write_all(int fd, const std::string &s) {
  size_t off = 0;
  while (off < s.size()) {
    ssize_t n = write(fd, s.data() + off, s.size() - off);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) {  // our own output is gone; keep supervising the ranks
      if (g_output_errno == 0) g_output_errno = n < 0 ? errno : EIO;
      return;
    }
    off += static_cast<size_t>(n);
  }
}

void say(const std::string &text) {
  write_all(2, "quorum-run: " + text + "\n");
}

std::string describe_status(int status) {
  if (WIFEXITED(status)) return "exited with status " + std::to_string(WEXITSTATUS(status));
  if (WIFSIGNALED(status)) {
    int sig = WTERMSIG(status);
    const char *name = sigabbrev_np(sig);
    return "was killed by signal " + std::to_string(sig) +
           (name ? std::string(" (SIG") + name + ")" : "");
  }
  return "ended with wait status " + std::to_string(status);
}

bool failed(int status) {
  return !WIFEXITED(status) || WEXITSTATUS(status) != 0;
}

std::string random_token() {
  unsigned char bytes[16];
  size_t got = 0;
  while (got < sizeof(bytes)) {
    ssize_t n = getrandom(bytes + got, sizeof(bytes) - got, 0);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) break;
    got += static_cast<size_t>(n);
  }
  if (got < sizeof(bytes)) {  // no getrandom: still unique per job, if guessable
    uint64_t t = quorum::now_ns() ^ (static_cast<uint64_t>(getpid()) << 32);
    std::memcpy(bytes, &t, sizeof(t));
  }
  std::string hex;
  for (unsigned char b : bytes) hex += fmt::format("{:02x}", b);
  return hex;
}

// Emits the complete lines in `s.partial` (all of it at EOF) with the prefix.
void emit_lines(Stream &s, int rank, bool at_eof) {
  const std::string prefix = "[" + std::to_string(rank) + "] ";
  size_t start = 0;
  std::string out;
  for (;;) {
    size_t nl = s.partial.find('\n', start);
    if (nl == std::string::npos) break;
    out += prefix;
    out.append(s.partial, start, nl + 1 - start);
    start = nl + 1;
  }
  s.partial.erase(0, start);
  if (!s.partial.empty() && (at_eof || s.partial.size() >= kMaxLine)) {
    out += prefix + s.partial + "\n";
    s.partial.clear();
  }
  if (!out.empty()) write_all(s.target, out);
}

// Reads what is available; closes the stream at EOF.
void pump(Stream &s, int rank) {
  char buf[65536];
  ssize_t n = read(s.fd, buf, sizeof(buf));
  if (n < 0 && (errno == EINTR || errno == EAGAIN)) return;
  if (n <= 0) {
    close(s.fd);
    s.fd = -1;
    emit_lines(s, rank, true);
    return;
  }
  s.partial.append(buf, static_cast<size_t>(n));
  emit_lines(s, rank, false);
}

// In the forked child (async-signal-safe calls only): becomes a rank in its
// own process group, with default signals, stdin from /dev/null and stdout/
// stderr on the pipes, and dies with SIGKILL when quorum-run dies, even by
// SIGKILL, so that no rank outlives its launcher. On a failed exec, errno goes
// back through `exec_fd`.
[[noreturn]] void exec_rank(pid_t launcher, char *const argv[], char *const envp[], int out_fd,
                            int err_fd, int exec_fd) {
  setpgid(0, 0);
  struct sigaction dfl = {};
  dfl.sa_handler = SIG_DFL;
  for (int sig : {SIGINT, SIGTERM, SIGHUP, SIGCHLD, SIGPIPE}) sigaction(sig, &dfl, nullptr);
  sigset_t empty;
  sigemptyset(&empty);
  sigprocmask(SIG_SETMASK, &empty, nullptr);
  int err = 0;
  if (prctl(PR_SET_PDEATHSIG, SIGKILL) != 0) err = errno;
  // quorum-run may have died before the line above: then the signal never comes.
  if (err == 0 && getppid() != launcher) _exit(127);
  if (err == 0) {
    int null_fd = open("/dev/null", O_RDONLY | O_CLOEXEC);
    if (null_fd < 0 || dup2(null_fd, 0) < 0 || dup2(out_fd, 1) < 0 || dup2(err_fd, 2) < 0) {
      err = errno;
    }
  }
  if (err == 0) {
    execvpe(argv[0], argv, envp);
    err = errno;
  }
  ssize_t ignored = write(exec_fd, &err, sizeof(err));
  (void)ignored;
  _exit(127);
}

class Job {
 public:
  // `size` local ranks, global ranks first_rank.. of world_size (0: size).
  Job(int size, double grace_s, int first_rank = 0, int world_size = 0)
      : grace_ms_(static_cast<int64_t>(grace_s * 1000)),
        first_rank_(first_rank),
        world_size_(world_size > 0 ? world_size : size) {
    ranks_.resize(static_cast<size_t>(size));
    for (int r = 0; r < size; ++r) ranks_[static_cast<size_t>(r)].rank = first_rank + r;
  }

  // Starts every rank; false (after stopping those started) if one cannot be.
  bool start(const std::vector<std::string> &command, const std::string &store,
             const std::string &token) {
    for (Rank &r : ranks_) {
      if (!spawn(r, command, store, token)) {
        terminate(SIGKILL);
        return false;
      }
    }
    return true;
  }

  // Supervises until every rank has ended; returns quorum-run's exit status.
  // `job_deadline` is kNever without --timeout.
  int run(int signal_fd, Clock::time_point job_deadline, double timeout_s) {
    while (running_count() > 0) {
      std::vector<pollfd> fds;
      std::vector<Stream *> streams;
      std::vector<int> stream_rank;
      fds.push_back({signal_fd, POLLIN, 0});
      for (Rank &r : ranks_) {
        for (Stream *s : {&r.out, &r.err}) {
          if (s->fd < 0) continue;
          fds.push_back({s->fd, POLLIN, 0});
          streams.push_back(s);
          stream_rank.push_back(r.rank);
        }
      }
      Clock::time_point next = std::min({job_deadline, kill_deadline_, next_stop_deadline()});
      int timeout = -1;
      if (next != kNever) {
        auto ms =
            std::chrono::duration_cast<std::chrono::milliseconds>(next - Clock::now()).count();
        timeout = ms < 0 ? 0 : static_cast<int>(std::min<int64_t>(ms + 1, 1 << 30));
      }
      int n = poll(fds.data(), fds.size(), timeout);
      if (n < 0 && errno != EINTR) {
        say(fmt::format("poll failed: {}", std::strerror(errno)));
        terminate(SIGKILL);
        exit_code_ = 1;
        break;
      }
      if (n > 0 && (fds[0].revents & POLLIN)) handle_signals(signal_fd);
      for (size_t i = 0; i < streams.size(); ++i) {
        if (fds[i + 1].revents & (POLLIN | POLLHUP | POLLERR)) pump(*streams[i], stream_rank[i]);
      }
      reap();
      Clock::time_point now = Clock::now();
      if (now >= job_deadline) {
        job_deadline = kNever;
        say(fmt::format("the job ran past --timeout {} s; terminating {} running rank(s)",
                        timeout_s, running_count()));
        if (!exit_code_) exit_code_ = 124;
        terminate(SIGTERM);
      }
      end_long_stopped_ranks(now);
      if (now >= kill_deadline_) {
        kill_deadline_ = kNever;
        if (running_count() > 0) {
          say(fmt::format("{} rank(s) still running {} ms after SIGTERM; sending SIGKILL",
                          running_count(), grace_ms_));
        }
        signal_all(SIGKILL);
      }
    }
    drain();
    return exit_code_.value_or(0);
  }

 private:
  // --keep-going: when the first stopped rank has to be ended (kNever if none).
  Clock::time_point next_stop_deadline() const {
    Clock::time_point next = kNever;
    if (!keep_going_ || stop_timeout_ms_ <= 0) return next;
    for (const Rank &r : ranks_) {
      if (r.running && r.stopped_since != kNever) {
        next = std::min(next, r.stopped_since + std::chrono::milliseconds(stop_timeout_ms_));
      }
    }
    return next;
  }

  // --keep-going: a rank stopped (SIGSTOP, SIGTSTP...) for longer than
  // QUORUM_TIMEOUT_MS would keep the job alive forever; SIGKILL ends it even
  // while stopped.
  void end_long_stopped_ranks(Clock::time_point now) {
    if (!keep_going_ || stop_timeout_ms_ <= 0) return;
    for (Rank &r : ranks_) {
      if (!r.running || r.stopped_since == kNever) continue;
      if (now < r.stopped_since + std::chrono::milliseconds(stop_timeout_ms_)) continue;
      say(fmt::format("rank {} has been stopped for {} ms (QUORUM_TIMEOUT_MS); killing it", r.rank,
                      stop_timeout_ms_));
      r.stopped_since = kNever;
      if (kill(-r.pid, SIGKILL) != 0) kill(r.pid, SIGKILL);
    }
  }

  bool spawn(Rank &r, const std::vector<std::string> &command, const std::string &store,
             const std::string &token) {
    int out_pipe[2], err_pipe[2];
    if (pipe2(out_pipe, O_CLOEXEC) != 0) return spawn_error(r, "pipe", errno);
    if (pipe2(err_pipe, O_CLOEXEC) != 0) {
      close(out_pipe[0]);
      close(out_pipe[1]);
      return spawn_error(r, "pipe", errno);
    }
    std::vector<std::string> env_text;
    const std::vector<std::string> ours = {
        "QUORUM_RANK=",       "QUORUM_SIZE=",  "QUORUM_LOCAL_RANK=",
        "QUORUM_LOCAL_SIZE=", "QUORUM_STORE=", "QUORUM_TOKEN="};
    for (char **e = environ; *e != nullptr; ++e) {
      std::string v = *e;
      bool skip = v.rfind("PMIX_", 0) == 0;  // an outer launcher's job is not this one
      for (const auto &p : ours) skip = skip || v.rfind(p, 0) == 0;
      if (!skip) env_text.push_back(v);
    }
    env_text.push_back("QUORUM_RANK=" + std::to_string(r.rank));
    env_text.push_back("QUORUM_SIZE=" + std::to_string(world_size_));
    env_text.push_back("QUORUM_LOCAL_RANK=" + std::to_string(r.rank - first_rank_));
    env_text.push_back("QUORUM_LOCAL_SIZE=" + std::to_string(ranks_.size()));
    env_text.push_back("QUORUM_STORE=" + store);
    env_text.push_back("QUORUM_TOKEN=" + token);
    std::vector<char *> envp, argv;
    for (auto &s : env_text) envp.push_back(s.data());
    envp.push_back(nullptr);
    std::vector<std::string> args = command;
    for (auto &s : args) argv.push_back(s.data());
    argv.push_back(nullptr);

    // The child reports a failed exec through this pipe (closed by a good exec).
    int exec_pipe[2];
    if (pipe2(exec_pipe, O_CLOEXEC) != 0) {
      for (int fd : {out_pipe[0], out_pipe[1], err_pipe[0], err_pipe[1]}) close(fd);
      return spawn_error(r, "pipe", errno);
    }
    const pid_t launcher = getpid();
    pid_t pid = fork();
    if (pid == 0)
      exec_rank(launcher, argv.data(), envp.data(), out_pipe[1], err_pipe[1], exec_pipe[1]);
    const int fork_errno = errno;
    close(out_pipe[1]);
    close(err_pipe[1]);
    close(exec_pipe[1]);
    int rc = pid < 0 ? fork_errno : 0;
    if (pid > 0) {
      setpgid(pid, pid);  // also done by the child; whichever runs first wins the race
      int child_errno = 0;
      ssize_t n;
      do n = read(exec_pipe[0], &child_errno, sizeof(child_errno));
      while (n < 0 && errno == EINTR);
      if (n == static_cast<ssize_t>(sizeof(child_errno))) {
        rc = child_errno;
        int status;
        while (waitpid(pid, &status, 0) < 0 && errno == EINTR) {
        }
      }
    }
    close(exec_pipe[0]);
    if (rc != 0) {
      close(out_pipe[0]);
      close(err_pipe[0]);
      return spawn_error(r, ("cannot start '" + command[0] + "'").c_str(), rc);
    }
    r.pid = pid;
    r.running = true;
    r.out = Stream{out_pipe[0], 1, {}};
    r.err = Stream{err_pipe[0], 2, {}};
    return true;
  }

  bool spawn_error(const Rank &r, const char *what, int err) {
    say(fmt::format("rank {}: {}: {}", r.rank, what, std::strerror(err)));
    exit_code_ = 127;
    return false;
  }

  int running_count() const {
    int n = 0;
    for (const Rank &r : ranks_) n += r.running ? 1 : 0;
    return n;
  }

  void signal_all(int sig) {
    for (Rank &r : ranks_) {
      if (!r.running) continue;
      // The whole process group, so that helpers a rank started go too.
      if (kill(-r.pid, sig) != 0) kill(r.pid, sig);
    }
  }

  // SIGTERM (or `sig`) now, SIGKILL after the grace period.
  void terminate(int sig) {
    signal_all(sig);
    if (sig != SIGKILL) signal_all(SIGCONT);  // a stopped rank must run to see the signal
    if (kill_deadline_ == kNever && sig != SIGKILL) {
      kill_deadline_ = Clock::now() + std::chrono::milliseconds(grace_ms_);
    }
  }

  void handle_signals(int signal_fd) {
    signalfd_siginfo info;
    while (read(signal_fd, &info, sizeof(info)) == static_cast<ssize_t>(sizeof(info))) {
      int sig = static_cast<int>(info.ssi_signo);
      if (sig == SIGCHLD) continue;  // reap() runs after every wakeup
      say(fmt::format("received signal {} (SIG{}); forwarding it to the ranks", sig,
                      sigabbrev_np(sig) ? sigabbrev_np(sig) : "?"));
      if (!exit_code_) exit_code_ = 128 + sig;
      terminate(sig);
    }
  }

  void reap() {
    for (;;) {
      int status = 0;
      pid_t pid = waitpid(-1, &status, WNOHANG | WUNTRACED | WCONTINUED);
      if (pid <= 0) return;
      for (Rank &r : ranks_) {
        if (r.pid != pid || !r.running) continue;
        if (WIFSTOPPED(status)) {
          const char *name = sigabbrev_np(WSTOPSIG(status));
          say(fmt::format("rank {} was stopped by signal {} (SIG{})", r.rank, WSTOPSIG(status),
                          name ? name : "?"));
          r.stopped_since = Clock::now();
          break;
        }
        if (WIFCONTINUED(status)) {
          r.stopped_since = kNever;
          break;
        }
        r.running = false;
        r.status = status;
        if (!failed(status)) break;
        if (!exit_code_) {
          // The first failure decides the exit status and ends the job.
          exit_code_ = WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
          if (keep_going_) {
            say(fmt::format("rank {} {}; the other ranks go on (--keep-going)", r.rank,
                            describe_status(status)));
          } else {
            say(fmt::format("rank {} {}; terminating the other ranks", r.rank,
                            describe_status(status)));
            terminate(SIGTERM);
          }
        } else {
          say(fmt::format("rank {} {}", r.rank, describe_status(status)));
        }
        break;
      }
    }
  }

  // After the last rank ended: print what is still in the pipes, without
  // waiting for descendants that may hold them open.
  void drain() {
    for (Rank &r : ranks_) {
      for (Stream *s : {&r.out, &r.err}) {
        while (s->fd >= 0) {
          pollfd pfd{s->fd, POLLIN, 0};
          if (poll(&pfd, 1, 0) <= 0) {
            close(s->fd);
            s->fd = -1;
            emit_lines(*s, r.rank, true);
            break;
          }
          pump(*s, r.rank);
        }
      }
    }
  }

  std::vector<Rank> ranks_;
  int64_t grace_ms_;
  int first_rank_;
  int world_size_;

 public:
  bool keep_going_ = false;  // a failed rank does not end the others
  // QUORUM_TIMEOUT_MS as the ranks see it: how long --keep-going lets a rank
  // stay stopped (its peers have given up on it by then); 0 or less: forever.
  int64_t stop_timeout_ms_ = 60000;

 private:
  Clock::time_point kill_deadline_ = kNever;  // SIGKILL whoever is left at this time
  std::optional<int> exit_code_;
};

}  // namespace

// --timeout and --grace: seconds from 0 to 1e9 (about 31 years), so that
// seconds x 1000 is a valid int64 count of milliseconds and the deadline
// stays on the clock. NaN and infinities are refused.
const CLI::Validator kSeconds(
    [](std::string &text) -> std::string {
      constexpr double kMaxSeconds = 1e9;
      char *end = nullptr;
      const double seconds = std::strtod(text.c_str(), &end);
      if (text.empty() || *end != '\0' || !(seconds >= 0 && seconds <= kMaxSeconds)) {
        return "expected seconds from 0 to 1000000000, got '" + text + "'";
      }
      return std::string();
    },
    "SECONDS", "seconds");

int main(int argc, char **argv) {
  CLI::App app{
      "quorum-run: start N ranks of a program on this host, with a TCP store for "
      "their bootstrap"};
  int size = 0;
  double timeout_s = 0;
  double grace_s = 5;
  app.add_option("-n,--np", size, "Number of ranks")->required()->check(CLI::Range(1, 4096));
  app.add_option("--timeout", timeout_s,
                 "Terminate the job after this many seconds (exit 124); 0 to 1e9")
      ->check(kSeconds);
  app.add_option("--grace", grace_s,
                 "Seconds between SIGTERM and SIGKILL when ending ranks; 0 to 1e9")
      ->check(kSeconds);
  bool keep_going = false;
  app.add_flag("--keep-going", keep_going,
               "When a rank fails, let the others run on (each bounded by its own "
               "QUORUM_TIMEOUT_MS) so that they can report the failure; the exit status is "
               "still the first failing rank's. A rank stopped (SIGSTOP) for QUORUM_TIMEOUT_MS "
               "is killed");
  quorum_run::NodeOptions node_options;
  quorum_run::add_node_options(app, &node_options);
  app.prefix_command();  // everything from the program name on belongs to it
  app.footer(
      "Usage: quorum-run -n N [--timeout S] [--grace S] [--] prog args...\n"
      "Example: quorum-run -n 4 -- ./my_program --steps 10\n"
      "Across 2 nodes (on node R of 0, 1; the same token on both):\n"
      "  QUORUM_RDZV_TOKEN=... quorum-run -n 4 --nnodes 2 --node-rank R --rdzv node0:29500 "
      "-- ./my_program");
  quorum_tools::add_version_flag(app, "quorum-run");
  QUORUM_TOOL_PARSE(app, argc, argv);
  std::vector<std::string> command = app.remaining();
  if (!command.empty() && command.front() == "--") command.erase(command.begin());
  if (command.empty()) {
    say("no program given (usage: quorum-run -n N [--timeout S] [--] prog args...)");
    return 2;
  }

  // Signals arrive through a signalfd; block them before any thread exists.
  sigset_t mask;
  sigemptyset(&mask);
  for (int sig : {SIGINT, SIGTERM, SIGHUP, SIGCHLD}) sigaddset(&mask, sig);
  sigprocmask(SIG_BLOCK, &mask, nullptr);
  signal(SIGPIPE, SIG_IGN);
  int signal_fd = signalfd(-1, &mask, SFD_CLOEXEC | SFD_NONBLOCK);
  if (signal_fd < 0) {
    say(fmt::format("signalfd: {}", std::strerror(errno)));
    return 1;
  }

  quorum_run::Rendezvous rdzv;
  std::string rdzv_error;
  if (!quorum_run::plan_rendezvous(node_options, size, &rdzv, &rdzv_error)) {
    say(rdzv_error);
    return 2;
  }
  const std::string token = rdzv.token.empty() ? random_token() : rdzv.token;
  std::unique_ptr<quorum::TcpStoreServer> server;
  if (rdzv.serve) {
    quorum::TcpStoreServer::Options options;
    options.address = rdzv.bind_address;
    options.token = token;
    if (quorum::TcpStoreServer::start(options, &server) != quorum::kOk) {
      say(fmt::format("cannot start the store: {}", quorum::last_error()));
      return 1;
    }
  }
  const std::string store_address = server ? server->address() : rdzv.store_address;

  Clock::time_point deadline = kNever;
  if (timeout_s > 0) {
    deadline = Clock::now() + std::chrono::milliseconds(static_cast<int64_t>(timeout_s * 1000));
  }
  Job job(size, grace_s, rdzv.first_rank, rdzv.world_size);
  job.keep_going_ = keep_going;
  job.stop_timeout_ms_ = std::clamp<int64_t>(quorum::knob_timeout_ms.get(), 0, int64_t{1} << 40);
  if (!job.start(command, store_address, token)) {
    job.run(signal_fd, kNever, 0);
    return 127;
  }
  int code = job.run(signal_fd, deadline, timeout_s);
  if (server) server->stop();
  close(signal_fd);
  if (g_output_errno != 0 && code == 0) {  // the job's output was lost: not a success
    say(fmt::format("cannot write the ranks' output: {}", std::strerror(g_output_errno)));
    code = 1;
  }
  return code;
}
