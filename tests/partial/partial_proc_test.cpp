// partial_proc_test.cpp: the partial-collective cases of the inproc test, run
// by ranks that are processes over ucx (under quorum-run or mpirun), with the
// progress thread answering activations while a rank sleeps.
#include <gtest/gtest.h>

#include <algorithm>

#include "tests/partial/partial_cases.hpp"
#include "tests/partial/quorum_cases.hpp"
#include "tests/support/knob_override.hpp"
#include "tests/support/process_main.hpp"

namespace quorum {
namespace {

namespace cases = test::partial_cases;

// With shared memory, `rounds` rounds (and the flush) of a vector above the
// zero-copy threshold all go zero-copy, unless a rank fell so far behind
// that it held more rounds than its symmetric buffers: the rounds on its
// plain ones copy (a 2-core machine under load does that now and then).
void expect_every_round_zero_copy(Communicator &c, const cases::ZeroCopyReport &z,
                                  uint64_t rounds) {
  if (!c.has_shm_channel() || !allreduce_uses_shm()) return;
  if (z.plain_used) {
    EXPECT_GT(z.rounds, 0u) << "rank " << c.rank() << ": no round went zero-copy";
  } else {
    EXPECT_EQ(z.rounds, rounds) << "rank " << c.rank() << ": every round on symmetric buffers";
  }
}

TEST(ProcessPartial, RunsOverUcx) {
  EXPECT_GT(test::process_comm()->size(), 1) << "run under quorum-run or mpirun";
  EXPECT_STREQ(test::process_comm()->transport_name(), "ucx");
}
TEST(ProcessPartial, AllPostTogether) {
  cases::all_post_together(*test::process_comm());
}
TEST(ProcessPartial, OneDriverFirstAndLast) {
  cases::one_driver(*test::process_comm(), 0);
  cases::one_driver(*test::process_comm(), test::process_comm()->size() - 1);
}
TEST(ProcessPartial, RoundsBehind) {
  cases::rounds_behind(*test::process_comm());
}
TEST(ProcessPartial, ActivationDelay) {
  cases::activation_delay(*test::process_comm(), QUORUM_PARTIAL_SOLO);
  cases::activation_delay(*test::process_comm(), QUORUM_PARTIAL_MAJORITY);
}
TEST(ProcessPartial, MajorityOneDriver) {
  cases::majority_one_driver(*test::process_comm());
}
TEST(ProcessPartial, ConservationSolo) {
  cases::conservation(*test::process_comm(), QUORUM_PARTIAL_SOLO, 4);
}
TEST(ProcessPartial, ConservationMajority) {
  cases::conservation(*test::process_comm(), QUORUM_PARTIAL_MAJORITY, 3);
}
// k-of-P quorum: ready messages to each round's counter rank cross processes.
TEST(ProcessPartial, QuorumConservationAndOneDriver) {
  Communicator &c = *test::process_comm();
  const unsigned p = static_cast<unsigned>(c.size());
  test::quorum_cases::conservation(c, 2, 16, 1500);
  test::quorum_cases::conservation(c, p, 8, 1500);
  test::quorum_cases::one_driver(c, p, 1);
}
// Lent posts from quorum_mem_alloc buffers: the rounds read them in place,
// zero-copy on one host (the partial object's channel sees the
// communicator's symmetric buffers), and nothing is lost.
TEST(ProcessPartial, ConservationLentPostsZeroCopy) {
  Communicator &c = *test::process_comm();
  cases::ZeroCopyReport zero_copy;
  cases::conservation(c, QUORUM_PARTIAL_SOLO, 4, 24, 1500, 0, 20000, &zero_copy, false, true);
  expect_every_round_zero_copy(c, zero_copy, 25);
  cases::conservation(c, QUORUM_PARTIAL_MAJORITY, 2, 16, 1000, 0, 20000, nullptr, true, true);
}
// A lent post straight from a fresh quorum_mem_alloc: the first rank out of
// the allocation activates a round naming the new region while its peers may
// still be finishing the allocation; their progress threads must find the
// region (it is registered on every rank before any returns). Every post in
// exactly one result.
TEST(ProcessPartial, LentPostFromFreshAllocation) {
  Communicator &c = *test::process_comm();
  const size_t n = 20000;  // above the zero-copy threshold
  PartialOptions o;
  o.max_staleness = 4;
  std::unique_ptr<PartialAllreduce> p;
  ASSERT_EQ(PartialAllreduce::create(c, n, QUORUM_INT64, QUORUM_SUM, o, &p), QUORUM_OK)
      << last_error();
  std::vector<int64_t> out(n);
  int64_t got = 0;
  PartialRoundInfo info;
  const int kRounds = 16;
  for (int k = 0; k < kRounds; ++k) {
    void *lent = nullptr;
    ASSERT_EQ(c.mem_alloc(n * sizeof(int64_t), &lent), QUORUM_OK) << last_error();
    std::fill_n(static_cast<int64_t *>(lent), n, int64_t{1});
    ASSERT_EQ(p->post_ref(lent), QUORUM_OK) << "round " << k << ": " << last_error();
    ASSERT_EQ(p->wait(out.data(), &info), QUORUM_OK) << "round " << k << ": " << last_error();
    got += out[0];
    ASSERT_EQ(c.mem_free(lent), QUORUM_OK) << last_error();
  }
  ASSERT_EQ(p->flush(out.data(), &info), QUORUM_OK) << last_error();
  got += out[0];
  EXPECT_EQ(got, int64_t{kRounds} * c.size());
  EXPECT_EQ(p->destroy(), QUORUM_OK) << last_error();
}
// A lent post from ordinary memory while the rounds go zero-copy: it is
// copied (the round could not read it in place), so every round stays
// zero-copy, and nothing is lost.
TEST(ProcessPartial, LentPostOutsideSymmetricMemoryIsCopied) {
  Communicator &c = *test::process_comm();
  const size_t n = 20000;
  PartialOptions o;
  o.max_staleness = 4;
  std::unique_ptr<PartialAllreduce> p;
  ASSERT_EQ(PartialAllreduce::create(c, n, QUORUM_INT64, QUORUM_SUM, o, &p), QUORUM_OK)
      << last_error();
  std::vector<int64_t> in(n, 1), out(n);
  int64_t got = 0;
  PartialRoundInfo info;
  for (int k = 0; k < 12; ++k) {
    // In lockstep: no rank holds more rounds than there are symmetric buffers.
    ASSERT_EQ(c.barrier(), QUORUM_OK) << last_error();
    ASSERT_EQ(p->post_ref(in.data()), QUORUM_OK) << last_error();
    ASSERT_EQ(p->wait(out.data(), &info), QUORUM_OK) << last_error();
    got += out[0];
  }
  ASSERT_EQ(p->flush(out.data(), &info), QUORUM_OK) << last_error();
  got += out[0];
  EXPECT_EQ(got, int64_t{12} * c.size());
  if (c.has_shm_channel() && allreduce_uses_shm()) {
    EXPECT_EQ(p->zero_copy_rounds(), 13u) << "12 rounds and the flush";
  }
  EXPECT_EQ(p->destroy(), QUORUM_OK) << last_error();
}
TEST(ProcessPartial, ActivationDuringPostCopy) {
  cases::activation_during_post_copy(*test::process_comm());
}
// Large vectors: the rounds' buffers are symmetric, so the data phase goes
// zero-copy, and ranks that join with nothing posted contribute the identity
// without writing it (skipped as sources).
TEST(ProcessPartial, ConservationSoloZeroCopy) {
  cases::ZeroCopyReport zero_copy;
  cases::conservation(*test::process_comm(), QUORUM_PARTIAL_SOLO, 4, 24, 1500, 0, 20000,
                      &zero_copy);
  expect_every_round_zero_copy(*test::process_comm(), zero_copy, 25);
}
// The same through cross-memory attach (zero-copy off, in 4 KiB blocks):
// every round, flush included, reads and writes the ranks' plain buffers in
// place, and the ranks that join with nothing posted are not read.
TEST(ProcessPartial, ConservationSoloCrossMemory) {
  Communicator &c = *test::process_comm();
  test::KnobOverride zero_copy_off("QUORUM_SHM_ZERO_COPY_BYTES", "0");
  test::KnobOverride from("QUORUM_SHM_CROSS_MEMORY_BYTES", "4096");
  test::KnobOverride block("QUORUM_SHM_CROSS_MEMORY_BLOCK_BYTES", "4096");
  cases::ZeroCopyReport report;
  cases::conservation(c, QUORUM_PARTIAL_SOLO, 4, 24, 1500, 0, 20000, &report);
  EXPECT_EQ(report.rounds, 0u) << "rank " << c.rank();
  // The communicator's channel tells whether the ranks may attach (its
  // threshold is the default's, or off when QUORUM_SHM_CROSS_MEMORY_BYTES=0).
  if (c.has_shm_channel() && allreduce_uses_shm() && c.cross_memory_min_bytes() != SIZE_MAX) {
    EXPECT_EQ(report.cross_memory_rounds, 25u) << "rank " << c.rank();
  }
}
// The last rank stays away while the others run 6 rounds: its progress
// thread joins them, holding 7 buffers (the 4 symmetric ones and 3 plain).
// Once it caught up, its free list holds both kinds; symmetric ones are taken
// first, so of 10 rounds in lockstep afterwards only the first (whose buffer
// is the plain accumulator it already held) copies. Taking the last freed
// buffer instead kept cycling the plain ones: no round went zero-copy.
TEST(ProcessPartial, SymmetricBuffersPreferredAfterCatchingUp) {
  Communicator &c = *test::process_comm();
  if (!c.has_shm_channel() || !allreduce_uses_shm()) GTEST_SKIP() << "no shared memory";
  const bool laggard = c.rank() == c.size() - 1;
  const size_t n = 20000;  // 160 kB: above the zero-copy threshold
  PartialOptions o;
  o.mode = QUORUM_PARTIAL_SOLO;
  o.max_staleness = 8;
  std::unique_ptr<PartialAllreduce> p;
  ASSERT_EQ(PartialAllreduce::create(c, n, QUORUM_INT64, QUORUM_SUM, o, &p), QUORUM_OK)
      << last_error();
  std::vector<int64_t> in(n, 1), out(n);
  int64_t got = 0;  // element 0 of every result: the number of posts in it
  PartialRoundInfo info;
  for (int k = 0; k < 6; ++k) {
    if (!laggard) {
      ASSERT_EQ(p->post(in.data()), QUORUM_OK) << last_error();
      ASSERT_EQ(p->wait(out.data(), &info), QUORUM_OK) << last_error();
      got += out[0];
    }
  }
  ASSERT_EQ(c.barrier(), QUORUM_OK) << last_error();  // the others ran rounds 0-5
  if (laggard) {
    EXPECT_EQ(p->buffers_allocated(), 7u);
    for (int k = 0; k < 6; ++k) {
      ASSERT_EQ(p->wait(out.data(), &info), QUORUM_OK) << last_error();
      got += out[0];
    }
  }
  const uint64_t before = p->zero_copy_rounds();
  for (int k = 6; k < 16; ++k) {
    ASSERT_EQ(c.barrier(), QUORUM_OK) << last_error();
    ASSERT_EQ(p->post(in.data()), QUORUM_OK) << last_error();
    ASSERT_EQ(p->wait(out.data(), &info), QUORUM_OK) << last_error();
    got += out[0];
  }
  EXPECT_GE(p->zero_copy_rounds() - before, 9u) << "rank " << c.rank();
  ASSERT_EQ(p->flush(out.data(), &info), QUORUM_OK) << last_error();
  got += out[0];
  EXPECT_EQ(got, int64_t{16} * (c.size() - 1) + 10) << "every post in exactly one result";
  EXPECT_EQ(p->destroy(), QUORUM_OK) << last_error();
}
// Rank 0 never takes the zero-copy path (its threshold is off) while the
// others would: its first posted line says so, and every rank copies instead
// of reading a stale line (which would hang or corrupt the rounds).
TEST(ProcessPartial, ZeroCopyThresholdDiffersAcrossRanks) {
  Communicator &c = *test::process_comm();
  test::KnobOverride off("QUORUM_SHM_ZERO_COPY_BYTES", c.rank() == 0 ? "0" : "65536");
  ASSERT_TRUE(off.found());
  cases::ZeroCopyReport zero_copy;
  zero_copy.rounds = 1;
  cases::conservation(c, QUORUM_PARTIAL_SOLO, 2, 12, 1000, 0, 20000, &zero_copy);
  EXPECT_EQ(zero_copy.rounds, 0u) << "rank " << c.rank();
}
// wait_ref: results lent instead of copied (one buffer more in flight), with
// every round synchronous (A = 0) and with activations, small and zero-copy.
TEST(ProcessPartial, ConservationBorrowedResults) {
  for (uint64_t a : {0, 2}) {
    for (size_t n : {size_t{33}, size_t{20000}}) {
      SCOPED_TRACE("max_staleness " + std::to_string(a) + ", n " + std::to_string(n));
      cases::conservation(*test::process_comm(), QUORUM_PARTIAL_SOLO, a, 12, 1000, 0, n, nullptr,
                          true);
    }
  }
}
TEST(ProcessPartial, LatePost) {
  cases::late_post(*test::process_comm(), true);
  cases::late_post(*test::process_comm(), false);
  cases::late_post<double>(*test::process_comm(), true, 0.5);
}
TEST(ProcessPartial, DropMode) {
  cases::drop_mode(*test::process_comm());
}
TEST(ProcessPartial, SimultaneousInitiators) {
  cases::simultaneous_initiators(*test::process_comm());
}
TEST(ProcessPartial, StalenessBound) {
  cases::staleness_bound(*test::process_comm(), 3);
}
TEST(ProcessPartial, Majority) {
  cases::majority(*test::process_comm(), 40);
}
TEST(ProcessPartial, Interleaved) {
  cases::interleaved(*test::process_comm());
}

}  // namespace
}  // namespace quorum

int main(int argc, char **argv) {
  return quorum::test::run_process_tests(argc, argv);
}
