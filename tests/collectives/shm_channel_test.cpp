// shm_channel_test.cpp: the shm channel's done prefix on one rank. Ops finish
// their chunk ranges in any order (a later op may finish before an earlier
// one's last chunk); the prefix must cover exactly the ranges below which
// every chunk is finished, and never stall, from one thread or several. Also
// the sizes the channel reads from its knobs (streaming stores, the
// cross-memory path's out-of-place limit).
#include <gtest/gtest.h>

#include <algorithm>
#include <cstring>
#include <random>
#include <thread>
#include <utility>
#include <vector>

#include "collectives/shm/shm.hpp"
#include "collectives/shm/shm_path_choice.hpp"
#include "runtime/knobs.hpp"
#include "tests/support/one_rank_channel.hpp"

namespace quorum {
namespace {

using test::one_rank_channel;

// A size knob of the channel: -1 derives it from the last-level cache (where
// the ranks' buffers leave it), from 64 KiB to `max_automatic` (a virtual
// machine reports its host's whole cache); 0 is never (no limit); else the
// size given.
void check_size_knob(const char *name, size_t (ShmChannel::*read)() const, size_t max_automatic) {
  SCOPED_TRACE(name);
  KnobBase *knob = find_knob(name);
  ASSERT_NE(knob, nullptr);
  knob->set_override(std::string("-1"));
  auto ch = one_rank_channel();
  ASSERT_TRUE(ch);
  EXPECT_GE(((*ch).*read)(), size_t{64} << 10);
  EXPECT_LE(((*ch).*read)(), max_automatic);
  knob->set_override(std::string("0"));
  ch = one_rank_channel();
  ASSERT_TRUE(ch);
  EXPECT_EQ(((*ch).*read)(), SIZE_MAX);
  knob->set_override(std::string("12345"));
  ch = one_rank_channel();
  ASSERT_TRUE(ch);
  EXPECT_EQ(((*ch).*read)(), 12345u);
  knob->set_override(std::nullopt);
}

TEST(ShmChannel, StreamingBytesFromKnob) {
  check_size_knob("QUORUM_SHM_STREAMING_BYTES", &ShmChannel::streaming_bytes, size_t{8} << 20);
}

// QUORUM_SHM_CROSS_MEMORY_BYTES: -1 is 32 KiB per rank when every rank has a
// core of its own (one rank here), 1 MiB otherwise; SIZE_MAX where the ranks
// cannot attach.
TEST(ShmChannel, CrossMemoryBytesFromKnob) {
  KnobBase *knob = find_knob("QUORUM_SHM_CROSS_MEMORY_BYTES");
  ASSERT_NE(knob, nullptr);
  knob->set_override(std::string("-1"));
  auto ch = one_rank_channel();
  ASSERT_TRUE(ch);
  const size_t automatic = ch->cross_memory_bytes();
  EXPECT_TRUE(automatic == size_t{32} << 10 || automatic == SIZE_MAX) << automatic;
  knob->set_override(std::string("0"));
  ch = one_rank_channel();
  ASSERT_TRUE(ch);
  EXPECT_EQ(ch->cross_memory_bytes(), SIZE_MAX);
  knob->set_override(std::string("200000"));
  ch = one_rank_channel();
  ASSERT_TRUE(ch);
  EXPECT_TRUE(ch->cross_memory_bytes() == 200000u || automatic == SIZE_MAX);
  knob->set_override(std::nullopt);
}

// Out of place, the cross-memory path stops at twice the size where
// streaming starts by default.
TEST(ShmChannel, CrossMemoryOutOfPlaceMaxFromKnob) {
  check_size_knob("QUORUM_SHM_CROSS_MEMORY_OUT_OF_PLACE_MAX_BYTES",
                  &ShmChannel::cross_memory_out_of_place_max_bytes, size_t{16} << 20);
  auto ch = one_rank_channel();
  ASSERT_TRUE(ch);
  EXPECT_EQ(ch->cross_memory_out_of_place_max_bytes(), 2 * ch->streaming_bytes());
}

// The probe's verdict from every rank's medians (cross-memory, copy; ns): the
// copy path must be faster by more than a quarter over the ranks' sum.
TEST(ShmChannel, CopyPathWinsOnlyByAClearMargin) {
  EXPECT_TRUE(copy_path_wins({176000, 101000, 176000, 102000}));   // 1.7x
  EXPECT_FALSE(copy_path_wins({100000, 150000, 100000, 150000}));  // cross-memory faster
  EXPECT_FALSE(copy_path_wins({120000, 100000, 120000, 100000}));  // within the margin
  EXPECT_FALSE(copy_path_wins({125000, 100000}));                  // exactly a quarter
  EXPECT_TRUE(copy_path_wins({126000, 100000}));
  // The sum decides: one rank slower on the copy path outweighs the other's gain.
  EXPECT_FALSE(copy_path_wins({200000, 100000, 100000, 300000}));
  EXPECT_FALSE(copy_path_wins({}));
  EXPECT_FALSE(copy_path_wins({100000, 0}));
}

// Far slower: the copy path's summed time above 2.5 times the cross-memory path's.
TEST(ShmChannel, CopyPathFarSlowerOnlyBeyondTwoAndAHalf) {
  EXPECT_TRUE(copy_path_far_slower({170000, 600000, 160000, 610000}));   // 3.7x
  EXPECT_FALSE(copy_path_far_slower({100000, 170000, 100000, 170000}));  // 1.7x
  EXPECT_FALSE(copy_path_far_slower({100000, 250000}));                  // exactly 2.5x
  EXPECT_TRUE(copy_path_far_slower({100000, 251000}));
  EXPECT_FALSE(copy_path_far_slower({176000, 101000}));  // the copy path faster
  EXPECT_FALSE(copy_path_far_slower({}));
  EXPECT_FALSE(copy_path_far_slower({0, 100000}));
}

TEST(ShmChannel, DonePrefixInOrderAndOutOfOrder) {
  auto ch = one_rank_channel();
  ASSERT_NE(ch, nullptr);
  EXPECT_EQ(ch->done_prefix(), 0u);
  ch->finish_chunks(0, 2);
  EXPECT_EQ(ch->done_prefix(), 2u);
  ch->finish_chunks(2, 3);  // an op's first chunk, then the rest
  ch->finish_chunks(2, 5);
  EXPECT_EQ(ch->done_prefix(), 5u);
  ch->finish_chunks(7, 8);  // ahead: 5 and 6 are not finished
  EXPECT_EQ(ch->done_prefix(), 5u);
  ch->finish_chunks(6, 7);
  EXPECT_EQ(ch->done_prefix(), 5u);
  ch->finish_chunks(5, 6);  // the gap closes: everything waiting is absorbed
  EXPECT_EQ(ch->done_prefix(), 8u);
  ch->finish_chunks(10, 11);  // one op ahead, in two calls
  ch->finish_chunks(10, 12);
  ch->finish_chunks(8, 10);
  EXPECT_EQ(ch->done_prefix(), 12u);
  ch->finish_chunks(8, 10);  // a repeated call changes nothing
  EXPECT_EQ(ch->done_prefix(), 12u);
}

// Threads finish shuffled disjoint ranges, some in two calls: the prefix ends
// at the total (no range lost between the lock-free and the locked branch).
TEST(ShmChannel, DonePrefixFromSeveralThreads) {
  for (int trial = 0; trial < 20; ++trial) {
    auto ch = one_rank_channel();
    ASSERT_NE(ch, nullptr);
    std::vector<std::pair<uint64_t, uint64_t>> ranges;
    std::mt19937 rng(static_cast<unsigned>(trial));
    uint64_t at = 0;
    for (int i = 0; i < 400; ++i) {
      const uint64_t n = 1 + rng() % 4;
      ranges.emplace_back(at, at + n);
      at += n;
    }
    std::shuffle(ranges.begin(), ranges.end(), rng);
    const int threads = 4;
    std::vector<std::thread> pool;
    for (int t = 0; t < threads; ++t) {
      pool.emplace_back([&, t] {
        for (size_t i = static_cast<size_t>(t); i < ranges.size(); i += threads) {
          const auto [from, to] = ranges[i];
          if (to - from > 1) ch->finish_chunks(from, from + 1);
          ch->finish_chunks(from, to);
        }
      });
    }
    for (auto &th : pool) th.join();
    EXPECT_EQ(ch->done_prefix(), at) << "trial " << trial;
  }
}

}  // namespace
}  // namespace quorum
