// schedule.cpp: dependency tracking and execution of a schedule's tasks.
#include "runtime/progress/schedule.hpp"

#include <algorithm>
#include <cstring>

#include <fmt/format.h>

namespace quorum {

TaskId Schedule::add(std::unique_ptr<Task> task, const TaskIds &deps, Join join) {
  TaskId id = static_cast<TaskId>(nodes_.size());
  Node node;
  node.task = std::move(task);
  node.any = join == Join::Any;
  int unfinished = 0;
  bool any_done = false;
  for (TaskId d : deps) {
    if (nodes_[d].done) {
      any_done = true;
    } else {
      ++unfinished;
    }
  }
  node.deps_left = node.any ? (any_done || deps.empty() ? 0 : 1) : unfinished;
  nodes_.push_back(std::move(node));
  for (TaskId d : deps) {
    if (!nodes_[d].done) nodes_[d].successors.push_back(id);
  }
  finished_ = false;
  if (nodes_[id].deps_left == 0) make_ready(id);
  return id;
}

void Schedule::make_ready(TaskId id) {
  Node &n = nodes_[id];
  if (n.ready || n.done) return;
  n.ready = true;
  ready_.push_back(id);
}

void Schedule::finish(TaskId id) {
  Node &n = nodes_[id];
  n.done = true;
  ++done_count_;
  for (TaskId s : n.successors) {
    Node &succ = nodes_[s];
    if (succ.done || succ.ready) continue;
    if (succ.any || --succ.deps_left == 0) {
      succ.deps_left = 0;
      make_ready(s);
    }
  }
}

bool Schedule::progress() {
  if (finished_) return false;
  bool any = false;
  // Tasks made ready while iterating are run in the same pass (index loop).
  for (size_t i = 0; i < ready_.size();) {
    TaskId id = ready_[i];
    Node &n = nodes_[id];
    n.started = true;
    Status st = kOk;
    TaskResult r = n.task->progress(&st);
    if (r == TaskResult::Pending) {
      ++i;
      continue;
    }
    if (r == TaskResult::Failed) {
      abort(st == kOk ? QUORUM_ERR_INTERNAL : st);
      return true;
    }
    any = true;
    ready_[i] = ready_.back();
    ready_.pop_back();
    finish(id);
  }
  if (done_count_ == nodes_.size()) finished_ = true;
  return any;
}

void Schedule::abort(Status status) {
  if (finished_ && status_ != kOk) return;
  status_ = status;
  finished_ = true;
  for (TaskId id : ready_) {
    Node &n = nodes_[id];
    if (n.started && !n.done) n.task->cancel(status);
  }
}

bool Schedule::quiescent() const {
  for (TaskId id : ready_) {
    const Node &n = nodes_[id];
    if (n.started && !n.done && !n.task->quiescent()) return false;
  }
  return true;
}

std::string Schedule::stall_report() const {
  std::string out;
  int shown = 0;
  for (TaskId id : ready_) {
    const Node &n = nodes_[id];
    if (n.done) continue;
    if (shown == 8) {
      out += ", ...";
      break;
    }
    if (!out.empty()) out += ", ";
    out += n.task->describe();
    ++shown;
  }
  return out.empty() ? "nothing in flight" : out;
}

std::vector<int> Schedule::waiting_peers() const {
  std::vector<int> peers;
  for (TaskId id : ready_) {
    const Node &n = nodes_[id];
    int p = n.task->peer();
    if (!n.done && p >= 0 && std::find(peers.begin(), peers.end(), p) == peers.end()) {
      peers.push_back(p);
    }
  }
  std::sort(peers.begin(), peers.end());
  return peers;
}

TaskResult CopyTask::progress(Status *) {
  if (bytes_ > 0 && dst_ != src_) std::memcpy(dst_, src_, bytes_);
  return TaskResult::Done;
}

std::string CopyTask::describe() const {
  return fmt::format("copy {} B", bytes_);
}

}  // namespace quorum
