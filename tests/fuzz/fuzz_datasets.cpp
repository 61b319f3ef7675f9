// fuzz_datasets.cpp: libFuzzer target for the Fashion-MNIST IDX loader and
// the CIFAR-10 binary loader, through their real file reading (gzip or
// plain). The input's first byte picks the loader; for IDX the rest is split
// into the images file and the labels file at a point the next two bytes give.
// The files live in a private folder under /dev/shm (or TMPDIR) whose test-set
// files are links to the training ones. A loaded set must be self-consistent.
#include <sys/stat.h>
#include <unistd.h>

#include <cstdint>
#include <cstdlib>
#include <fstream>
#include <string>

#include "trainer/dataset.hpp"

namespace {

struct Folder {
  std::string root, idx, cifar;
  Folder() {
    const char *base = access("/dev/shm", W_OK) == 0 ? "/dev/shm" : std::getenv("TMPDIR");
    root = std::string(base ? base : "/tmp") + "/quorum_fuzz_datasets_XXXXXX";
    if (mkdtemp(root.data()) == nullptr) std::abort();
    idx = root + "/idx", cifar = root + "/cifar";
    if (mkdir(idx.c_str(), 0700) != 0 || mkdir(cifar.c_str(), 0700) != 0) std::abort();
    link_to(idx, "train-images-idx3-ubyte.gz", "t10k-images-idx3-ubyte.gz");
    link_to(idx, "train-labels-idx1-ubyte.gz", "t10k-labels-idx1-ubyte.gz");
    for (const char *name : {"data_batch_2.bin", "data_batch_3.bin", "data_batch_4.bin",
                             "data_batch_5.bin", "test_batch.bin"}) {
      link_to(cifar, "data_batch_1.bin", name);
    }
  }
  ~Folder() {
    for (const std::string &dir : {idx, cifar}) {
      for (const char *name :
           {"train-images-idx3-ubyte.gz", "t10k-images-idx3-ubyte.gz", "train-labels-idx1-ubyte.gz",
            "t10k-labels-idx1-ubyte.gz", "data_batch_1.bin", "data_batch_2.bin", "data_batch_3.bin",
            "data_batch_4.bin", "data_batch_5.bin", "test_batch.bin"}) {
        unlink((dir + "/" + name).c_str());
      }
      rmdir(dir.c_str());
    }
    rmdir(root.c_str());
  }
  static void link_to(const std::string &dir, const char *target, const char *name) {
    if (symlink(target, (dir + "/" + name).c_str()) != 0) std::abort();
  }
};

void write_file(const std::string &path, const uint8_t *data, size_t size) {
  std::ofstream f(path, std::ios::binary | std::ios::trunc);
  f.write(reinterpret_cast<const char *>(data), std::streamsize(size));
  if (!f) std::abort();
}

void check(const quorum::trainer::Dataset &d) {
  if (d.labels.size() != d.count || d.images.size() != d.count * d.image_size()) std::abort();
  for (uint8_t label : d.labels) {
    if (label >= d.classes) std::abort();
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  static const Folder folder = [] {
    setenv("QUORUM_LOG_LEVEL", "error", 1);
    return Folder();
  }();
  if (size < 3) return 0;
  quorum::trainer::DataSplit split;
  quorum::Status s;
  if (data[0] & 1) {
    write_file(folder.cifar + "/data_batch_1.bin", data + 1, size - 1);
    s = quorum::trainer::load_cifar10(folder.cifar, &split);
  } else {
    const size_t rest = size - 3;
    const size_t cut = rest == 0 ? 0 : (size_t(data[1]) << 8 | data[2]) % (rest + 1);
    write_file(folder.idx + "/train-images-idx3-ubyte.gz", data + 3, cut);
    write_file(folder.idx + "/train-labels-idx1-ubyte.gz", data + 3 + cut, rest - cut);
    s = quorum::trainer::load_fashion_mnist(folder.idx, false, &split);
  }
  if (s == quorum::kOk) {
    check(split.train);
    check(split.test);
  }
  return 0;
}
