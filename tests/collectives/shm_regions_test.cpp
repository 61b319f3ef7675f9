// shm_regions_test.cpp: symmetric allocations whose page rounding or total
// over the ranks would wrap around size_t are refused, in one process (a
// one-rank group, and rank 0 of a two-rank group whose peer echoes it).
#include "collectives/shm/shm_regions.hpp"

#include <gtest/gtest.h>

#include <cstring>

#include "runtime/memory.hpp"

namespace quorum {
namespace {

// rank 0 of `size`; every peer sends what rank 0 sends.
ShmGroup echo_group(int size) {
  ShmGroup g;
  g.size = size;
  g.allgather = [size](const void *mine, void *all, size_t bytes) {
    for (int q = 0; q < size; ++q)
      std::memcpy(static_cast<uint8_t *>(all) + q * bytes, mine, bytes);
    return kOk;
  };
  return g;
}

TEST(ShmRegions, SizesThatWrapWhenRoundedAreRefused) {
  ShmRegions regions;
  for (size_t bytes : {SIZE_MAX, SIZE_MAX - 4095, kMaxAllocBytes + 1}) {
    void *p = &regions;
    EXPECT_EQ(regions.alloc(echo_group(1), bytes, &p), QUORUM_ERR_NO_MEMORY) << bytes;
    EXPECT_EQ(p, nullptr) << bytes;
    EXPECT_NE(std::string(last_error()).find(std::to_string(bytes)), std::string::npos)
        << last_error();
  }
}

TEST(ShmRegions, TotalsThatWrapOverTheRanksAreRefused) {
  ShmRegions regions;
  // stride 2^63 + 4096: two ranks' worth wraps to 8 KiB.
  const size_t bytes = (size_t{1} << 63) + 4096;
  void *p = &regions;
  EXPECT_EQ(regions.alloc(echo_group(2), bytes, &p), QUORUM_ERR_NO_MEMORY);
  EXPECT_EQ(p, nullptr);
  EXPECT_NE(std::string(last_error()).find("too big to map"), std::string::npos) << last_error();
  p = &regions;
  EXPECT_EQ(regions.alloc(echo_group(4), kMaxAllocBytes / 2, &p), QUORUM_ERR_NO_MEMORY);
  EXPECT_EQ(p, nullptr);
}

TEST(ShmRegions, OrdinarySizesStillWork) {
  ShmRegions regions;
  void *p = nullptr;
  ASSERT_EQ(regions.alloc(echo_group(2), 5000, &p), kOk) << last_error();
  ASSERT_NE(p, nullptr);
  EXPECT_EQ(static_cast<uint8_t *>(p)[4999], 0);
  ShmRegions::Location loc = regions.locate(p, 5000);
  EXPECT_NE(loc.region, 0u);
  EXPECT_NE(regions.peer_address(loc, 1, 8192), nullptr)
      << "rank 1's part: one page-rounded stride on";
  EXPECT_TRUE(regions.release(p));
}

}  // namespace
}  // namespace quorum
