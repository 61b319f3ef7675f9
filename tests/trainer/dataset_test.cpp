// dataset_test.cpp: data loading (IDX gzip and CIFAR-10 files, written here in a
// temporary folder), the clear errors for missing, truncated, garbage and
// inconsistent files, FIFOs and device nodes where files or the folder should
// be (refused at once, never read), batch assembly, and the sharded per-epoch
// order.
#include <fcntl.h>
#include <gtest/gtest.h>
#include <sys/stat.h>
#include <unistd.h>
#include <zlib.h>

#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <set>
#include <string>
#include <thread>

#include "trainer/dataset.hpp"

namespace quorum::trainer {
namespace {

class TempDir {
 public:
  TempDir() {
    char tmpl[] = "/tmp/quorum_dataset_test_XXXXXX";
    path_ = mkdtemp(tmpl);
  }
  ~TempDir() { std::system(("rm -rf '" + path_ + "'").c_str()); }
  std::string file(const std::string &name) const { return path_ + "/" + name; }
  const std::string &path() const { return path_; }

 private:
  std::string path_;
};

void put_be32(std::vector<uint8_t> *b, uint32_t v) {
  for (int s = 24; s >= 0; s -= 8) b->push_back(uint8_t(v >> s));
}

std::vector<uint8_t> idx_images(uint32_t magic, uint32_t count, uint32_t rows, uint32_t cols) {
  std::vector<uint8_t> b;
  put_be32(&b, magic);
  put_be32(&b, count);
  put_be32(&b, rows);
  put_be32(&b, cols);
  for (size_t i = 0; i < size_t(count) * rows * cols; ++i) b.push_back(uint8_t(i * 7));
  return b;
}

std::vector<uint8_t> idx_labels(uint32_t count, uint8_t max_label = 9) {
  std::vector<uint8_t> b;
  put_be32(&b, 0x801);
  put_be32(&b, count);
  for (uint32_t i = 0; i < count; ++i) b.push_back(uint8_t(i % (max_label + 1)));
  return b;
}

void write_gz(const std::string &path, const std::vector<uint8_t> &bytes) {
  gzFile f = gzopen(path.c_str(), "wb");
  ASSERT_NE(f, nullptr);
  ASSERT_EQ(gzwrite(f, bytes.data(), unsigned(bytes.size())), int(bytes.size()));
  gzclose(f);
}

void write_raw(const std::string &path, const std::vector<uint8_t> &bytes) {
  std::ofstream(path, std::ios::binary)
      .write(reinterpret_cast<const char *>(bytes.data()), std::streamsize(bytes.size()));
}

std::vector<uint8_t> read_raw(const std::string &path) {
  std::ifstream f(path, std::ios::binary);
  return std::vector<uint8_t>(std::istreambuf_iterator<char>(f), {});
}

// A small Fashion-MNIST-shaped set (content checks off: it is not the real data).
void write_small_set(const TempDir &d, uint32_t train = 20, uint32_t test = 10) {
  write_gz(d.file("train-images-idx3-ubyte.gz"), idx_images(0x803, train, 28, 28));
  write_gz(d.file("train-labels-idx1-ubyte.gz"), idx_labels(train));
  write_gz(d.file("t10k-images-idx3-ubyte.gz"), idx_images(0x803, test, 28, 28));
  write_gz(d.file("t10k-labels-idx1-ubyte.gz"), idx_labels(test));
}

// Loads and expects failure whose message contains every one of `parts`.
void expect_error(const std::string &dir, bool verify, std::vector<std::string> parts) {
  DataSplit s;
  ASSERT_NE(load_fashion_mnist(dir, verify, &s), kOk);
  std::string msg = last_error();
  for (const std::string &p : parts) EXPECT_NE(msg.find(p), std::string::npos) << msg;
}

TEST(FashionMnistFiles, SmallValidSetLoads) {
  TempDir d;
  write_small_set(d);
  DataSplit s;
  ASSERT_EQ(load_fashion_mnist(d.path(), false, &s), kOk) << last_error();
  EXPECT_EQ(s.train.count, 20u);
  EXPECT_EQ(s.test.count, 10u);
  EXPECT_EQ(s.train.image_size(), 784u);
  EXPECT_EQ(s.train.images[5], uint8_t(35));
  EXPECT_EQ(s.train.labels[13], 3);
}

TEST(FashionMnistFiles, UncompressedFilesAreAccepted) {
  TempDir d;
  write_small_set(d);
  std::remove(d.file("t10k-images-idx3-ubyte.gz").c_str());
  write_raw(d.file("t10k-images-idx3-ubyte"), idx_images(0x803, 10, 28, 28));
  DataSplit s;
  ASSERT_EQ(load_fashion_mnist(d.path(), false, &s), kOk) << last_error();
  EXPECT_EQ(s.test.count, 10u);
}

TEST(FashionMnistFiles, ContentCheckRejectsOtherData) {
  TempDir d;
  write_small_set(d);
  expect_error(d.path(), true, {"train-images-idx3-ubyte.gz"});
}

TEST(FashionMnistFiles, MissingFile) {
  TempDir d;
  write_small_set(d);
  std::remove(d.file("t10k-labels-idx1-ubyte.gz").c_str());
  expect_error(d.path(), false, {"t10k-labels-idx1-ubyte.gz", "cannot open"});
}

TEST(FashionMnistFiles, TruncatedGzip) {
  TempDir d;
  write_small_set(d);
  const std::string f = d.file("train-images-idx3-ubyte.gz");
  std::vector<uint8_t> raw = read_raw(f);
  raw.resize(raw.size() / 2);
  write_raw(f, raw);
  expect_error(d.path(), false, {"train-images-idx3-ubyte.gz", "truncated"});
}

TEST(FashionMnistFiles, TruncatedContent) {
  TempDir d;
  write_small_set(d);
  std::vector<uint8_t> img = idx_images(0x803, 20, 28, 28);
  img.resize(img.size() - 100);
  write_gz(d.file("train-images-idx3-ubyte.gz"), img);
  expect_error(d.path(), false, {"train-images-idx3-ubyte.gz", "truncated", "promises"});
}

TEST(FashionMnistFiles, GarbageFile) {
  TempDir d;
  write_small_set(d);
  std::vector<uint8_t> junk(3000);
  for (size_t i = 0; i < junk.size(); ++i) junk[i] = uint8_t(i * 131 + 17);
  write_raw(d.file("train-labels-idx1-ubyte.gz"), junk);
  expect_error(d.path(), false, {"train-labels-idx1-ubyte.gz", "magic"});
}

TEST(FashionMnistFiles, CorruptGzipBody) {
  TempDir d;
  write_small_set(d);
  const std::string f = d.file("train-images-idx3-ubyte.gz");
  std::vector<uint8_t> raw = read_raw(f);
  for (size_t i = 20; i < raw.size() - 20; i += 7) raw[i] ^= 0x5a;
  write_raw(f, raw);
  expect_error(d.path(), false, {"train-images-idx3-ubyte.gz"});
}

TEST(FashionMnistFiles, WrongMagic) {
  TempDir d;
  write_small_set(d);
  write_gz(d.file("t10k-images-idx3-ubyte.gz"), idx_images(0x801, 10, 28, 28));
  expect_error(d.path(), false, {"t10k-images-idx3-ubyte.gz", "wrong magic", "0x00000801"});
}

TEST(FashionMnistFiles, TrailingBytes) {
  TempDir d;
  write_small_set(d);
  std::vector<uint8_t> lab = idx_labels(20);
  lab.push_back(1);
  write_gz(d.file("train-labels-idx1-ubyte.gz"), lab);
  expect_error(d.path(), false, {"train-labels-idx1-ubyte.gz", "trailing"});
}

TEST(FashionMnistFiles, CountMismatchAndBadLabel) {
  TempDir d;
  write_small_set(d);
  write_gz(d.file("train-labels-idx1-ubyte.gz"), idx_labels(19));
  expect_error(d.path(), false, {"20 images", "19 labels"});
  write_gz(d.file("train-labels-idx1-ubyte.gz"), idx_labels(20, 11));
  expect_error(d.path(), false, {"train-labels-idx1-ubyte.gz", "label 10"});
}

// While alive, a loader stuck opening or reading the FIFO at `path` (the bug
// these tests guard against) is freed after a few seconds by a writer that
// opens and closes it, so that a regression fails the test instead of hanging it.
class FifoRescuer {
 public:
  explicit FifoRescuer(std::string path)
      : thread_([this, path] {
          const auto until = std::chrono::steady_clock::now() + std::chrono::seconds(5);
          while (!done_.load()) {
            if (std::chrono::steady_clock::now() >= until) {
              // ENXIO while nobody has it open for reading: nothing to free.
              const int fd = ::open(path.c_str(), O_WRONLY | O_NONBLOCK | O_CLOEXEC);
              if (fd >= 0) ::close(fd);
              return;
            }
            std::this_thread::sleep_for(std::chrono::milliseconds(20));
          }
        }) {}
  ~FifoRescuer() {
    done_.store(true);
    thread_.join();
  }

 private:
  std::atomic<bool> done_{false};
  std::thread thread_;
};

TEST(FashionMnistFiles, FifoAsDataFileIsRefused) {
  TempDir d;
  write_small_set(d);
  const std::string f = d.file("train-labels-idx1-ubyte.gz");
  std::remove(f.c_str());
  ASSERT_EQ(mkfifo(f.c_str(), 0600), 0);
  FifoRescuer rescuer(f);
  expect_error(d.path(), false, {"train-labels-idx1-ubyte.gz", "is a FIFO, not a regular file"});
}

TEST(FashionMnistFiles, DeviceAsDataFileIsRefused) {
  TempDir d;
  write_small_set(d);
  // /dev/zero would read as an endless uncompressed file.
  const std::string f = d.file("t10k-images-idx3-ubyte.gz");
  std::remove(f.c_str());
  ASSERT_EQ(symlink("/dev/zero", f.c_str()), 0);
  expect_error(d.path(), false, {"t10k-images-idx3-ubyte.gz", "is a device, not a regular file"});
}

TEST(Datasets, FifoOrFileAsDataFolderIsRefused) {
  TempDir d;
  const std::string fifo = d.file("fifo");
  ASSERT_EQ(mkfifo(fifo.c_str(), 0600), 0);
  FifoRescuer rescuer(fifo);
  expect_error(fifo, false, {"data folder", "is a FIFO, not a folder"});
  DataSplit s;
  ASSERT_NE(load_cifar10(fifo, &s), kOk);
  EXPECT_NE(std::string(last_error()).find("is a FIFO, not a folder"), std::string::npos)
      << last_error();
  write_raw(d.file("plain"), {1, 2, 3});
  expect_error(d.file("plain"), false, {"data folder", "is not a folder"});
  expect_error(d.file("absent"), false, {"data folder", "No such file"});
}

TEST(Cifar10Files, FifoAsBatchFileIsRefused) {
  TempDir d;
  std::vector<uint8_t> batch(10 * 3073);
  for (const char *f : {"data_batch_1.bin", "data_batch_2.bin", "data_batch_3.bin",
                        "data_batch_4.bin", "data_batch_5.bin", "test_batch.bin"})
    write_raw(d.file(f), batch);
  const std::string f = d.file("data_batch_2.bin");
  std::remove(f.c_str());
  ASSERT_EQ(mkfifo(f.c_str(), 0600), 0);
  FifoRescuer rescuer(f);
  DataSplit s;
  ASSERT_NE(load_cifar10(d.path(), &s), kOk);
  EXPECT_NE(std::string(last_error()).find("data_batch_2.bin: is a FIFO"), std::string::npos)
      << last_error();
}

TEST(Cifar10Files, LoadsAndRejectsWrongSize) {
  TempDir d;
  std::vector<uint8_t> batch(2000 * 3073);  // the official files have 10000 records
  for (size_t r = 0; r < 2000; ++r) {
    batch[r * 3073] = uint8_t(r % 10);
    batch[r * 3073 + 1] = uint8_t(r);
  }
  for (const char *f : {"data_batch_1.bin", "data_batch_2.bin", "data_batch_3.bin",
                        "data_batch_4.bin", "data_batch_5.bin", "test_batch.bin"})
    write_raw(d.file(f), batch);
  DataSplit s;
  ASSERT_EQ(load_cifar10(d.path(), &s), kOk) << last_error();
  EXPECT_EQ(s.train.count, 10000u);
  EXPECT_EQ(s.test.count, 2000u);
  EXPECT_EQ(s.train.image_size(), 3072u);
  EXPECT_EQ(s.train.labels[2007], 7);
  EXPECT_EQ(s.train.images[size_t(2007) * 3072], uint8_t(7));
  batch.resize(batch.size() - 5);
  write_raw(d.file("data_batch_3.bin"), batch);
  ASSERT_NE(load_cifar10(d.path(), &s), kOk);
  EXPECT_NE(std::string(last_error()).find("data_batch_3.bin"), std::string::npos);
  ASSERT_NE(load_cifar10("", &s), kOk);
  EXPECT_NE(std::string(last_error()).find("--data-dir"), std::string::npos);
}

TEST(Datasets, UnknownName) {
  DataSplit s;
  ASSERT_NE(load_dataset("imagenet", "", true, &s), kOk);
  EXPECT_NE(std::string(last_error()).find("imagenet"), std::string::npos);
}

TEST(Datasets, AssembleNormalises) {
  DataSplit s;
  make_synthetic(SyntheticOptions{}, &s);
  const Dataset &d = s.train;
  uint32_t idx[2] = {5, 0};
  std::vector<float> images(2 * d.image_size());
  std::vector<int32_t> labels(2);
  assemble_batch(d, idx, 2, images.data(), labels.data());
  EXPECT_EQ(labels[0], d.labels[5]);
  EXPECT_EQ(labels[1], d.labels[0]);
  const float want = (d.images[5 * d.image_size() + 3] / 255.f - d.mean[0]) / d.stddev[0];
  EXPECT_NEAR(images[3], want, 1e-6);
}

TEST(Sampler, ShardsPartitionAndOrderDependsOnEpoch) {
  const size_t count = 1003;
  std::set<uint32_t> seen;
  for (int rank = 0; rank < 4; ++rank) {
    ShardSampler s(count, 42, rank, 4);
    EXPECT_EQ(s.shard_size(), 250u);
    for (uint32_t i : s.epoch_indices(3)) {
      EXPECT_LT(i, count);
      EXPECT_TRUE(seen.insert(i).second) << "index " << i << " in two shards";
    }
  }
  EXPECT_EQ(seen.size(), 1000u);
  ShardSampler a(count, 42, 1, 4), b(count, 42, 1, 4), c(count, 43, 1, 4);
  EXPECT_EQ(a.epoch_indices(2), b.epoch_indices(2));
  EXPECT_NE(a.epoch_indices(2), a.epoch_indices(3));
  EXPECT_NE(a.epoch_indices(2), c.epoch_indices(2));
  // One rank's shard is the whole permutation.
  std::vector<uint32_t> all = ShardSampler(count, 42, 0, 1).epoch_indices(0);
  EXPECT_EQ(std::set<uint32_t>(all.begin(), all.end()).size(), count);
}

}  // namespace
}  // namespace quorum::trainer
