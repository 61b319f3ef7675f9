// fashion_mnist_real_test.cpp: the real Fashion-MNIST files of Debian's
// dataset-fashion-mnist package: headers, sizes and content checksums, and a
// short training run reaching a sane accuracy. Exits 77 (skip) without them.
#include <gtest/gtest.h>
#include <unistd.h>

#include <string>

#include "trainer/dataset.hpp"
#include "trainer/trainer.hpp"

namespace quorum::trainer {
namespace {

std::string data_dir() {
  const char *env = std::getenv("QUORUM_FASHION_MNIST_DIR");
  return env ? env : kFashionMnistDefaultDir;
}

TEST(FashionMnistReal, HeadersSizesAndChecksums) {
  for (const IdxFileInfo &f : kFashionMnistFiles) {
    std::vector<uint8_t> bytes;
    ASSERT_EQ(read_gzip_file(data_dir() + "/" + f.file, f.bytes, &bytes), kOk) << last_error();
    EXPECT_EQ(bytes.size(), f.bytes) << f.file;
    EXPECT_EQ(bytes[2], 0x08) << f.file;
    EXPECT_EQ(bytes[3], f.magic & 0xff) << f.file;
  }
  DataSplit s;
  ASSERT_EQ(load_fashion_mnist(data_dir(), true, &s), kOk) << last_error();
  EXPECT_EQ(s.train.count, 60000u);
  EXPECT_EQ(s.test.count, 10000u);
  EXPECT_EQ(s.train.height, 28);
  // Every class is present 6000 times in the training set.
  std::vector<int> per_class(10);
  for (uint8_t l : s.train.labels) ++per_class[l];
  for (int c = 0; c < 10; ++c) EXPECT_EQ(per_class[c], 6000) << "class " << c;
}

TEST(FashionMnistReal, ShortTrainingLearns) {
  DataSplit s;
  ASSERT_EQ(load_fashion_mnist(data_dir(), true, &s), kOk) << last_error();
  s.train.truncate(6400);
  s.test.truncate(2000);
  std::unique_ptr<Backend> be;
  ASSERT_EQ(make_backend("cpu", BackendOptions{}, &be), kOk);
  TrainConfig cfg;
  cfg.epochs = 1;
  LocalGradientReducer reducer;
  TrainResult r;
  ASSERT_EQ(train(cfg, be.get(), s, &reducer, nullptr, &r), kOk) << last_error();
  EXPECT_EQ(r.global_step, 100);
  EXPECT_GT(r.last.test_accuracy, 0.70);  // ~0.78-0.80 after 100 steps
  EXPECT_LT(r.last.train_loss, 1.5);      // mean over the epoch, from 2.3 at the start
}

}  // namespace
}  // namespace quorum::trainer

int main(int argc, char **argv) {
  std::string probe = quorum::trainer::data_dir() + "/train-images-idx3-ubyte.gz";
  if (access(probe.c_str(), R_OK) != 0) {
    std::printf("SKIP: %s not found (install dataset-fashion-mnist)\n", probe.c_str());
    return 77;
  }
  ::testing::InitGoogleTest(&argc, argv);
  return RUN_ALL_TESTS();
}
