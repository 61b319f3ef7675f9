// schedule_test.cpp: dependency handling of Schedule (All and Any joins,
// failures, abort with tasks in flight) and the ProgressEngine's deadlines
// and its waits on shared-memory flags (naps that grow, no spin after a nap).
#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <string>
#include <thread>
#include <vector>

#include "runtime/knobs.hpp"
#include "runtime/progress/engine.hpp"
#include "runtime/progress/schedule.hpp"

namespace quorum {
namespace {

// Finishes after `polls` calls, recording the order in which tasks finished.
class CountdownTask : public Task {
 public:
  CountdownTask(int polls, std::vector<int> *order, int id, bool fails = false)
      : polls_(polls), order_(order), id_(id), fails_(fails) {}
  TaskResult progress(Status *status) override {
    if (--polls_ > 0) return TaskResult::Pending;
    if (fails_) {
      *status = fail(QUORUM_ERR_TRANSPORT, "test", "task {} failed", id_);
      return TaskResult::Failed;
    }
    order_->push_back(id_);
    return TaskResult::Done;
  }
  void cancel(Status /*why*/) override { cancelled_ = true; }
  std::string describe() const override { return "countdown " + std::to_string(id_); }
  int peer() const override { return id_; }
  bool cancelled_ = false;

 private:
  int polls_;
  std::vector<int> *order_;
  int id_;
  bool fails_;
};

TEST(Schedule, RunsTasksAfterAllTheirDependencies) {
  std::vector<int> order;
  Schedule s("test");
  TaskId a = s.add(std::make_unique<CountdownTask>(3, &order, 0));
  TaskId b = s.add(std::make_unique<CountdownTask>(1, &order, 1));
  s.add(std::make_unique<CountdownTask>(1, &order, 2), {a, b});
  int passes = 0;
  while (!s.done() && passes < 100) {
    s.progress();
    ++passes;
  }
  ASSERT_TRUE(s.done());
  EXPECT_EQ(s.status(), QUORUM_OK);
  EXPECT_EQ(order, (std::vector<int>{1, 0, 2}));
}

TEST(Schedule, AnyJoinStartsAfterTheFirstDependency) {
  std::vector<int> order;
  Schedule s("test");
  TaskId slow = s.add(std::make_unique<CountdownTask>(50, &order, 0));
  TaskId fast = s.add(std::make_unique<CountdownTask>(2, &order, 1));
  s.add(std::make_unique<CountdownTask>(1, &order, 2), {slow, fast}, Schedule::Join::Any);
  while (!s.done()) s.progress();
  EXPECT_EQ(order, (std::vector<int>{1, 2, 0}));
}

TEST(Schedule, DependencyAlreadyDoneCounts) {
  std::vector<int> order;
  Schedule s("test");
  TaskId a = s.add(std::make_unique<NopTask>());
  s.progress();
  s.add(std::make_unique<CountdownTask>(1, &order, 7), {a});
  while (!s.done()) s.progress();
  EXPECT_EQ(order, (std::vector<int>{7}));
}

TEST(Schedule, FailureAbortsAndCancelsTasksInFlight) {
  std::vector<int> order;
  Schedule s("test");
  auto *inflight = new CountdownTask(1000, &order, 5);
  s.add(std::unique_ptr<Task>(inflight));
  TaskId bad = s.add(std::make_unique<CountdownTask>(2, &order, 6, true));
  s.add(std::make_unique<CountdownTask>(1, &order, 7), {bad});
  while (!s.done()) s.progress();
  EXPECT_EQ(s.status(), QUORUM_ERR_TRANSPORT);
  EXPECT_TRUE(inflight->cancelled_);
  EXPECT_TRUE(order.empty());
}

TEST(Schedule, StallReportNamesWaitingTasks) {
  std::vector<int> order;
  Schedule s("test");
  s.add(std::make_unique<CountdownTask>(1000, &order, 3));
  s.progress();
  EXPECT_NE(s.stall_report().find("countdown 3"), std::string::npos);
  EXPECT_EQ(s.waiting_peers(), (std::vector<int>{3}));
}

TEST(ProgressEngine, RequestTimesOutWithReport) {
  ProgressEngine engine(ProgressSource{}, 0);
  std::vector<int> order;
  auto sched = std::make_unique<Schedule>("stuck");
  sched->add(std::make_unique<CountdownTask>(1 << 30, &order, 4));
  auto req = std::make_shared<Request>(std::move(sched), Deadline::after_ms(50), "stuck op");
  engine.submit(req);
  EXPECT_EQ(engine.wait(req), QUORUM_ERR_TIMEOUT);
  std::string e = last_error();
  EXPECT_NE(e.find("stuck op"), std::string::npos) << e;
  EXPECT_NE(e.find("[4]"), std::string::npos) << e;
  EXPECT_NE(e.find("countdown 4"), std::string::npos) << e;
}

TEST(ProgressEngine, ThreadCompletesRequestsWithoutWaiters) {
  ProgressEngine engine(ProgressSource{}, 0);
  engine.start_thread();
  std::vector<int> order;
  auto sched = std::make_unique<Schedule>("bg");
  sched->add(std::make_unique<CountdownTask>(20, &order, 1));
  auto req = std::make_shared<Request>(std::move(sched), Deadline::after_ms(5000), "bg op");
  engine.submit(req);
  Deadline d = Deadline::after_ms(5000);
  while (!req->complete() && !d.expired())
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  EXPECT_TRUE(req->complete());
  EXPECT_EQ(req->status(), QUORUM_OK);
  engine.stop_thread();
}

TEST(Knobs, ParsesOverridesAndReportsBadValues) {
  KnobBase *k = find_knob("QUORUM_TIMEOUT_MS");
  ASSERT_NE(k, nullptr);
  k->set_override(std::string("1234"));
  EXPECT_EQ(knob_timeout_ms.get(), 1234);
  EXPECT_EQ(k->source(), KnobSource::Override);
  k->set_override(std::string("12x"));
  EXPECT_EQ(knob_timeout_ms.get(), 60000);
  EXPECT_NE(k->error().find("QUORUM_TIMEOUT_MS='12x'"), std::string::npos) << k->error();
  EXPECT_EQ(validate_knobs(), QUORUM_ERR_INVALID_ARG);
  k->set_override(std::nullopt);
  EXPECT_EQ(validate_knobs(), QUORUM_OK);
  KnobBase *pt = find_knob("QUORUM_PROGRESS_THREAD");
  ASSERT_NE(pt, nullptr);
  pt->set_override(std::string("sometimes"));
  EXPECT_NE(pt->error().find("expected one of auto on off"), std::string::npos) << pt->error();
  pt->set_override(std::nullopt);
}

TEST(ProgressEngine, MemoryNapsGrowWithTheWaitUpToTheCap) {
  EXPECT_EQ(memory_nap_us(0, 20, 1000), 20);
  EXPECT_EQ(memory_nap_us(160000, 20, 1000), 20);    // 160 us stalled: still the first nap
  EXPECT_EQ(memory_nap_us(1600000, 20, 1000), 100);  // 1.6 ms: 1/16 of it
  EXPECT_EQ(memory_nap_us(200000000, 20, 1000), 1000);
  EXPECT_EQ(memory_nap_us(200000000, 20, 5), 20);  // a cap below the first nap: the first
  EXPECT_EQ(memory_nap_us(0, 0, 1000), 1);         // at least 1 us
}

// Waits on a flag another thread sets, as an shm allreduce waits on a late
// peer's flags (holding a MemoryWaitGuard while pending); counts its polls.
class FlagTask : public Task {
 public:
  FlagTask(const std::atomic<int> *flag, std::atomic<int> *polls) : flag_(flag), polls_(polls) {}
  TaskResult progress(Status * /*status*/) override {
    polls_->fetch_add(1);
    if (flag_->load(std::memory_order_acquire) != 0) {
      waiting_.release();
      return TaskResult::Done;
    }
    waiting_.acquire();
    return TaskResult::Pending;
  }
  void cancel(Status /*why*/) override { waiting_.release(); }
  std::string describe() const override { return "flag"; }
  int peer() const override { return 1; }

 private:
  const std::atomic<int> *flag_;
  std::atomic<int> *polls_;
  MemoryWaitGuard waiting_;
};

TEST(ProgressEngine, SpinFollowsTheCoresOfTheRanksAndOfTheProcess) {
  ProgressEngine engine(ProgressSource{}, 0);
  engine.set_spin(2, 2);  // a core per rank: poll long
  EXPECT_EQ(engine.spin_ns(), 200000u);
  EXPECT_EQ(engine.thread_spin_ns(), 200000u);
  engine.set_spin(2, 2, 1);  // bound core per rank: the thread shares the caller's core
  EXPECT_EQ(engine.spin_ns(), 200000u);
  EXPECT_EQ(engine.thread_spin_ns(), 10000u);
  engine.set_spin(4, 2, 2);  // ranks share cores: poll briefly
  EXPECT_EQ(engine.spin_ns(), 10000u);
  EXPECT_EQ(engine.thread_spin_ns(), 10000u);
  engine.set_spin(2, 0);  // unknown cores: as shared
  EXPECT_EQ(engine.spin_ns(), 10000u);
}

TEST(ProgressEngine, WaitOnMemoryFlagsNapsInsteadOfPolling) {
  // A peer 40 ms late: the waiter polls for its spin, then naps (longer and
  // longer) without spinning again after each nap. Polling throughout would
  // take tens of thousands of passes; napping takes a few hundred at most.
  ProgressEngine engine(ProgressSource{}, 0);
  engine.set_spin(2, 2);
  std::atomic<int> flag{0}, polls{0};
  auto sched = std::make_unique<Schedule>("flag wait");
  sched->add(std::make_unique<FlagTask>(&flag, &polls));
  auto req = std::make_shared<Request>(std::move(sched), Deadline::after_ms(10000), "flag op");
  engine.submit(req, true);
  std::thread late([&] {
    std::this_thread::sleep_for(std::chrono::milliseconds(40));
    flag.store(1, std::memory_order_release);
  });
  EXPECT_EQ(engine.wait(req), QUORUM_OK);
  late.join();
  EXPECT_TRUE(req->complete());
  EXPECT_EQ(MemoryWaitGuard::count().load(), 0);
  EXPECT_LT(polls.load(), 5000) << "the waiter polled instead of napping";
}

TEST(ProgressEngine, WaitOnMemoryFlagsStillTimesOut) {
  ProgressEngine engine(ProgressSource{}, 0);
  std::atomic<int> flag{0}, polls{0};
  auto sched = std::make_unique<Schedule>("stuck flag");
  sched->add(std::make_unique<FlagTask>(&flag, &polls));
  auto req = std::make_shared<Request>(std::move(sched), Deadline::after_ms(50), "stuck flag op");
  engine.submit(req, true);
  EXPECT_EQ(engine.wait(req), QUORUM_ERR_TIMEOUT);
  const std::string e = last_error();
  EXPECT_NE(e.find("stuck flag op"), std::string::npos) << e;
  EXPECT_EQ(MemoryWaitGuard::count().load(), 0);
}

}  // namespace
}  // namespace quorum
