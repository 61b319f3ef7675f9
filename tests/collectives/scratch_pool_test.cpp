// scratch_pool_test.cpp: the scratch pool reuses its buffers and stays bounded
// by the leases held at once, whatever order of sizes it is asked for.
#include "collectives/scratch_pool.hpp"

#include <gtest/gtest.h>

#include <cstring>
#include <random>

namespace quorum {
namespace {

TEST(ScratchPool, GrowingSizesReplaceTheBufferInsteadOfAddingOne) {
  ScratchPool pool;
  for (size_t bytes = 1000; bytes <= (1u << 20); bytes = bytes * 3 / 2) {
    ScratchPool::Lease lease = pool.acquire(bytes);
    std::memset(lease.data(), 0x5a, bytes);  // the whole size is usable
    EXPECT_LE(pool.bytes_held(), bytes + bytes / 8);
  }
}

TEST(ScratchPool, RandomSizesHoldAtMostOneBufferPerConcurrentLease) {
  ScratchPool pool;
  std::mt19937 rng(7);
  const size_t max_bytes = 1u << 20;
  for (int i = 0; i < 2000; ++i) {
    const size_t a = 1 + rng() % max_bytes, b = 1 + rng() % max_bytes;
    ScratchPool::Lease first = pool.acquire(a);
    ScratchPool::Lease second = pool.acquire(b);
    ASSERT_NE(first.data(), second.data());
    first.data()[a - 1] = 1, second.data()[b - 1] = 2;
  }
  // Two leases at once: two buffers, each at most a size class above the max.
  EXPECT_LE(pool.bytes_held(), 2 * (max_bytes + max_bytes / 8));
}

TEST(ScratchPool, AFittingFreeBufferIsReused) {
  ScratchPool pool;
  uint8_t *first;
  {
    ScratchPool::Lease lease = pool.acquire(4096);
    first = lease.data();
  }
  ScratchPool::Lease again = pool.acquire(100);
  EXPECT_EQ(again.data(), first);
  EXPECT_EQ(pool.bytes_held(), 4096u);
}

}  // namespace
}  // namespace quorum
