// checkpoint.cpp: see checkpoint.hpp. Format (little-endian, as the host):
//   "QTRNCKPT" u32 version | u32 length, model name | u32 length, data set name |
//   u64 seed | i32 batch | i32 world | u64 train_count | i64 steps_per_epoch |
//   i64 global_step, epoch, step_in_epoch | f64 loss sum | i64 correct, images |
//   u64 count | f32 params[count] | f32 momentum[count] | u64 ema_count (0 or count) |
//   f32 ema[ema_count] | f64 train_seconds | i64 epoch_start_step |
//   u32 length, batch-policy state | u32 CRC32 of all before.
// Version 2 added the data set name, train_count and steps_per_epoch; version 3
// the parameters' moving average (version 2 files are read as having none);
// version 4 the training time so far (older files are read as 0 s: a resumed
// run's times then count from the resume); version 5 the step at which the
// epoch in progress began and the batch policy's state (quorum-train --batch
// auto, whose epochs differ in steps; older files are read as a run of one
// batch without a policy). Each version only appends before the
// CRC, so a reader of version N reads every older one by stopping earlier.
#include "trainer/checkpoint.hpp"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>
#include <zlib.h>

#include <cerrno>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <new>

namespace quorum::trainer {

namespace {
constexpr const char *kSub = "checkpoint";
constexpr char kMagic[8] = {'Q', 'T', 'R', 'N', 'C', 'K', 'P', 'T'};
constexpr uint32_t kVersion = 5;
constexpr uint32_t kOldestVersion = 2;  // read too: no moving average, no training time
constexpr uint32_t kFirstWithAverage = 3;
constexpr uint32_t kFirstWithTrainSeconds = 4;
constexpr uint32_t kFirstWithPolicy = 5;
constexpr uint32_t kMaxPolicyStateBytes = 1 << 20;

class Writer {
 public:
  template <typename T>
  void put(const T &v) {
    raw(&v, sizeof v);
  }
  void raw(const void *p, size_t n) {
    if (n == 0) return;  // an empty vector's data() may be null
    const uint8_t *b = static_cast<const uint8_t *>(p);
    bytes.insert(bytes.end(), b, b + n);
  }
  void text(const std::string &s) {
    put(uint32_t(s.size()));
    raw(s.data(), s.size());
  }
  std::vector<uint8_t> bytes;
};

class Reader {
 public:
  Reader(const std::vector<uint8_t> &b) : bytes_(b) {}
  template <typename T>
  bool get(T *v) {
    return raw(v, sizeof *v);
  }
  bool raw(void *p, size_t n) {
    if (bytes_.size() - pos_ < n) return false;
    if (n == 0) return true;  // an empty vector's data() may be null
    std::memcpy(p, bytes_.data() + pos_, n);
    pos_ += n;
    return true;
  }
  bool text(std::string *s) {
    uint32_t n = 0;
    if (!get(&n) || n >= 256) return false;
    s->resize(n);
    return raw(s->data(), n);
  }
  // Longer text (the batch policy's state), at most `max` bytes.
  bool long_text(std::string *s, uint32_t max) {
    uint32_t n = 0;
    if (!get(&n) || n > max) return false;
    s->resize(n);
    return raw(s->data(), n);
  }
  size_t left() const { return bytes_.size() - pos_; }

 private:
  const std::vector<uint8_t> &bytes_;
  size_t pos_ = 0;
};

std::string temp_path(const std::string &path) {
  return path + ".tmp." + std::to_string(getpid());
}

// Checkpoints are only ever regular files: an existing `path` that is a
// device node, FIFO, socket or folder is refused, never replaced ("" if fine).
std::string not_a_regular_file(const std::string &path) {
  struct stat st {};
  if (::stat(path.c_str(), &st) != 0 || S_ISREG(st.st_mode)) return "";
  if (S_ISDIR(st.st_mode)) return "is a folder, not a file name";
  if (S_ISCHR(st.st_mode) || S_ISBLK(st.st_mode)) return "is a device, not a regular file";
  if (S_ISFIFO(st.st_mode)) return "is a FIFO, not a regular file";
  return "is not a regular file";
}

// Creates the temporary file exclusively and without following a link, so
// that nothing planted at its name is written through. A leftover of a killed
// run of the same pid is removed first (unlink does not follow links).
int create_temp(const std::string &tmp) {
  const int flags = O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC;
  int fd = ::open(tmp.c_str(), flags, 0644);
  if (fd < 0 && errno == EEXIST && ::unlink(tmp.c_str()) == 0)
    fd = ::open(tmp.c_str(), flags, 0644);
  return fd;
}

// The largest file load_checkpoint reads: far above any model this trainer
// builds, far below what a sparse or endless file would make it allocate.
constexpr uint64_t kMaxCheckpointBytes = uint64_t{16} << 30;

// What no run writes: a position off its epoch, or counts that cannot be.
std::string bad_position(const TrainingState &s) {
  if (s.batch <= 0 || s.world <= 0 || s.steps_per_epoch <= 0 || s.train_count == 0)
    return fmt::format("batch {}, ranks {}, {} training examples, {} steps per epoch", s.batch,
                       s.world, s.train_count, s.steps_per_epoch);
  if (s.epoch < 0 || s.step_in_epoch < 0 || s.step_in_epoch >= s.steps_per_epoch)
    return fmt::format("epoch {} (counting from 1) step {} of an epoch of {} steps", s.epoch + 1,
                       s.step_in_epoch, s.steps_per_epoch);
  if (s.epoch > INT64_MAX / s.steps_per_epoch - 1)
    return fmt::format("epoch {} of {} steps each", s.epoch + 1, s.steps_per_epoch);
  // One batch throughout: every finished epoch had this epoch's steps. A
  // batch policy's epochs differ, each of at least one step.
  if (s.policy_state.empty() && s.epoch_start_step != s.epoch * s.steps_per_epoch)
    return fmt::format("global step {} is not {} finished epochs x {} steps + {}", s.global_step,
                       s.epoch, s.steps_per_epoch, s.step_in_epoch);
  if (s.epoch_start_step < s.epoch || s.global_step != s.epoch_start_step + s.step_in_epoch)
    return fmt::format("global step {} is not the {} steps of {} finished epochs + {}",
                       s.global_step, s.epoch_start_step, s.epoch, s.step_in_epoch);
  if (s.epoch_images < 0 || s.epoch_correct < 0 || s.epoch_correct > s.epoch_images)
    return fmt::format("{} of {} examples correct", s.epoch_correct, s.epoch_images);
  return "";
}
}  // namespace

Status save_checkpoint(const std::string &path, const TrainingState &s) {
  if (s.params.size() != s.momentum.size() || (!s.ema.empty() && s.ema.size() != s.params.size()))
    return fail(QUORUM_ERR_INTERNAL, kSub,
                "params ({}), momentum ({}) and moving average ({}) differ in size",
                s.params.size(), s.momentum.size(), s.ema.size());
  Writer w;
  w.raw(kMagic, sizeof kMagic);
  w.put(kVersion);
  w.text(s.model);
  w.text(s.data);
  w.put(s.seed);
  w.put(s.batch);
  w.put(s.world);
  w.put(s.train_count);
  w.put(s.steps_per_epoch);
  w.put(s.global_step);
  w.put(s.epoch);
  w.put(s.step_in_epoch);
  w.put(s.epoch_loss_sum);
  w.put(s.epoch_correct);
  w.put(s.epoch_images);
  w.put(uint64_t(s.params.size()));
  w.raw(s.params.data(), s.params.size() * sizeof(float));
  w.raw(s.momentum.data(), s.momentum.size() * sizeof(float));
  w.put(uint64_t(s.ema.size()));
  w.raw(s.ema.data(), s.ema.size() * sizeof(float));
  w.put(s.train_seconds);
  // One batch throughout (no policy): every finished epoch had this one's steps.
  w.put(s.policy_state.empty() ? s.epoch * s.steps_per_epoch : s.epoch_start_step);
  w.text(s.policy_state);
  w.put(uint32_t(crc32(0L, w.bytes.data(), uInt(w.bytes.size()))));

  if (const std::string why = not_a_regular_file(path); !why.empty())
    return fail(QUORUM_ERR_INVALID_ARG, kSub, "checkpoint {}: {}", path, why);
  const std::string tmp = temp_path(path);
  int fd = create_temp(tmp);
  if (fd < 0)
    return fail(QUORUM_ERR_INVALID_ARG, kSub, "{}: cannot create: {}", tmp, std::strerror(errno));
  size_t done = 0;
  while (done < w.bytes.size()) {
    ssize_t n = ::write(fd, w.bytes.data() + done, w.bytes.size() - done);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) {
      int err = errno;
      ::close(fd);
      ::unlink(tmp.c_str());
      return fail(QUORUM_ERR_INVALID_ARG, kSub, "{}: write failed: {}", tmp, std::strerror(err));
    }
    done += size_t(n);
  }
  if (::fsync(fd) != 0 || ::close(fd) != 0) {
    int err = errno;
    ::unlink(tmp.c_str());
    return fail(QUORUM_ERR_INVALID_ARG, kSub, "{}: flush failed: {}", tmp, std::strerror(err));
  }
  if (::rename(tmp.c_str(), path.c_str()) != 0) {
    int err = errno;
    ::unlink(tmp.c_str());
    return fail(QUORUM_ERR_INVALID_ARG, kSub, "cannot rename {} to {}: {}", tmp, path,
                std::strerror(err));
  }
  return kOk;
}

Status check_checkpoint_path(const std::string &path) {
  if (const std::string why = not_a_regular_file(path); !why.empty())
    return fail(QUORUM_ERR_INVALID_ARG, kSub, "--checkpoint {}: {}", path, why);
  const std::string tmp = temp_path(path);
  int fd = create_temp(tmp);
  if (fd < 0)
    return fail(QUORUM_ERR_INVALID_ARG, kSub, "--checkpoint {}: cannot create a file there: {}",
                path, std::strerror(errno));
  ::close(fd);
  ::unlink(tmp.c_str());
  return kOk;
}

Status load_checkpoint(const std::string &path, TrainingState *s) {
  // O_NONBLOCK: opening a FIFO must not wait for a writer; only regular files
  // are read, and no more than their size, so an endless file cannot be.
  int fd = ::open(path.c_str(), O_RDONLY | O_NONBLOCK | O_CLOEXEC);
  if (fd < 0)
    return fail(QUORUM_ERR_INVALID_ARG, kSub, "{}: cannot open: {}", path, std::strerror(errno));
  struct stat st {};
  std::string why;
  if (::fstat(fd, &st) != 0) {
    why = std::strerror(errno);
  } else if (!S_ISREG(st.st_mode)) {
    why = "not a regular file";
  } else if (uint64_t(st.st_size) > kMaxCheckpointBytes) {
    why = fmt::format("{} bytes, more than any checkpoint ({} GiB)", st.st_size,
                      kMaxCheckpointBytes >> 30);
  }
  std::vector<uint8_t> bytes;
  if (why.empty()) {
    try {
      bytes.resize(size_t(st.st_size));
    } catch (const std::bad_alloc &) {
      why = fmt::format("no memory for its {} bytes", st.st_size);
    }
  }
  size_t got = 0;
  while (why.empty() && got < bytes.size()) {
    ssize_t n = ::read(fd, bytes.data() + got, bytes.size() - got);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) why = std::strerror(errno);
    if (n == 0) why = "shorter than its size (changed while read?)";
    if (n > 0) got += size_t(n);
  }
  ::close(fd);
  if (!why.empty()) return fail(QUORUM_ERR_INVALID_ARG, kSub, "{}: cannot read: {}", path, why);
  return parse_checkpoint(bytes, path, s);
}

Status parse_checkpoint(const std::vector<uint8_t> &bytes, const std::string &path,
                        TrainingState *s) {
  if (bytes.size() < sizeof kMagic + 4 || std::memcmp(bytes.data(), kMagic, sizeof kMagic) != 0)
    return fail(QUORUM_ERR_INVALID_ARG, kSub, "{}: not a quorum-train checkpoint", path);
  uint32_t stored_crc;
  std::memcpy(&stored_crc, bytes.data() + bytes.size() - 4, 4);
  if (uint32_t(crc32(0L, bytes.data(), uInt(bytes.size() - 4))) != stored_crc)
    return fail(QUORUM_ERR_INVALID_ARG, kSub, "{}: corrupt or truncated (CRC32 mismatch)", path);
  Reader r(bytes);
  char magic[8];
  uint32_t version = 0;
  uint64_t count = 0;
  r.raw(magic, 8);
  r.get(&version);
  if (version < kOldestVersion || version > kVersion)
    return fail(QUORUM_ERR_INVALID_ARG, kSub,
                "{}: format version {}, this build reads versions {} to {}{}", path, version,
                kOldestVersion, kVersion,
                version < kOldestVersion ? " (older checkpoints do not record the training data, "
                                           "which a resume must match: start the run afresh)"
                                         : "");
  bool ok = r.text(&s->model) && r.text(&s->data) && r.get(&s->seed) && r.get(&s->batch) &&
            r.get(&s->world) && r.get(&s->train_count) && r.get(&s->steps_per_epoch) &&
            r.get(&s->global_step) && r.get(&s->epoch) && r.get(&s->step_in_epoch) &&
            r.get(&s->epoch_loss_sum) && r.get(&s->epoch_correct) && r.get(&s->epoch_images) &&
            r.get(&count);
  // What follows the header: params, momentum, [ema_count, ema],
  // [train_seconds], [epoch_start_step, policy state], CRC.
  const size_t seconds_bytes = version >= kFirstWithTrainSeconds ? sizeof(double) : 0;
  const size_t policy_bytes = version >= kFirstWithPolicy ? sizeof(int64_t) + sizeof(uint32_t) : 0;
  const size_t tail =
      (version >= kFirstWithAverage ? sizeof(uint64_t) : 0) + seconds_bytes + policy_bytes + 4;
  ok =
      ok && count <= r.left() / (2 * sizeof(float)) && count * 2 * sizeof(float) + tail <= r.left();
  if (!ok) return fail(QUORUM_ERR_INVALID_ARG, kSub, "{}: malformed header", path);
  s->params.resize(count);
  s->momentum.resize(count);
  r.raw(s->params.data(), count * sizeof(float));
  r.raw(s->momentum.data(), count * sizeof(float));
  uint64_t ema_count = 0;
  if (version >= kFirstWithAverage && !r.get(&ema_count))
    return fail(QUORUM_ERR_INVALID_ARG, kSub, "{}: malformed moving average", path);
  // Up to version 4 the tail's size is fixed; version 5's policy state is text.
  const size_t after_ema = seconds_bytes + policy_bytes + 4;
  if ((ema_count != 0 && ema_count != count) || ema_count > r.left() / sizeof(float) ||
      ema_count * sizeof(float) + after_ema > r.left() ||
      (policy_bytes == 0 && ema_count * sizeof(float) + after_ema != r.left()))
    return fail(QUORUM_ERR_INVALID_ARG, kSub,
                "{}: malformed: {} parameters, a moving average of {} and {} bytes after it", path,
                count, ema_count, r.left());
  s->ema.resize(ema_count);
  r.raw(s->ema.data(), ema_count * sizeof(float));
  s->train_seconds = 0;
  if (version >= kFirstWithTrainSeconds) r.get(&s->train_seconds);
  if (!std::isfinite(s->train_seconds) || s->train_seconds < 0)
    return fail(QUORUM_ERR_INVALID_ARG, kSub, "{}: impossible training state: {} s of training",
                path, s->train_seconds);
  s->policy_state.clear();
  // Before version 5: one batch throughout (an impossible epoch is refused below).
  const bool sane =
      s->steps_per_epoch > 0 && s->epoch >= 0 && s->epoch <= INT64_MAX / s->steps_per_epoch - 1;
  s->epoch_start_step = sane ? s->epoch * s->steps_per_epoch : 0;
  if (version >= kFirstWithPolicy &&
      (!r.get(&s->epoch_start_step) || !r.long_text(&s->policy_state, kMaxPolicyStateBytes) ||
       r.left() != 4))
    return fail(QUORUM_ERR_INVALID_ARG, kSub, "{}: malformed batch-policy state", path);
  if (const std::string why = bad_position(*s); !why.empty())
    return fail(QUORUM_ERR_INVALID_ARG, kSub, "{}: impossible training state: {}", path, why);
  return kOk;
}

}  // namespace quorum::trainer
