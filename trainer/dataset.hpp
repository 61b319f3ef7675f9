// dataset.hpp: image classification data sets in memory, and how a rank reads them.
//
// Sources: Fashion-MNIST (IDX files, gzip; the default), the CIFAR-10 binary
// format, and a synthetic set for tests. Images stay as bytes; a batch is
// normalised to float when it is assembled. Every load error names the file
// and what is wrong with it.
#pragma once

#include <array>
#include <cstdint>
#include <string>
#include <vector>

#include "runtime/status.hpp"

namespace quorum::trainer {

struct Dataset {
  std::string name;
  int channels = 0, height = 0, width = 0, classes = 10;
  size_t count = 0;
  std::vector<uint8_t> images;  // [count][channels][height][width]
  std::vector<uint8_t> labels;  // [count], each < classes
  // Per-channel normalisation: x = (byte / 255 - mean) / stddev.
  std::array<float, 3> mean{0.f, 0.f, 0.f}, stddev{1.f, 1.f, 1.f};
  size_t image_size() const { return size_t(channels) * height * width; }
  // Keeps the first n examples (n >= count: unchanged).
  void truncate(size_t n);
};

struct DataSplit {
  Dataset train, test;
};

// The decompressed Fashion-MNIST files of Debian's dataset-fashion-mnist package.
struct IdxFileInfo {
  const char *file;  // name inside the data directory
  uint32_t magic;    // 0x803 images, 0x801 labels
  uint32_t count;
  size_t bytes;    // decompressed size
  uint32_t crc32;  // of the decompressed bytes
};
extern const IdxFileInfo kFashionMnistFiles[4];  // train images, train labels, test images, labels
extern const char *const kFashionMnistDefaultDir;

// Reads a whole gzip file (plain files pass through), at most max_bytes.
// Only regular files: a FIFO, device node, socket or folder is refused at
// once (opening never waits for a FIFO's writer).
Status read_gzip_file(const std::string &path, size_t max_bytes, std::vector<uint8_t> *out);

// Fashion-MNIST from dir ("" = the package's location): the four .gz files, or
// the same names without .gz, uncompressed. verify_content checks sizes and
// CRC32 against kFashionMnistFiles (turn it off for other IDX data of the same shape).
Status load_fashion_mnist(const std::string &dir, bool verify_content, DataSplit *out);
// CIFAR-10 binary version: data_batch_1..5.bin and test_batch.bin in dir.
Status load_cifar10(const std::string &dir, DataSplit *out);

struct SyntheticOptions {
  int channels = 1, height = 28, width = 28, classes = 10;
  size_t train_count = 2048, test_count = 512;
  uint64_t seed = 1;
  double noise = 0.35;  // relative to the class templates' contrast
};
// Learnable random data: each class is a random template plus noise.
void make_synthetic(const SyntheticOptions &options, DataSplit *out);

// name: "fashion-mnist" | "cifar10" | "synthetic"; dir "" = the default location.
Status load_dataset(const std::string &name, const std::string &dir, bool verify_content,
                    DataSplit *out);

// The order of one epoch and this rank's part of it.
//
// Every rank draws the same permutation of [0, count) from (seed, epoch) and
// takes every world-th element from position rank (shard = count / world; the
// remainder is left out so all ranks take equal steps). Strided, so that at
// step k the ranks' batches of b hold the same examples as one rank's batch of
// world x b: P ranks under sync train like one rank at P times the batch.
class ShardSampler {
 public:
  ShardSampler(size_t count, uint64_t seed, int rank, int world);
  size_t shard_size() const { return count_ / size_t(world_); }
  std::vector<uint32_t> epoch_indices(int64_t epoch) const;

 private:
  size_t count_;
  uint64_t seed_;
  int rank_, world_;
};

// Gathers n examples into float images [n][c][h][w] (normalised) and int labels.
void assemble_batch(const Dataset &data, const uint32_t *indices, int n, float *images,
                    int32_t *labels);
void assemble_batch(const Dataset &data, const uint32_t *indices, int n, double *images,
                    int32_t *labels);

}  // namespace quorum::trainer
