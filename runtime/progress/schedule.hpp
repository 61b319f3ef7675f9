// schedule.hpp: a collective as a small DAG of resumable tasks.
//
// An algorithm adds tasks (send, recv, reduce, copy, nop, ...) with dependency
// edges; the progress engine calls Schedule::progress() until it is done. A
// task becomes ready when all of its dependencies are done (or, for a task
// added with Join::Any, when any one is). Tasks never block: progress() starts
// or continues work and says whether it is finished.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "runtime/status.hpp"

namespace quorum {

enum class TaskResult { Pending, Done, Failed };

class Task {
 public:
  virtual ~Task() = default;
  // Starts (first call) or continues the task. On Failed, the task has
  // recorded a reason with fail() and sets *status.
  virtual TaskResult progress(Status *status) = 0;
  // The schedule is being aborted (with status `why`, e.g. QUORUM_ERR_TIMEOUT)
  // while this task is in flight: stop, and report from quiescent() when the
  // task no longer touches any buffer.
  virtual void cancel(Status /*why*/) {}
  virtual bool quiescent() const { return true; }
  // For stall reports: what the task waits for, e.g. "recv 4096 B from rank 3".
  virtual std::string describe() const = 0;
  // The peer this task waits on, or -1.
  virtual int peer() const { return -1; }
};

using TaskId = int;

class Schedule {
 public:
  enum class Join { All, Any };

  explicit Schedule(std::string name) : name_(std::move(name)) {}
  Schedule(const Schedule &) = delete;
  Schedule &operator=(const Schedule &) = delete;

  TaskId add(std::unique_ptr<Task> task, const std::vector<TaskId> &deps = {},
             Join join = Join::All);

  // Runs every ready task once; returns true if any task finished.
  bool progress();
  bool done() const { return finished_; }
  Status status() const { return status_; }
  const std::string &name() const { return name_; }
  size_t task_count() const { return nodes_.size(); }

  // Fails the schedule (timeout, dead peer): cancels tasks in flight.
  void abort(Status status);
  // True once no task of an aborted/finished schedule touches buffers.
  bool quiescent() const;
  // Tasks that were started but are not done, described (for timeouts).
  std::string stall_report() const;
  // Peers that started-but-unfinished tasks wait on.
  std::vector<int> waiting_peers() const;

 private:
  struct Node {
    std::unique_ptr<Task> task;
    std::vector<TaskId> successors;
    int deps_left = 0;
    bool any = false;
    bool ready = false;
    bool started = false;
    bool done = false;
  };
  void make_ready(TaskId id);
  void finish(TaskId id);

  std::string name_;
  std::vector<Node> nodes_;
  std::vector<TaskId> ready_;  // ready and not done
  size_t done_count_ = 0;
  bool started_ = false;
  bool finished_ = false;
  Status status_ = kOk;
};

// A task that is done at once (joins and forks dependency edges).
class NopTask : public Task {
 public:
  TaskResult progress(Status *) override { return TaskResult::Done; }
  std::string describe() const override { return "nop"; }
};

// memcpy between host buffers.
class CopyTask : public Task {
 public:
  CopyTask(void *dst, const void *src, size_t bytes) : dst_(dst), src_(src), bytes_(bytes) {}
  TaskResult progress(Status *) override;
  std::string describe() const override;

 private:
  void *dst_;
  const void *src_;
  size_t bytes_;
};

}  // namespace quorum
