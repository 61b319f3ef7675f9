// store_bootstrap_test.cpp: the store bootstrap with threads as ranks, the
// validation of its QUORUM_* environment, and bootstrap_from_environment.
#include "runtime/bootstrap/store_bootstrap.hpp"

#include <gtest/gtest.h>
#include <stdlib.h>

#include <thread>

#include "runtime/bootstrap/tcp_store.hpp"
#include "runtime/knobs.hpp"

namespace quorum {
namespace {

// Runs `body(rank)` on `size` threads and returns each rank's status.
template <typename F>
std::vector<Status> run_ranks(int size, F body) {
  std::vector<Status> result(static_cast<size_t>(size), QUORUM_ERR_INTERNAL);
  std::vector<std::thread> threads;
  for (int r = 0; r < size; ++r) threads.emplace_back([&, r] { result[r] = body(r); });
  for (auto &t : threads) t.join();
  return result;
}

class StoreBootstrapTest : public ::testing::Test {
 protected:
  void SetUp() override {
    TcpStoreServer::Options o;
    o.token = "tok";
    ASSERT_EQ(TcpStoreServer::start(o, &server_), kOk);
  }
  StoreBootstrapParams params(int rank, int size) {
    StoreBootstrapParams p;
    p.rank = rank;
    p.size = size;
    p.address = server_->address();
    p.token = "tok";
    return p;
  }
  std::unique_ptr<TcpStoreServer> server_;
};

TEST_F(StoreBootstrapTest, AllgatherRoundsOfDifferentSizes) {
  constexpr int kSize = 5;
  auto status = run_ranks(kSize, [&](int rank) -> Status {
    std::unique_ptr<Bootstrap> b;
    QUORUM_CHECK(make_store_bootstrap(params(rank, kSize), &b));
    if (b->rank() != rank || b->size() != kSize || std::string(b->name()) != "store") {
      return QUORUM_ERR_INTERNAL;
    }
    for (size_t bytes : {size_t{4}, size_t{1}, size_t{0}, size_t{10000}}) {
      std::vector<uint8_t> in(bytes), out(bytes * kSize);
      for (size_t i = 0; i < bytes; ++i) in[i] = static_cast<uint8_t>(rank * 13 + i);
      QUORUM_CHECK(b->allgather(in.data(), out.data(), bytes));
      for (int r = 0; r < kSize; ++r) {
        for (size_t i = 0; i < bytes; ++i) {
          if (out[r * bytes + i] != static_cast<uint8_t>(r * 13 + i)) {
            ADD_FAILURE() << "rank " << rank << " bytes " << bytes << ": wrong byte " << i
                          << " from rank " << r;
            return QUORUM_ERR_INTERNAL;
          }
        }
      }
    }
    return b->barrier();
  });
  for (int r = 0; r < kSize; ++r) EXPECT_EQ(status[r], kOk) << "rank " << r;
}

TEST_F(StoreBootstrapTest, FinishedRoundsAreDeleted) {
  constexpr int kSize = 3;
  auto status = run_ranks(kSize, [&](int rank) -> Status {
    std::unique_ptr<Bootstrap> b;
    QUORUM_CHECK(make_store_bootstrap(params(rank, kSize), &b));
    for (int round = 0; round < 4; ++round) {
      int in = rank, out[kSize];
      QUORUM_CHECK(b->allgather(&in, out, sizeof(int)));
    }
    return kOk;
  });
  for (int r = 0; r < kSize; ++r) ASSERT_EQ(status[r], kOk);
  std::unique_ptr<TcpStoreClient> c;
  ASSERT_EQ(TcpStoreClient::connect(server_->address(), "tok", Deadline::after_ms(5000), &c), kOk);
  std::vector<uint8_t> v;
  bool found = true;
  ASSERT_EQ(c->try_get("ag/0/1", &v, Deadline::after_ms(1), &found), kOk);
  EXPECT_FALSE(found);  // round 0 is gone
  ASSERT_EQ(c->try_get("ag/2/1", &v, Deadline::after_ms(1), &found), kOk);
  EXPECT_FALSE(found);
  ASSERT_EQ(c->try_get("ag/3/1", &v, Deadline::after_ms(1), &found), kOk);
  EXPECT_TRUE(found);  // the last round stays (someone may still be reading it)
}

TEST_F(StoreBootstrapTest, SizeMismatchIsReported) {
  auto status = run_ranks(2, [&](int rank) -> Status {
    std::unique_ptr<Bootstrap> b;
    QUORUM_CHECK(make_store_bootstrap(params(rank, 2), &b));
    std::vector<uint8_t> in(rank == 0 ? 4 : 8), out(16);
    return b->allgather(in.data(), out.data(), in.size());
  });
  EXPECT_EQ(status[0], QUORUM_ERR_MISMATCH);
  EXPECT_EQ(status[1], QUORUM_ERR_MISMATCH);
}

TEST_F(StoreBootstrapTest, MissingRankTimesOut) {
  knob_timeout_ms.set_override("300");
  std::unique_ptr<Bootstrap> b;
  ASSERT_EQ(make_store_bootstrap(params(0, 2), &b), kOk);
  int in = 0, out[2];
  EXPECT_EQ(b->allgather(&in, out, sizeof(int)), QUORUM_ERR_TIMEOUT);
  EXPECT_NE(std::string(last_error()).find("for rank 1"), std::string::npos) << last_error();
  knob_timeout_ms.set_override(std::nullopt);
}

TEST_F(StoreBootstrapTest, WrongTokenFails) {
  auto p = params(0, 1);
  p.token = "nope";
  std::unique_ptr<Bootstrap> b;
  EXPECT_EQ(make_store_bootstrap(p, &b), QUORUM_ERR_BOOTSTRAP);
  EXPECT_FALSE(b);
}

TEST_F(StoreBootstrapTest, InvalidParams) {
  std::unique_ptr<Bootstrap> b;
  EXPECT_EQ(make_store_bootstrap(params(2, 2), &b), QUORUM_ERR_INVALID_ARG);
  EXPECT_EQ(make_store_bootstrap(params(-1, 2), &b), QUORUM_ERR_INVALID_ARG);
  EXPECT_EQ(make_store_bootstrap(params(0, 0), &b), QUORUM_ERR_INVALID_ARG);
}

// Sets the four variables (nullptr: unset) for the duration of a test.
class Env : public ::testing::Test {
 protected:
  void TearDown() override {
    for (const char *v : {"QUORUM_RANK", "QUORUM_SIZE", "QUORUM_STORE", "QUORUM_TOKEN",
                          "QUORUM_BOOTSTRAP", "PMIX_RANK", "PMIX_NAMESPACE"}) {
      unsetenv(v);
    }
    reload_knobs();
  }
  void set(const char *rank, const char *size, const char *store, const char *token) {
    const char *names[] = {"QUORUM_RANK", "QUORUM_SIZE", "QUORUM_STORE", "QUORUM_TOKEN"};
    const char *values[] = {rank, size, store, token};
    for (int i = 0; i < 4; ++i) {
      if (values[i]) {
        setenv(names[i], values[i], 1);
      } else {
        unsetenv(names[i]);
      }
    }
  }
  // The status and whether last_error() names `variable`.
  Status parse_expecting(const char *variable) {
    StoreBootstrapParams p;
    Status s = store_params_from_environment(&p);
    EXPECT_NE(std::string(last_error()).find(variable), std::string::npos) << last_error();
    return s;
  }
};

TEST_F(Env, ValidEnvironmentParses) {
  set("1", "4", "127.0.0.1:1234", "abc");
  StoreBootstrapParams p;
  ASSERT_EQ(store_params_from_environment(&p), kOk);
  EXPECT_EQ(p.rank, 1);
  EXPECT_EQ(p.size, 4);
  EXPECT_EQ(p.address, "127.0.0.1:1234");
  EXPECT_EQ(p.token, "abc");
}

TEST_F(Env, ErrorsNameTheVariable) {
  set(nullptr, "2", "127.0.0.1:1", "t");
  EXPECT_EQ(parse_expecting("QUORUM_RANK"), QUORUM_ERR_BOOTSTRAP);
  set("x1", "2", "127.0.0.1:1", "t");
  EXPECT_EQ(parse_expecting("QUORUM_RANK"), QUORUM_ERR_INVALID_ARG);
  set("1", nullptr, "127.0.0.1:1", "t");
  EXPECT_EQ(parse_expecting("QUORUM_SIZE"), QUORUM_ERR_BOOTSTRAP);
  set("1", "0", "127.0.0.1:1", "t");
  EXPECT_EQ(parse_expecting("QUORUM_SIZE"), QUORUM_ERR_INVALID_ARG);
  set("1", "2 ", "127.0.0.1:1", "t");
  EXPECT_EQ(parse_expecting("QUORUM_SIZE"), QUORUM_ERR_INVALID_ARG);
  set("2", "2", "127.0.0.1:1", "t");
  EXPECT_EQ(parse_expecting("QUORUM_RANK=2"), QUORUM_ERR_INVALID_ARG);
  set("-1", "2", "127.0.0.1:1", "t");
  EXPECT_EQ(parse_expecting("QUORUM_RANK=-1"), QUORUM_ERR_INVALID_ARG);
  set("0", "2", nullptr, "t");
  EXPECT_EQ(parse_expecting("QUORUM_STORE"), QUORUM_ERR_BOOTSTRAP);
  set("0", "2", "localhost", "t");
  EXPECT_EQ(parse_expecting("QUORUM_STORE"), QUORUM_ERR_INVALID_ARG);
  set("0", "2", "localhost:0", "t");
  EXPECT_EQ(parse_expecting("QUORUM_STORE"), QUORUM_ERR_INVALID_ARG);
  set("0", "2", "127.0.0.1:1", nullptr);
  EXPECT_EQ(parse_expecting("QUORUM_TOKEN"), QUORUM_ERR_BOOTSTRAP);
}

TEST_F(Env, SelectsSingleWithoutLauncher) {
  set(nullptr, nullptr, nullptr, nullptr);
  std::unique_ptr<Bootstrap> b;
  ASSERT_EQ(bootstrap_from_environment(&b), kOk);
  EXPECT_STREQ(b->name(), "single");
  EXPECT_EQ(b->rank(), 0);
  EXPECT_EQ(b->size(), 1);
  int in = 42, out = 0;
  ASSERT_EQ(b->allgather(&in, &out, sizeof(int)), kOk);
  EXPECT_EQ(out, 42);
  EXPECT_EQ(b->barrier(), kOk);
}

TEST_F(Env, SelectsStoreFromQuorumVariables) {
  TcpStoreServer::Options o;
  o.token = "job";
  std::unique_ptr<TcpStoreServer> server;
  ASSERT_EQ(TcpStoreServer::start(o, &server), kOk);
  set("0", "1", server->address().c_str(), "job");
  std::unique_ptr<Bootstrap> b;
  ASSERT_EQ(bootstrap_from_environment(&b), kOk) << last_error();
  EXPECT_STREQ(b->name(), "store");
  int in = 7, out = 0;
  ASSERT_EQ(b->allgather(&in, &out, sizeof(int)), kOk);
  EXPECT_EQ(out, 7);
}

TEST_F(Env, BadStoreEnvironmentIsAnErrorNotAFallback) {
  set("0", "2", "127.0.0.1:1", nullptr);
  std::unique_ptr<Bootstrap> b;
  EXPECT_EQ(bootstrap_from_environment(&b), QUORUM_ERR_BOOTSTRAP);
  EXPECT_FALSE(b);
}

TEST_F(Env, ForcedModes) {
  set("0", "2", "127.0.0.1:1", "t");
  setenv("QUORUM_BOOTSTRAP", "single", 1);
  reload_knobs();
  std::unique_ptr<Bootstrap> b;
  ASSERT_EQ(bootstrap_from_environment(&b), kOk);
  EXPECT_STREQ(b->name(), "single");

  set(nullptr, nullptr, nullptr, nullptr);
  setenv("QUORUM_BOOTSTRAP", "store", 1);
  reload_knobs();
  EXPECT_EQ(bootstrap_from_environment(&b), QUORUM_ERR_BOOTSTRAP);
  EXPECT_NE(std::string(last_error()).find("QUORUM_RANK"), std::string::npos);

  setenv("QUORUM_BOOTSTRAP", "carrier-pigeon", 1);
  reload_knobs();
  EXPECT_EQ(bootstrap_from_environment(&b), QUORUM_ERR_INVALID_ARG);
  EXPECT_NE(std::string(last_error()).find("QUORUM_BOOTSTRAP"), std::string::npos);
}

TEST_F(Env, PmixWithoutLauncherFallsThroughQuietly) {
  // PMIX_RANK set by hand but no PMIx server: auto must still find the single bootstrap.
  setenv("PMIX_RANK", "0", 1);
  std::unique_ptr<Bootstrap> b;
  ASSERT_EQ(bootstrap_from_environment(&b), kOk);
  EXPECT_STREQ(b->name(), "single");
}

TEST_F(Env, ForcedPmixWithoutLauncherFails) {
  setenv("QUORUM_BOOTSTRAP", "pmix", 1);
  reload_knobs();
  std::unique_ptr<Bootstrap> b;
  Status s = bootstrap_from_environment(&b);
  EXPECT_TRUE(s == QUORUM_ERR_BOOTSTRAP || s == QUORUM_ERR_UNSUPPORTED) << status_name(s);
  EXPECT_FALSE(b);
}

}  // namespace
}  // namespace quorum
