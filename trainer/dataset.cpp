// dataset.cpp: see dataset.hpp.
#include "trainer/dataset.hpp"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>
#include <zlib.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <numeric>

#include "trainer/rng.hpp"

namespace quorum::trainer {

const IdxFileInfo kFashionMnistFiles[4] = {
    {"train-images-idx3-ubyte.gz", 0x803, 60000, 47040016, 0xb4f29f28u},
    {"train-labels-idx1-ubyte.gz", 0x801, 60000, 60008, 0x741a4657u},
    {"t10k-images-idx3-ubyte.gz", 0x803, 10000, 7840016, 0x678fe0b1u},
    {"t10k-labels-idx1-ubyte.gz", 0x801, 10000, 10008, 0x80142c1fu},
};
const char *const kFashionMnistDefaultDir = "/usr/share/datasets/fashion-mnist";

namespace {
constexpr const char *kSub = "data";

std::string join_path(const std::string &dir, const std::string &file) {
  if (dir.empty()) return file;
  return dir.back() == '/' ? dir + file : dir + "/" + file;
}

// dir/file, or dir/file without ".gz" when only the uncompressed file is there
// (missing both: the .gz name, which the error message then shows).
std::string resolve(const std::string &dir, const std::string &file) {
  const std::string gz = join_path(dir, file);
  if (access(gz.c_str(), F_OK) == 0 || file.size() < 3) return gz;
  const std::string plain = gz.substr(0, gz.size() - 3);
  return access(plain.c_str(), F_OK) == 0 ? plain : gz;
}

// What a path that must be a regular file (or, with `folder`, a folder) is
// instead: "" when it is one (or does not exist: opening it says so).
std::string wrong_kind(const struct stat &st, bool folder) {
  if (folder ? S_ISDIR(st.st_mode) : S_ISREG(st.st_mode)) return "";
  const char *want = folder ? "a folder" : "a regular file";
  if (S_ISFIFO(st.st_mode)) return fmt::format("is a FIFO, not {}", want);
  if (S_ISCHR(st.st_mode) || S_ISBLK(st.st_mode)) return fmt::format("is a device, not {}", want);
  if (S_ISSOCK(st.st_mode)) return fmt::format("is a socket, not {}", want);
  if (S_ISDIR(st.st_mode)) return "is a folder, not a regular file";
  return fmt::format("is not {}", want);
}

// The data folder must be one: anything else is named at once.
Status check_data_dir(const std::string &dir) {
  struct stat st {};
  if (::stat(dir.c_str(), &st) != 0)
    return fail(QUORUM_ERR_INVALID_ARG, kSub, "data folder {}: {}", dir, std::strerror(errno));
  if (const std::string why = wrong_kind(st, true); !why.empty())
    return fail(QUORUM_ERR_INVALID_ARG, kSub, "data folder {} {}", dir, why);
  return kOk;
}

uint32_t read_be32(const uint8_t *p) {
  return uint32_t(p[0]) << 24 | uint32_t(p[1]) << 16 | uint32_t(p[2]) << 8 | uint32_t(p[3]);
}

// Parses one IDX file (images: magic 0x803, dims count x rows x cols; labels: 0x801, count).
Status parse_idx(const std::string &path, const std::vector<uint8_t> &bytes,
                 const IdxFileInfo &expect, bool verify_content, int *rows, int *cols,
                 size_t *count) {
  const bool images = expect.magic == 0x803;
  const size_t header = images ? 16 : 8;
  if (bytes.size() < header)
    return fail(QUORUM_ERR_INVALID_ARG, kSub, "{}: truncated: {} bytes, the IDX header needs {}",
                path, bytes.size(), header);
  uint32_t magic = read_be32(bytes.data());
  if (magic != expect.magic)
    return fail(QUORUM_ERR_INVALID_ARG, kSub,
                "{}: wrong magic number 0x{:08x}, expected 0x{:08x} (IDX {} file)", path, magic,
                expect.magic, images ? "images" : "labels");
  *count = read_be32(bytes.data() + 4);
  *rows = images ? int(read_be32(bytes.data() + 8)) : 1;
  *cols = images ? int(read_be32(bytes.data() + 12)) : 1;
  if (images && (*rows <= 0 || *cols <= 0 || *rows > 4096 || *cols > 4096))
    return fail(QUORUM_ERR_INVALID_ARG, kSub, "{}: implausible image size {}x{}", path, *rows,
                *cols);
  if (verify_content && (*count != expect.count || (images && (*rows != 28 || *cols != 28))))
    return fail(QUORUM_ERR_INVALID_ARG, kSub, "{}: dimensions {} x {} x {}, expected {} x 28 x 28",
                path, *count, *rows, *cols, expect.count);
  const size_t want = header + *count * size_t(*rows) * size_t(*cols);
  if (bytes.size() < want)
    return fail(QUORUM_ERR_INVALID_ARG, kSub,
                "{}: truncated: {} bytes after decompression, the header promises {}", path,
                bytes.size(), want);
  if (bytes.size() > want)
    return fail(QUORUM_ERR_INVALID_ARG, kSub, "{}: {} bytes of trailing garbage after {} records",
                path, bytes.size() - want, *count);
  if (verify_content) {
    uint32_t crc = uint32_t(crc32(0L, bytes.data(), uInt(bytes.size())));
    if (crc != expect.crc32)
      return fail(QUORUM_ERR_INVALID_ARG, kSub,
                  "{}: content differs from the dataset-fashion-mnist package (CRC32 of the "
                  "decompressed data 0x{:08x}, expected 0x{:08x})",
                  path, crc, expect.crc32);
  }
  return kOk;
}

Status load_idx_pair(const std::string &dir, const IdxFileInfo &img, const IdxFileInfo &lab,
                     bool verify_content, Dataset *out) {
  std::vector<uint8_t> ib, lb;
  const std::string ipath = resolve(dir, img.file), lpath = resolve(dir, lab.file);
  const size_t cap = size_t(1) << 30;
  QUORUM_CHECK(read_gzip_file(ipath, verify_content ? img.bytes : cap, &ib));
  QUORUM_CHECK(read_gzip_file(lpath, verify_content ? lab.bytes : cap, &lb));
  int rows = 0, cols = 0, r1 = 0, c1 = 0;
  size_t icount = 0, lcount = 0;
  QUORUM_CHECK(parse_idx(ipath, ib, img, verify_content, &rows, &cols, &icount));
  QUORUM_CHECK(parse_idx(lpath, lb, lab, verify_content, &r1, &c1, &lcount));
  if (icount != lcount)
    return fail(QUORUM_ERR_INVALID_ARG, kSub, "{} has {} images but {} has {} labels", ipath,
                icount, lpath, lcount);
  out->channels = 1, out->height = rows, out->width = cols, out->classes = 10;
  out->count = icount;
  out->images.assign(ib.begin() + 16, ib.end());
  out->labels.assign(lb.begin() + 8, lb.end());
  for (size_t i = 0; i < lcount; ++i)
    if (out->labels[i] >= 10)
      return fail(QUORUM_ERR_INVALID_ARG, kSub, "{}: label {} of record {} is not in 0..9", lpath,
                  out->labels[i], i);
  out->mean = {0.2860f, 0.2860f, 0.2860f};
  out->stddev = {0.3530f, 0.3530f, 0.3530f};
  return kOk;
}

// zlib's description of the stream's error, without the path it prefixes.
std::string gz_reason(gzFile f, const std::string &path) {
  int code = 0;
  const char *text = gzerror(f, &code);
  std::string why = text ? text : "";
  if (why.rfind(path + ": ", 0) == 0) why = why.substr(path.size() + 2);
  if (code == Z_BUF_ERROR) return "truncated gzip stream (" + why + ")";
  if (code == Z_DATA_ERROR) return "corrupt gzip data (" + why + ")";
  return "read error (" + why + ")";
}

}  // namespace

void Dataset::truncate(size_t n) {
  if (n >= count) return;
  count = n;
  images.resize(n * image_size());
  labels.resize(n);
}

Status read_gzip_file(const std::string &path, size_t max_bytes, std::vector<uint8_t> *out) {
  out->clear();
  // O_NONBLOCK: opening a FIFO must not wait for a writer (nor a device open
  // block); only regular files are read, and never more than max_bytes.
  int fd = ::open(path.c_str(), O_RDONLY | O_NONBLOCK | O_NOCTTY | O_CLOEXEC);
  if (fd < 0)
    return fail(QUORUM_ERR_INVALID_ARG, kSub, "{}: cannot open: {}", path, std::strerror(errno));
  struct stat st {};
  std::string why = ::fstat(fd, &st) != 0 ? std::strerror(errno) : wrong_kind(st, false);
  if (!why.empty()) {
    ::close(fd);
    return fail(QUORUM_ERR_INVALID_ARG, kSub, "{}: {}", path, why);
  }
  ::fcntl(fd, F_SETFL, ::fcntl(fd, F_GETFL) & ~O_NONBLOCK);
  gzFile f = gzdopen(fd, "rb");  // owns fd from here, closed by gzclose
  if (f == nullptr) {
    ::close(fd);
    return fail(QUORUM_ERR_NO_MEMORY, kSub, "{}: cannot open: out of memory", path);
  }
  gzbuffer(f, 1 << 17);
  std::vector<uint8_t> &buf = *out;
  size_t used = 0;
  for (;;) {
    // Grows by doubling from 64 KiB: small files stay cheap to read.
    if (buf.size() == used) buf.resize(std::max<size_t>(buf.size() * 2, 1 << 16));
    int n = gzread(f, buf.data() + used, unsigned(std::min<size_t>(buf.size() - used, 1u << 30)));
    if (n < 0) {
      std::string why = gz_reason(f, path);
      gzclose(f);
      return fail(QUORUM_ERR_INVALID_ARG, kSub, "{}: {}", path, why);
    }
    if (n == 0) break;
    used += size_t(n);
    if (used > max_bytes) {
      gzclose(f);
      return fail(QUORUM_ERR_INVALID_ARG, kSub, "{}: more than the expected {} bytes of data", path,
                  max_bytes);
    }
  }
  // gzread reports a stream cut short as a clean end of file; gzclose_r's Z_BUF_ERROR
  // (or gzerror) is where the truncation shows.
  int code = 0;
  gzerror(f, &code);
  why = gz_reason(f, path);
  int rc = gzclose(f);
  if (code != Z_OK || (rc != Z_OK && rc != Z_BUF_ERROR))
    return fail(QUORUM_ERR_INVALID_ARG, kSub, "{}: {}", path, why);
  if (rc == Z_BUF_ERROR)
    return fail(QUORUM_ERR_INVALID_ARG, kSub, "{}: truncated gzip stream (ends after {} bytes)",
                path, used);
  buf.resize(used);
  return kOk;
}

Status load_fashion_mnist(const std::string &dir, bool verify_content, DataSplit *out) {
  const std::string d = dir.empty() ? kFashionMnistDefaultDir : dir;
  QUORUM_CHECK(check_data_dir(d));
  QUORUM_CHECK(
      load_idx_pair(d, kFashionMnistFiles[0], kFashionMnistFiles[1], verify_content, &out->train));
  QUORUM_CHECK(
      load_idx_pair(d, kFashionMnistFiles[2], kFashionMnistFiles[3], verify_content, &out->test));
  out->train.name = out->test.name = "fashion-mnist";
  return kOk;
}

Status load_cifar10(const std::string &dir, DataSplit *out) {
  if (dir.empty())
    return fail(QUORUM_ERR_INVALID_ARG, kSub,
                "cifar10 needs a data directory (--data-dir: the folder with data_batch_1..5.bin, "
                "test_batch.bin)");
  QUORUM_CHECK(check_data_dir(dir));
  // The official files hold 10000 records each; any whole number is accepted.
  constexpr size_t kRecord = 1 + 3072, kMaxPerFile = 10000;
  auto load = [&](const std::vector<std::string> &files, Dataset *ds) -> Status {
    ds->name = "cifar10";
    ds->channels = 3, ds->height = 32, ds->width = 32, ds->classes = 10;
    ds->count = 0;
    ds->images.clear();
    ds->labels.clear();
    for (const std::string &name : files) {
      const std::string path = join_path(dir, name);
      std::vector<uint8_t> bytes;
      QUORUM_CHECK(read_gzip_file(path, kRecord * kMaxPerFile, &bytes));
      if (bytes.empty() || bytes.size() % kRecord != 0)
        return fail(QUORUM_ERR_INVALID_ARG, kSub,
                    "{}: {} bytes is not a whole number of records of 3073 bytes (1 label + 3072 "
                    "pixels; at most {} records per file)",
                    path, bytes.size(), kMaxPerFile);
      const size_t records = bytes.size() / kRecord;
      for (size_t r = 0; r < records; ++r) {
        const uint8_t *rec = bytes.data() + r * kRecord;
        if (rec[0] >= 10)
          return fail(QUORUM_ERR_INVALID_ARG, kSub, "{}: label {} of record {} is not in 0..9",
                      path, rec[0], r);
        ds->labels.push_back(rec[0]);
        ds->images.insert(ds->images.end(), rec + 1, rec + kRecord);
      }
      ds->count += records;
    }
    ds->mean = {0.4914f, 0.4822f, 0.4465f};
    ds->stddev = {0.2470f, 0.2435f, 0.2616f};
    return kOk;
  };
  QUORUM_CHECK(load({"data_batch_1.bin", "data_batch_2.bin", "data_batch_3.bin", "data_batch_4.bin",
                     "data_batch_5.bin"},
                    &out->train));
  return load({"test_batch.bin"}, &out->test);
}

void make_synthetic(const SyntheticOptions &o, DataSplit *out) {
  const size_t size = size_t(o.channels) * o.height * o.width;
  Rng rng(Rng::mix(o.seed, 0x5e7));
  std::vector<float> templates(size_t(o.classes) * size);
  for (float &t : templates) t = float(rng.uniform(0.2, 0.8));
  auto fill = [&](size_t count, Dataset *ds) {
    ds->name = "synthetic";
    ds->channels = o.channels, ds->height = o.height, ds->width = o.width;
    ds->classes = o.classes;
    ds->count = count;
    ds->images.resize(count * size);
    ds->labels.resize(count);
    for (size_t i = 0; i < count; ++i) {
      int label = int(rng.below(uint64_t(o.classes)));
      ds->labels[i] = uint8_t(label);
      const float *t = templates.data() + size_t(label) * size;
      for (size_t k = 0; k < size; ++k) {
        double v = t[k] + o.noise * 0.6 * (rng.uniform() - 0.5) * 2.0;
        ds->images[i * size + k] = uint8_t(std::clamp(v, 0.0, 1.0) * 255.0 + 0.5);
      }
    }
    ds->mean = {0.5f, 0.5f, 0.5f};
    ds->stddev = {0.25f, 0.25f, 0.25f};
  };
  fill(o.train_count, &out->train);
  fill(o.test_count, &out->test);
}

Status load_dataset(const std::string &name, const std::string &dir, bool verify_content,
                    DataSplit *out) {
  if (name == "fashion-mnist") return load_fashion_mnist(dir, verify_content, out);
  if (name == "cifar10") return load_cifar10(dir, out);
  if (name == "synthetic") {
    make_synthetic(SyntheticOptions{}, out);
    return kOk;
  }
  return fail(QUORUM_ERR_INVALID_ARG, kSub,
              "unknown data set '{}' (known: fashion-mnist, cifar10, synthetic)", name);
}

ShardSampler::ShardSampler(size_t count, uint64_t seed, int rank, int world)
    : count_(count), seed_(seed), rank_(rank), world_(std::max(1, world)) {}

std::vector<uint32_t> ShardSampler::epoch_indices(int64_t epoch) const {
  std::vector<uint32_t> order(count_);
  std::iota(order.begin(), order.end(), 0u);
  Rng rng(Rng::mix(seed_, 0x5a3f1e00u + uint64_t(epoch)));
  for (size_t i = count_; i > 1; --i) std::swap(order[i - 1], order[rng.below(i)]);
  // Strided: rank r takes order[r], order[r + P], ... so that the ranks'
  // batches of step k together hold the same examples as one rank's batch of
  // P times the size (P ranks at batch b train like one rank at batch P*b).
  const size_t shard = shard_size();
  std::vector<uint32_t> mine(shard);
  for (size_t i = 0; i < shard; ++i) mine[i] = order[i * size_t(world_) + size_t(rank_)];
  return mine;
}

namespace {
template <typename T>
void assemble(const Dataset &data, const uint32_t *indices, int n, T *images, int32_t *labels) {
  const size_t plane = size_t(data.height) * data.width, size = data.image_size();
  for (int i = 0; i < n; ++i) {
    const uint8_t *src = data.images.data() + size_t(indices[i]) * size;
    T *dst = images + size_t(i) * size;
    for (int c = 0; c < data.channels; ++c) {
      const T scale = T(1.0 / (255.0 * data.stddev[c])), shift = T(data.mean[c] / data.stddev[c]);
      for (size_t k = 0; k < plane; ++k) dst[c * plane + k] = T(src[c * plane + k]) * scale - shift;
    }
    labels[i] = data.labels[indices[i]];
  }
}
}  // namespace

void assemble_batch(const Dataset &data, const uint32_t *indices, int n, float *images,
                    int32_t *labels) {
  assemble(data, indices, n, images, labels);
}
void assemble_batch(const Dataset &data, const uint32_t *indices, int n, double *images,
                    int32_t *labels) {
  assemble(data, indices, n, images, labels);
}

}  // namespace quorum::trainer
