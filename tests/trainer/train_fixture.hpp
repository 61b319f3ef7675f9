// train_fixture.hpp: what the trainer's gtests share: a scratch folder, and a
// fixture that trains fm-s on a small synthetic set (16 steps per epoch).
#pragma once

#include <gtest/gtest.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <memory>
#include <string>

#include "trainer/trainer.hpp"

namespace quorum::trainer {

class TempDir {
 public:
  TempDir() {
    char tmpl[] = "/tmp/quorum_trainer_test_XXXXXX";
    path_ = mkdtemp(tmpl);
  }
  ~TempDir() { std::system(("rm -rf '" + path_ + "'").c_str()); }
  std::string file(const std::string &name) const { return path_ + "/" + name; }
  int entries() const {
    int n = 0;
    std::string cmd = "ls -A '" + path_ + "' | wc -l";
    FILE *p = popen(cmd.c_str(), "r");
    if (p && std::fscanf(p, "%d", &n) != 1) n = -1;
    if (p) pclose(p);
    return n;
  }

 private:
  std::string path_;
};

class Training : public ::testing::Test {
 protected:
  void SetUp() override {
    SyntheticOptions o;
    o.train_count = 512;
    o.test_count = 128;
    make_synthetic(o, &data_);
    cfg_.batch = 32;  // 16 steps per epoch
    cfg_.epochs = 3;
    cfg_.lr = 0.02;
    cfg_.weight_decay = 1e-4;
    cfg_.seed = 5;
  }
  // Trains cfg on data_ with the cpu backend, one process.
  Status try_run(const TrainConfig &cfg, TrainResult *r, TrainObserver *observer = nullptr) {
    std::unique_ptr<Backend> be;
    EXPECT_EQ(make_backend("cpu", BackendOptions{}, &be), kOk);
    LocalGradientReducer reducer;
    return train(cfg, be.get(), data_, &reducer, observer, r);
  }
  TrainResult run(const TrainConfig &cfg) {
    TrainResult r;
    EXPECT_EQ(try_run(cfg, &r), kOk) << last_error();
    return r;
  }
  DataSplit data_;
  TrainConfig cfg_;
};

}  // namespace quorum::trainer
