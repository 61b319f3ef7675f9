// schedule.hpp: a collective as a small DAG of resumable tasks.
//
// An algorithm adds tasks (send, recv, reduce, copy, nop, ...) with dependency
// edges; the progress engine calls Schedule::progress() until it is done. A
// task becomes ready when all of its dependencies are done (or, for a task
// added with Join::Any, when any one is). Tasks never block: progress() starts
// or continues work and says whether it is finished.
#pragma once

#include <cstdint>
#include <initializer_list>
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

// A short list of task ids (dependencies, successors). Most tasks have one or
// two, kept inline, so that building a schedule allocates little; a longer
// list moves to the heap.
class TaskIds {
 public:
  TaskIds() = default;
  TaskIds(std::initializer_list<TaskId> ids) {
    for (TaskId id : ids) push_back(id);
  }
  TaskIds(const std::vector<TaskId> &ids) {  // NOLINT: implicit, like the braces
    for (TaskId id : ids) push_back(id);
  }
  void push_back(TaskId id) {
    if (heap_.empty() && size_ < kInline) {
      inline_[size_++] = id;
      return;
    }
    if (heap_.empty()) heap_.assign(inline_, inline_ + size_);
    heap_.push_back(id);
    ++size_;
  }
  size_t size() const { return size_; }
  bool empty() const { return size_ == 0; }
  const TaskId *begin() const { return heap_.empty() ? inline_ : heap_.data(); }
  const TaskId *end() const { return begin() + size_; }
  TaskId back() const { return begin()[size_ - 1]; }

 private:
  static constexpr size_t kInline = 4;
  TaskId inline_[kInline] = {};
  size_t size_ = 0;
  std::vector<TaskId> heap_;
};

class Schedule {
 public:
  enum class Join { All, Any };

  explicit Schedule(std::string name) : name_(std::move(name)) {
    nodes_.reserve(kTypicalTasks);
    ready_.reserve(kTypicalTasks);
  }
  Schedule(const Schedule &) = delete;
  Schedule &operator=(const Schedule &) = delete;

  TaskId add(std::unique_ptr<Task> task, const TaskIds &deps = {}, Join join = Join::All);

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
  // Room reserved up front: a small collective's schedule never grows.
  static constexpr size_t kTypicalTasks = 16;
  struct Node {
    std::unique_ptr<Task> task;
    TaskIds successors;
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
