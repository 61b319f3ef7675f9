// checkpoint_test.cpp: checkpoints round-trip, are written atomically, reject
// corrupt files and mismatched runs, and a run stopped and resumed ends
// bit-identical to one never interrupted. Also: the trainer learns the
// synthetic set.
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/stat.h>
#include <unistd.h>
#include <zlib.h>

#include <chrono>
#include <cstring>
#include <fstream>
#include <string>
#include <utility>

#include "tests/trainer/train_fixture.hpp"
#include "trainer/checkpoint.hpp"
#include "trainer/model.hpp"
#include "trainer/stop_signal.hpp"
#include "trainer/trainer.hpp"

namespace quorum::trainer {
namespace {

TrainingState sample_state() {
  TrainingState s;
  s.model = "fm-s";
  s.seed = 9, s.batch = 32, s.world = 1, s.global_step = 17, s.epoch = 1, s.step_in_epoch = 3;
  s.data = "synthetic", s.train_count = 448, s.steps_per_epoch = 14;
  s.epoch_loss_sum = 12.5, s.epoch_correct = 40, s.epoch_images = 96;
  s.train_seconds = 7.25;
  for (int i = 0; i < 1000; ++i) {
    s.params.push_back(float(i) * 0.5f - 3.f);
    s.momentum.push_back(float(i) * -0.25f);
  }
  return s;
}

TEST(Checkpoint, RoundTripAtomic) {
  TempDir d;
  const std::string path = d.file("ckpt");
  TrainingState a = sample_state(), b;
  ASSERT_EQ(save_checkpoint(path, a), kOk) << last_error();
  EXPECT_EQ(d.entries(), 1) << "temporary file left behind";
  ASSERT_EQ(load_checkpoint(path, &b), kOk) << last_error();
  EXPECT_EQ(b.model, a.model);
  EXPECT_EQ(b.seed, a.seed);
  EXPECT_EQ(b.global_step, a.global_step);
  EXPECT_EQ(b.step_in_epoch, a.step_in_epoch);
  EXPECT_EQ(b.data, a.data);
  EXPECT_EQ(b.train_count, a.train_count);
  EXPECT_EQ(b.steps_per_epoch, a.steps_per_epoch);
  EXPECT_EQ(b.epoch_loss_sum, a.epoch_loss_sum);
  EXPECT_EQ(b.params, a.params);
  EXPECT_EQ(b.momentum, a.momentum);
  EXPECT_EQ(b.train_seconds, a.train_seconds);
  // Overwriting replaces the file whole.
  a.step_in_epoch = 4, a.global_step = 18;
  ASSERT_EQ(save_checkpoint(path, a), kOk);
  ASSERT_EQ(load_checkpoint(path, &b), kOk);
  EXPECT_EQ(b.global_step, 18);
}

// The bytes of sample_state() saved as a checkpoint at path.
std::string saved_sample_bytes(const std::string &path) {
  EXPECT_EQ(save_checkpoint(path, sample_state()), kOk);
  std::ifstream f(path, std::ios::binary);
  return {std::istreambuf_iterator<char>(f), {}};
}

TEST(Checkpoint, RejectsCorruptTruncatedAndForeignFiles) {
  TempDir d;
  const std::string path = d.file("ckpt");
  std::string bytes = saved_sample_bytes(path);
  ASSERT_FALSE(bytes.empty());
  TrainingState s;
  auto expect_rejected = [&](const std::string &content, const char *why) {
    std::ofstream(path, std::ios::binary) << content;
    ASSERT_NE(load_checkpoint(path, &s), kOk) << why;
    EXPECT_NE(std::string(last_error()).find(path), std::string::npos) << last_error();
  };
  std::string flipped = bytes;
  flipped[bytes.size() / 2] ^= 1;
  expect_rejected(flipped, "one flipped bit");
  expect_rejected(bytes.substr(0, bytes.size() - 9), "truncated");
  expect_rejected("hello, not a checkpoint", "foreign file");
  ASSERT_NE(load_checkpoint(d.file("missing"), &s), kOk);
  EXPECT_NE(std::string(last_error()).find("missing"), std::string::npos);
  ASSERT_NE(save_checkpoint(d.file("no/such/dir/ckpt"), sample_state()), kOk);
}

// The path is tried before training: a missing folder or a folder as the
// name fails then, naming the flag and the path; a good one is left empty.
TEST(Checkpoint, PathCheckedUpFront) {
  TempDir d;
  EXPECT_EQ(check_checkpoint_path(d.file("ckpt")), kOk) << last_error();
  EXPECT_EQ(d.entries(), 0) << "the trial file was left behind";
  ASSERT_EQ(check_checkpoint_path(d.file("no/such/ckpt")), QUORUM_ERR_INVALID_ARG);
  EXPECT_NE(std::string(last_error()).find("--checkpoint " + d.file("no/such/ckpt")),
            std::string::npos)
      << last_error();
  ASSERT_EQ(check_checkpoint_path(d.file("")), QUORUM_ERR_INVALID_ARG);
  EXPECT_NE(std::string(last_error()).find("is a folder"), std::string::npos) << last_error();
}

// Only regular files are written: a FIFO (or a device) at the path is refused,
// not replaced; and reading one fails at once instead of waiting for a writer
// or reading forever.
TEST(Checkpoint, OnlyRegularFiles) {
  TempDir d;
  const std::string fifo = d.file("fifo");
  ASSERT_EQ(mkfifo(fifo.c_str(), 0600), 0);
  ASSERT_EQ(save_checkpoint(fifo, sample_state()), QUORUM_ERR_INVALID_ARG);
  EXPECT_NE(std::string(last_error()).find("is a FIFO"), std::string::npos) << last_error();
  ASSERT_EQ(check_checkpoint_path(fifo), QUORUM_ERR_INVALID_ARG);
  struct stat st {};
  ASSERT_EQ(stat(fifo.c_str(), &st), 0);
  EXPECT_TRUE(S_ISFIFO(st.st_mode)) << "the FIFO was replaced";
  EXPECT_EQ(d.entries(), 1) << "a temporary file was left behind";
  // A device is refused up front (nothing is created next to it either).
  ASSERT_EQ(check_checkpoint_path("/dev/null"), QUORUM_ERR_INVALID_ARG);
  EXPECT_NE(std::string(last_error()).find("is a device"), std::string::npos) << last_error();
  const auto start = std::chrono::steady_clock::now();
  TrainingState s;
  for (const std::string &endless : {fifo, std::string("/dev/zero")}) {
    ASSERT_EQ(load_checkpoint(endless, &s), QUORUM_ERR_INVALID_ARG) << endless;
    EXPECT_NE(std::string(last_error()).find("not a regular file"), std::string::npos)
        << last_error();
  }
  EXPECT_LT(std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count(), 10.0);
}

// A link planted at the temporary file's name is not written through: the
// file it points to keeps its content and the checkpoint is still written.
TEST(Checkpoint, TemporaryFileDoesNotFollowLinks) {
  TempDir d;
  const std::string path = d.file("ckpt"), victim = d.file("victim");
  std::ofstream(victim) << "precious";
  const std::string tmp = path + ".tmp." + std::to_string(getpid());
  ASSERT_EQ(symlink(victim.c_str(), tmp.c_str()), 0);
  ASSERT_EQ(save_checkpoint(path, sample_state()), kOk) << last_error();
  std::ifstream f(victim);
  std::string content((std::istreambuf_iterator<char>(f)), {});
  EXPECT_EQ(content, "precious");
  TrainingState s;
  EXPECT_EQ(load_checkpoint(path, &s), kOk) << last_error();
  EXPECT_EQ(d.entries(), 2) << "the link or a temporary file was left behind";
}

// A position no run reaches (a step past its epoch's end, a global step off
// the epoch's) would resume at the wrong data, or never end its epoch.
TEST(Checkpoint, RejectsImpossiblePositions) {
  TempDir d;
  const std::string path = d.file("ckpt");
  auto expect_rejected = [&](void (*change)(TrainingState *), const char *what) {
    TrainingState s = sample_state(), back;
    change(&s);
    ASSERT_EQ(save_checkpoint(path, s), kOk) << last_error();
    ASSERT_EQ(load_checkpoint(path, &back), QUORUM_ERR_INVALID_ARG) << what;
    EXPECT_NE(std::string(last_error()).find("impossible training state"), std::string::npos)
        << what << ": " << last_error();
  };
  expect_rejected([](TrainingState *s) { s->step_in_epoch = 14, s->global_step = 28; },
                  "step at the epoch's end");
  expect_rejected([](TrainingState *s) { s->step_in_epoch = -1, s->global_step = 13; },
                  "negative step");
  expect_rejected([](TrainingState *s) { s->global_step = 18; }, "global step off");
  expect_rejected([](TrainingState *s) { s->epoch = -1, s->global_step = -11; }, "negative epoch");
  expect_rejected([](TrainingState *s) { s->steps_per_epoch = 0; }, "no steps per epoch");
  expect_rejected([](TrainingState *s) { s->epoch_correct = 97; }, "more correct than seen");
  expect_rejected([](TrainingState *s) { s->train_seconds = -1; }, "negative training time");
  expect_rejected([](TrainingState *s) { s->train_seconds = std::nan(""); }, "NaN training time");
}

// `bytes` with its version set to `version` and the CRC computed again.
void set_version(std::string *bytes, uint32_t version) {
  std::memcpy(bytes->data() + 8, &version, 4);  // after the magic
  const uint32_t crc =
      uint32_t(crc32(0L, reinterpret_cast<const Bytef *>(bytes->data()), uInt(bytes->size() - 4)));
  std::memcpy(bytes->data() + bytes->size() - 4, &crc, 4);
}

// `n` bytes removed just before the CRC: each format version appended its
// field there, so this gives the file an older version wrote.
std::string without_last_field(const std::string &bytes, size_t n) {
  return bytes.substr(0, bytes.size() - 4 - n) + bytes.substr(bytes.size() - 4);
}

// Versions 2 and 3 had no training time: they are read as 0 s, all else
// as written; version 4 no epoch start nor policy state (a run of one batch);
// a version from a newer build is refused.
TEST(Checkpoint, ReadsOlderVersionsWithoutTrainingTime) {
  TempDir d;
  const std::string path = d.file("ckpt");
  const std::string v5 = saved_sample_bytes(path);
  ASSERT_GT(v5.size(), 32u);
  const TrainingState want = sample_state();
  // No epoch start step nor (empty) policy state.
  std::string v4 = without_last_field(v5, sizeof(int64_t) + sizeof(uint32_t));
  set_version(&v4, 4);
  std::string v3 = without_last_field(v4, sizeof(double));  // no train_seconds
  set_version(&v3, 3);
  std::string v2 = without_last_field(v3, sizeof(uint64_t));  // nor the (empty) moving average
  set_version(&v2, 2);
  for (const auto &[version, bytes] : {std::pair{4, v4}, std::pair{3, v3}, std::pair{2, v2}}) {
    std::ofstream(path, std::ios::binary | std::ios::trunc) << bytes;
    TrainingState s;
    s.train_seconds = 99;
    s.policy_state = "stale";
    ASSERT_EQ(load_checkpoint(path, &s), kOk) << "version " << version << ": " << last_error();
    EXPECT_EQ(s.train_seconds, version >= 4 ? want.train_seconds : 0.0) << "version " << version;
    EXPECT_EQ(s.global_step, want.global_step) << "version " << version;
    EXPECT_EQ(s.epoch_start_step, want.epoch * want.steps_per_epoch) << "version " << version;
    EXPECT_TRUE(s.policy_state.empty()) << "version " << version;
    EXPECT_EQ(s.params, want.params) << "version " << version;
    EXPECT_EQ(s.momentum, want.momentum) << "version " << version;
    EXPECT_TRUE(s.ema.empty()) << "version " << version;
  }
  // A version 3 file that still holds the 8 bytes is malformed, not misread.
  std::string long_v3 = v4;
  set_version(&long_v3, 3);
  std::ofstream(path, std::ios::binary | std::ios::trunc) << long_v3;
  TrainingState s;
  ASSERT_EQ(load_checkpoint(path, &s), QUORUM_ERR_INVALID_ARG);
  EXPECT_NE(std::string(last_error()).find("malformed"), std::string::npos) << last_error();
  std::string v6 = v5;
  set_version(&v6, 6);
  std::ofstream(path, std::ios::binary | std::ios::trunc) << v6;
  ASSERT_EQ(load_checkpoint(path, &s), QUORUM_ERR_INVALID_ARG);
  EXPECT_NE(std::string(last_error()).find("reads versions 2 to 5"), std::string::npos)
      << last_error();
}

// A batch policy's run (version 5): epochs of other batches before this one,
// and the policy's state, read back as written; a position the epoch start
// does not explain is refused.
TEST(Checkpoint, KeepsTheBatchPolicysState) {
  TempDir d;
  const std::string path = d.file("ckpt");
  TrainingState s = sample_state();
  s.epoch_start_step = s.epoch * s.steps_per_epoch + 5;  // an earlier epoch had more steps
  s.global_step = s.epoch_start_step + s.step_in_epoch;
  s.policy_state = std::string("policy\nstate ") + std::string(600, 'x');
  ASSERT_EQ(save_checkpoint(path, s), kOk) << last_error();
  TrainingState back;
  ASSERT_EQ(load_checkpoint(path, &back), kOk) << last_error();
  EXPECT_EQ(back.policy_state, s.policy_state);
  EXPECT_EQ(back.epoch_start_step, s.epoch_start_step);
  EXPECT_EQ(back.global_step, s.global_step);
  s.global_step += 1;
  ASSERT_EQ(save_checkpoint(path, s), kOk);
  EXPECT_EQ(load_checkpoint(path, &back), QUORUM_ERR_INVALID_ARG);
  EXPECT_NE(std::string(last_error()).find("impossible training state"), std::string::npos)
      << last_error();
}

// Version 1 did not record the data: it is refused with the reason.
TEST(Checkpoint, RefusesTheOlderFormat) {
  TempDir d;
  const std::string path = d.file("ckpt");
  std::string bytes = saved_sample_bytes(path);
  ASSERT_FALSE(bytes.empty());
  bytes[8] = 1;  // the version, after the magic; then a valid CRC again
  const uint32_t crc =
      uint32_t(crc32(0L, reinterpret_cast<const Bytef *>(bytes.data()), uInt(bytes.size() - 4)));
  std::memcpy(bytes.data() + bytes.size() - 4, &crc, 4);
  std::ofstream(path, std::ios::binary) << bytes;
  TrainingState s;
  ASSERT_EQ(load_checkpoint(path, &s), QUORUM_ERR_INVALID_ARG);
  EXPECT_NE(std::string(last_error()).find("version 1"), std::string::npos) << last_error();
  EXPECT_NE(std::string(last_error()).find("start the run afresh"), std::string::npos);
}

TEST_F(Training, LearnsTheSyntheticSet) {
  TrainResult r = run(cfg_);
  EXPECT_EQ(r.global_step, 48);
  EXPECT_GT(r.last.test_accuracy, 0.9);
  EXPECT_EQ(r.last.param_crc32, params_crc32(r.params));
}

TEST_F(Training, ResumeIsBitIdentical) {
  TempDir d;
  const TrainResult whole = run(cfg_);
  // Stop mid-epoch 2 (step 21), with extra mid-epoch checkpoints, then resume.
  TrainConfig first = cfg_;
  first.max_steps = 21;
  first.checkpoint_path = d.file("ckpt");
  first.checkpoint_every = 5;
  const TrainResult part = run(first);
  EXPECT_EQ(part.global_step, 21);
  EXPECT_FALSE(part.last.complete);
  TrainConfig second = cfg_;
  second.resume_path = d.file("ckpt");
  second.checkpoint_path = d.file("ckpt");
  const TrainResult rest = run(second);
  EXPECT_EQ(rest.global_step, 48);
  ASSERT_EQ(rest.params.size(), whole.params.size());
  EXPECT_EQ(
      0, std::memcmp(rest.params.data(), whole.params.data(), whole.params.size() * sizeof(float)))
      << "resumed parameters differ from the uninterrupted run";
  EXPECT_EQ(rest.last.param_crc32, whole.last.param_crc32);
  EXPECT_EQ(rest.last.train_loss, whole.last.train_loss);
  EXPECT_EQ(rest.last.test_accuracy, whole.last.test_accuracy);
  EXPECT_EQ(d.entries(), 1);
}

// SIGINT/SIGTERM as stop_signal.hpp records them: the run stops at the next
// step boundary with its checkpoint written, and resuming it ends bit for bit
// where the uninterrupted run does.
class StopAtStep : public TrainObserver {
 public:
  explicit StopAtStep(int64_t step) : step_(step) {}
  void on_step(const StepProgress &p) override {
    if (p.global_step == step_) request_stop(SIGTERM);
  }

 private:
  int64_t step_;
};

TEST_F(Training, StopSignalSavesAResumableCheckpoint) {
  TempDir d;
  const TrainResult whole = run(cfg_);
  TrainConfig first = cfg_;
  first.checkpoint_path = d.file("ckpt");
  StopAtStep stop(19);
  TrainResult part;
  ASSERT_EQ(try_run(first, &part, &stop), kOk) << last_error();
  request_stop(0);
  EXPECT_EQ(part.stopped_by_signal, SIGTERM);
  EXPECT_EQ(part.global_step, 19);
  TrainingState saved;
  ASSERT_EQ(load_checkpoint(d.file("ckpt"), &saved), kOk) << last_error();
  EXPECT_EQ(saved.global_step, 19);
  // Stopped inside an epoch: the time saved is the time trained to the stop.
  EXPECT_GT(saved.train_seconds, 0.0);
  EXPECT_EQ(saved.train_seconds, part.train_seconds);
  TrainConfig second = cfg_;
  second.resume_path = d.file("ckpt");
  const TrainResult rest = run(second);
  EXPECT_EQ(rest.stopped_by_signal, 0);
  ASSERT_EQ(rest.params.size(), whole.params.size());
  EXPECT_EQ(
      0, std::memcmp(rest.params.data(), whole.params.data(), whole.params.size() * sizeof(float)))
      << "parameters resumed after a stop signal differ from the uninterrupted run";
  EXPECT_EQ(d.entries(), 1);
}

// The handlers run on an alternate stack (a signal frame on the interrupted
// stack broke the heap inside oneDNN's sgemm), and a signal is recorded.
TEST(StopSignals, HandlerRunsOnAnAlternateStackAndRecords) {
  stop_on_signals();
  for (int sig : {SIGINT, SIGTERM}) {
    struct sigaction sa = {};
    ASSERT_EQ(sigaction(sig, nullptr, &sa), 0);
    EXPECT_TRUE(sa.sa_flags & SA_ONSTACK) << signal_name(sig);
  }
  stack_t alternate = {};
  ASSERT_EQ(sigaltstack(nullptr, &alternate), 0);
  EXPECT_FALSE(alternate.ss_flags & SS_DISABLE);
  EXPECT_GE(alternate.ss_size, size_t(1 << 16));
  ASSERT_EQ(raise(SIGTERM), 0);
  EXPECT_EQ(stop_signal(), SIGTERM);
  request_stop(0);
  signal(SIGINT, SIG_DFL), signal(SIGTERM, SIG_DFL);
}

TEST_F(Training, ResumeRefusesAnotherRun) {
  TempDir d;
  TrainConfig first = cfg_;
  first.max_steps = 3;
  first.checkpoint_path = d.file("ckpt");
  run(first);
  TrainConfig other = cfg_;
  other.batch = 16;
  other.resume_path = d.file("ckpt");
  std::unique_ptr<Backend> be;
  ASSERT_EQ(make_backend("cpu", BackendOptions{}, &be), kOk);
  LocalGradientReducer reducer;
  TrainResult r;
  ASSERT_EQ(train(other, be.get(), data_, &reducer, nullptr, &r), QUORUM_ERR_MISMATCH);
  EXPECT_NE(std::string(last_error()).find("batch 32"), std::string::npos) << last_error();
}

// Records how the trainer uses the reducer interface; can fail on a given step.
class RecordingReducer : public GradientReducer {
 public:
  int rank() const override { return 0; }
  int size() const override { return world; }
  Status broadcast_parameters(float *params, size_t count, MemoryKind memory) override {
    ++broadcasts;
    broadcast_count = count;
    EXPECT_NE(params, nullptr);
    EXPECT_EQ(memory, MemoryKind::Host);
    return kOk;
  }
  Status reduce_gradients(float *grads, size_t count, MemoryKind, int64_t step,
                          ReduceInfo *info) override {
    EXPECT_NE(grads, nullptr);
    EXPECT_EQ(count, broadcast_count + Model<float>::kGradControlSlots)
        << "the gradient and its control slots, or the parameters, have another size";
    // The stop request: 1 where this rank received a signal, else 0.
    stop_requests.push_back(grads[count - 1]);
    if (step == other_rank_stops_at) grads[count - 1] = 0.5f;  // 1 of 2 ranks asked
    steps.push_back(step);
    events.push_back("reduce " + std::to_string(step));
    info->contributors = 1;
    if (step == fail_at) return fail(QUORUM_ERR_PEER_FAILED, "test", "injected at step {}", step);
    return kOk;
  }
  void gradient_ready(float *, size_t offset, size_t count, int64_t step) override {
    if (step == 0) ready.emplace_back(offset, count);
    if (events.empty() || events.back() != "ready " + std::to_string(step))
      events.push_back("ready " + std::to_string(step));
  }
  double inject_imbalance(int64_t step) override {
    events.push_back("inject " + std::to_string(step));
    return 0.25;
  }
  // One rank: the sums stay; records {loss sum, correct, examples} of each call.
  Status sum_over_ranks(double *values, size_t n) override {
    sums.emplace_back(values, values + n);
    // The agreement on the stopping signal: the other rank received SIGINT.
    if (other_rank_stops_at >= 0 && n == size_t(NSIG)) values[SIGINT] += 1;
    if (fail_sum_at == int64_t(sums.size()))
      return fail(QUORUM_ERR_TIMEOUT, "test", "injected at evaluation {}", sums.size());
    return kOk;
  }
  const char *name() const override { return "recording"; }
  std::vector<std::vector<double>> sums;
  int64_t fail_sum_at = -1;
  std::vector<std::pair<size_t, size_t>> ready;  // of step 0
  std::vector<std::string> events;               // inject, ready (once), reduce per step
  int broadcasts = 0;
  size_t broadcast_count = 0;
  std::vector<int64_t> steps;
  std::vector<float> stop_requests;  // this rank's, per step
  int64_t fail_at = -1;
  // world 2: the (simulated) other rank's stop request arrives with this step.
  int world = 1;
  int64_t other_rank_stops_at = -1;
};

TEST_F(Training, ReducerSeesEveryStepOnce) {
  std::unique_ptr<Backend> be;
  ASSERT_EQ(make_backend("cpu", BackendOptions{}, &be), kOk);
  RecordingReducer reducer;
  TrainResult r;
  TrainConfig c = cfg_;
  c.epochs = 1;
  ASSERT_EQ(train(c, be.get(), data_, &reducer, nullptr, &r), kOk);
  EXPECT_EQ(reducer.broadcasts, 1);
  ASSERT_EQ(reducer.steps.size(), 16u);
  for (int64_t i = 0; i < 16; ++i) EXPECT_EQ(reducer.steps[size_t(i)], i);
  EXPECT_EQ(reducer.broadcast_count, r.params.size());
  // Ready ranges: one per layer with parameters (fm-s: 4), last first, tiling the buffer.
  ASSERT_EQ(reducer.ready.size(), 4u);
  size_t end = r.params.size() + Model<float>::kGradControlSlots;
  for (auto [offset, count] : reducer.ready) {
    EXPECT_EQ(offset + count, end);
    end = offset;
  }
  EXPECT_EQ(end, 0u);
  // The injected imbalance comes after the step's compute (its ready ranges)
  // and before its reduction, and counts as such.
  ASSERT_EQ(reducer.events.size(), 3 * 16u);
  for (size_t i = 0; i < 16; ++i) {
    EXPECT_EQ(reducer.events[3 * i], "ready " + std::to_string(i));
    EXPECT_EQ(reducer.events[3 * i + 1], "inject " + std::to_string(i));
    EXPECT_EQ(reducer.events[3 * i + 2], "reduce " + std::to_string(i));
  }
  EXPECT_DOUBLE_EQ(r.last.times.imbalance, 16 * 0.25);
  for (float request : reducer.stop_requests) EXPECT_EQ(request, 0.0f);
  RecordingReducer failing;
  failing.fail_at = 5;
  EXPECT_EQ(train(c, be.get(), data_, &failing, nullptr, &r), QUORUM_ERR_PEER_FAILED);
  EXPECT_EQ(failing.steps.size(), 6u);
}

// Two ranks, and only the other one received a signal: its request arrives
// in step 6's reduction, so this rank stops after step 6 too (global step 7),
// writes the checkpoint (rank 0) and reports the other rank's signal; a rank
// that received one itself sends 1 in the slot from its next step on.
TEST_F(Training, StopRequestOfAnotherRankStopsThisOneAtTheSameStep) {
  TempDir d;
  std::unique_ptr<Backend> be;
  ASSERT_EQ(make_backend("cpu", BackendOptions{}, &be), kOk);
  TrainConfig c = cfg_;
  c.checkpoint_path = d.file("ckpt");
  RecordingReducer reducer;
  reducer.world = 2;  // 8 steps per epoch of this rank's shard
  reducer.other_rank_stops_at = 6;
  TrainResult r;
  ASSERT_EQ(train(c, be.get(), data_, &reducer, nullptr, &r), kOk) << last_error();
  EXPECT_EQ(r.stopped_by_signal, SIGINT);
  EXPECT_EQ(r.global_step, 7);
  ASSERT_EQ(reducer.steps.size(), 7u);
  for (float request : reducer.stop_requests) EXPECT_EQ(request, 0.0f);
  TrainingState saved;
  ASSERT_EQ(load_checkpoint(d.file("ckpt"), &saved), kOk) << last_error();
  EXPECT_EQ(saved.global_step, 7);
  EXPECT_EQ(saved.world, 2);

  // This rank's own SIGTERM (during step 3) goes out with step 4; both stop
  // after it, and SIGTERM outranks the other rank's SIGINT.
  class SignalAt : public TrainObserver {
   public:
    void on_step(const StepProgress &p) override {
      if (p.global_step == 4) request_stop(SIGTERM);
    }
  } signal_at;
  RecordingReducer both;
  both.world = 2;
  both.other_rank_stops_at = 4;
  ASSERT_EQ(train(c, be.get(), data_, &both, &signal_at, &r), kOk) << last_error();
  request_stop(0);
  EXPECT_EQ(r.stopped_by_signal, SIGTERM);
  EXPECT_EQ(r.global_step, 5);
  ASSERT_EQ(both.stop_requests.size(), 5u);
  for (size_t i = 0; i < 4; ++i) EXPECT_EQ(both.stop_requests[i], 0.0f) << "step " << i;
  EXPECT_EQ(both.stop_requests[4], 1.0f);
}

// Records the evaluations inside epochs.
struct EvalRecorder : TrainObserver {
  void on_eval(const EvalReport &e) override { evals.push_back(e); }
  Status on_epoch(const EpochReport &r) override {
    epochs.push_back(r);
    return kOk;
  }
  std::vector<EvalReport> evals;
  std::vector<EpochReport> epochs;
};

TEST_F(Training, EvaluatesInsideEpochsWithoutChangingTheRun) {
  std::unique_ptr<Backend> be;
  ASSERT_EQ(make_backend("cpu", BackendOptions{}, &be), kOk);
  TrainConfig c = cfg_;
  c.evals_per_epoch = 4;  // after steps 4, 8 and 12 of 16, and at the end
  RecordingReducer reducer;
  EvalRecorder seen;
  TrainResult r;
  ASSERT_EQ(train(c, be.get(), data_, &reducer, &seen, &r), kOk) << last_error();
  ASSERT_EQ(seen.evals.size(), 9u);
  ASSERT_EQ(seen.epochs.size(), 3u);
  for (size_t i = 0; i < seen.evals.size(); ++i) {
    const EvalReport &e = seen.evals[i];
    EXPECT_EQ(e.epoch, int64_t(i / 3));
    EXPECT_EQ(e.step_in_epoch, int64_t(4 * (i % 3 + 1)));
    EXPECT_EQ(e.global_step, e.epoch * 16 + e.step_in_epoch);
    EXPECT_GE(e.test_accuracy, 0.0);
    EXPECT_LE(e.test_accuracy, 1.0);
    EXPECT_GT(e.test_loss, 0.0);
    EXPECT_GT(e.eval_seconds, 0.0);
    if (i % 3 > 0) {
      EXPECT_GT(e.epoch_seconds, seen.evals[i - 1].epoch_seconds);
    }
  }
  for (const EpochReport &ep : seen.epochs) {
    EXPECT_GT(ep.eval_seconds, seen.evals[size_t(3 * ep.epoch + 2)].eval_seconds);
    EXPECT_GT(ep.seconds, seen.evals[size_t(3 * ep.epoch + 2)].epoch_seconds);
  }
  // Every evaluation (9 inside, 3 at the ends) adds its sums once, over the
  // whole test set, and the accuracy is the one the sums give.
  ASSERT_EQ(reducer.sums.size(), 12u);
  for (const auto &sum : reducer.sums) {
    ASSERT_EQ(sum.size(), 3u);
    EXPECT_EQ(sum[2], double(data_.test.count));
  }
  EXPECT_DOUBLE_EQ(r.last.test_accuracy, reducer.sums.back()[1] / double(data_.test.count));
  // The evaluations leave the training as it was, bit for bit.
  const TrainResult plain = run(cfg_);
  EXPECT_EQ(r.params, plain.params);
  EXPECT_DOUBLE_EQ(r.last.test_accuracy, plain.last.test_accuracy);
  // A failing evaluation fails the run with its error.
  RecordingReducer failing;
  failing.fail_sum_at = 2;
  EXPECT_EQ(train(c, be.get(), data_, &failing, nullptr, &r), QUORUM_ERR_TIMEOUT);
  EXPECT_NE(std::string(last_error()).find("evaluation 2"), std::string::npos) << last_error();
  c.evals_per_epoch = 0;
  EXPECT_EQ(train(c, be.get(), data_, &reducer, nullptr, &r), QUORUM_ERR_INVALID_ARG);
}

TEST_F(Training, RejectsModelAndDataMismatch) {
  TrainConfig c = cfg_;
  c.model = "cifar-cnn";
  std::unique_ptr<Backend> be;
  ASSERT_EQ(make_backend("cpu", BackendOptions{}, &be), kOk);
  LocalGradientReducer reducer;
  TrainResult r;
  ASSERT_EQ(train(c, be.get(), data_, &reducer, nullptr, &r), QUORUM_ERR_INVALID_ARG);
  EXPECT_NE(std::string(last_error()).find("3x32x32"), std::string::npos) << last_error();
  c = cfg_;
  c.batch = 1000;
  ASSERT_EQ(train(c, be.get(), data_, &reducer, nullptr, &r), QUORUM_ERR_INVALID_ARG);
}

}  // namespace
}  // namespace quorum::trainer
