// partial_accumulator_test.cpp: the accumulator of a partial allreduce
// (partial_accumulator.hpp) and the reading of a round's reduced header
// (partial_round.hpp), without any round running: a fresh post is the
// round's input, late posts ride weighted with their staleness, a lent post
// is read from the caller's buffer, the buffers stay within max_staleness + 2
// (one more while a result is lent), and a header the ranks disagree on fails.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "collectives/partial/partial_accumulator.hpp"
#include "collectives/partial/partial_round.hpp"
#include "tests/support/thread_ranks.hpp"

namespace quorum::partial {
namespace {

using test::run_ranks;

void configure(PartialContext &ctx, size_t count, PartialOptions opts) {
  ctx.size = 1;
  ctx.count = count;
  ctx.dtype = QUORUM_FLOAT32;
  ctx.op = QUORUM_SUM;
  ctx.bytes = count * sizeof(float);
  ctx.opts = opts;
}

std::vector<float> contents(const uint8_t *buf, size_t count) {
  const auto *f = reinterpret_cast<const float *>(buf);
  return std::vector<float>(f, f + count);
}

// A post as the round driver makes it: the copy between begin and end, then
// noted fresh or late.
void post(PartialAccumulator &acc, const std::vector<float> &v, bool late, uint64_t round) {
  acc.begin_copy();
  ASSERT_TRUE(acc.copying());
  ASSERT_EQ(acc.add_post(v.data(), late), kOk) << last_error();
  acc.end_copy();
  if (late) {
    acc.note_late_post(round);
  } else {
    acc.note_fresh_post();
  }
}

TEST(PartialAccumulator, FreshPostIsTheRoundsInputAndNothingIsTheIdentity) {
  run_ranks(1, [](Communicator &c) {
    PartialContext ctx(c);
    configure(ctx, 4, PartialOptions{});
    PartialAccumulator acc(ctx);
    ASSERT_EQ(acc.make_accumulator(), kOk);
    EXPECT_TRUE(acc.empty());
    post(acc, {1, 2, 3, 4}, false, 5);
    EXPECT_FALSE(acc.empty());
    RoundInput in;
    ASSERT_TRUE(acc.take_round_input(5, &in));
    EXPECT_EQ(contents(in.buf, 4), (std::vector<float>{1, 2, 3, 4}));
    EXPECT_EQ(in.send, in.buf);
    EXPECT_FALSE(in.empty);
    EXPECT_TRUE(in.own_fresh);
    EXPECT_GT(in.post_ns, 0u);
    EXPECT_EQ(in.own_carried, 0);
    // The next round, with nothing posted: an empty input (the identity).
    EXPECT_TRUE(acc.empty());
    RoundInput next;
    ASSERT_TRUE(acc.take_round_input(6, &next));
    EXPECT_NE(next.buf, in.buf);
    EXPECT_TRUE(next.empty);
    EXPECT_FALSE(next.own_fresh);
    EXPECT_EQ(next.post_ns, 0u);
  });
}

TEST(PartialAccumulator, LatePostsRideWeightedWithTheirStaleness) {
  run_ranks(1, [](Communicator &c) {
    PartialContext ctx(c);
    PartialOptions opts;
    opts.carry_weight = 0.5;
    configure(ctx, 3, opts);
    PartialAccumulator acc(ctx);
    ASSERT_EQ(acc.make_accumulator(), kOk);
    post(acc, {2, 4, 8}, true, 3);    // posted for round 3, which ran without it
    post(acc, {6, 10, 12}, true, 4);  // posted for round 4, likewise
    post(acc, {1, 1, 1}, false, 6);   // fresh in round 6: not weighted
    acc.note_dropped_post();
    RoundInput in;
    ASSERT_TRUE(acc.take_round_input(6, &in));
    EXPECT_EQ(contents(in.buf, 3), (std::vector<float>{1 + 1 + 3, 1 + 2 + 5, 1 + 4 + 6}));
    EXPECT_TRUE(in.own_fresh);
    EXPECT_EQ(in.own_carried, 2);
    EXPECT_EQ(in.own_staleness, (6u - 3u) + (6u - 4u));
    EXPECT_EQ(acc.carried(), 2u);
    EXPECT_EQ(acc.dropped(), 1u);
    // Carried posts are counted once: the next round carries none.
    RoundInput next;
    ASSERT_TRUE(acc.take_round_input(7, &next));
    EXPECT_EQ(next.own_carried, 0);
    EXPECT_EQ(next.own_staleness, 0u);
  });
}

TEST(PartialAccumulator, LentPostIsReadFromTheCallersBuffer) {
  run_ranks(1, [](Communicator &c) {
    PartialContext ctx(c);
    configure(ctx, 2, PartialOptions{});
    PartialAccumulator acc(ctx);
    ASSERT_EQ(acc.make_accumulator(), kOk);
    const std::vector<float> mine{7, 9};
    ASSERT_TRUE(acc.can_lend(mine.data()));
    acc.lend_post(mine.data());
    RoundInput in;
    ASSERT_TRUE(acc.take_round_input(0, &in));
    EXPECT_EQ(in.send, reinterpret_cast<const uint8_t *>(mine.data()));
    EXPECT_NE(in.buf, in.send) << "the round's result goes to a buffer of the object";
    EXPECT_FALSE(in.empty);
    EXPECT_TRUE(in.own_fresh);
    // With something in the accumulator (a carried post), a post is not lent.
    post(acc, {1, 1}, true, 0);
    EXPECT_FALSE(acc.can_lend(mine.data()));
  });
}

TEST(PartialAccumulator, BuffersStayWithinMaxStalenessPlusTwo) {
  run_ranks(1, [](Communicator &c) {
    PartialContext ctx(c);
    PartialOptions opts;
    opts.max_staleness = 1;  // the accumulator and at most 2 rounds' buffers
    configure(ctx, 8, opts);
    PartialAccumulator acc(ctx);
    ASSERT_EQ(acc.make_accumulator(), kOk);
    RoundInput r0, r1, r2, r3;
    ASSERT_TRUE(acc.take_round_input(0, &r0));
    ASSERT_TRUE(acc.take_round_input(1, &r1));
    EXPECT_EQ(acc.allocated(), 3u);
    EXPECT_FALSE(acc.take_round_input(2, &r2)) << "a third round in flight has no buffer";
    EXPECT_EQ(acc.allocated(), 3u);
    acc.recycle(r0.buf);  // round 0 consumed
    ASSERT_TRUE(acc.take_round_input(2, &r2));
    EXPECT_EQ(acc.allocated(), 3u) << "the recycled buffer, not a new one";
    acc.lend_result(r1.buf);  // round 1's result lent (wait_ref): one buffer more
    ASSERT_TRUE(acc.take_round_input(3, &r3));
    EXPECT_EQ(acc.allocated(), 4u);
    EXPECT_EQ(acc.plain_buffers(), 4u);
    acc.return_lent();
    acc.count_round(1);
    acc.count_round(1);
    EXPECT_EQ(acc.fresh_histogram(), (std::vector<uint64_t>{0, 2}));
  });
}

// A 3-rank round's reduced header (rank 1's view).
Round reduced_round(const PartialContext &ctx, uint64_t id, int64_t sync, int64_t fresh_bits,
                    int64_t activator_bits) {
  Round r;
  r.id = id;
  r.header.assign(ctx.header_words, 0);
  r.header[kHdrRound] = ctx.size * static_cast<int64_t>(id);
  r.header[kHdrSync] = sync;
  r.header[kHdrCarried] = 2;
  r.header[kHdrStaleness] = 5;
  r.header[kHdrBitmaps] = fresh_bits;
  r.header[kHdrBitmaps + ctx.bitmap_words] = activator_bits;
  return r;
}

TEST(PartialRoundHeader, NamesFreshRanksAndTheLowestActivator) {
  run_ranks(1, [](Communicator &c) {
    PartialContext ctx(c);
    ctx.size = 3;
    ctx.rank = 1;
    ctx.bitmap_words = 1;
    ctx.header_words = kHdrBitmaps + 2;
    Round r = reduced_round(ctx, 7, 0, 0b101, 0b110);
    ASSERT_EQ(read_round_header(ctx, r), kOk) << last_error();
    EXPECT_EQ(r.info.fresh, 2);
    EXPECT_EQ(r.info.fresh_ranks, (std::vector<int>{0, 2}));
    EXPECT_EQ(r.info.initiator, 1);
    EXPECT_FALSE(r.info.synchronous);
    EXPECT_EQ(r.info.carried, 2);
    EXPECT_EQ(r.info.staleness, 5u);
    Round s = reduced_round(ctx, 8, 3, 0b111, 0);
    ASSERT_EQ(read_round_header(ctx, s), kOk) << last_error();
    EXPECT_TRUE(s.info.synchronous);
    EXPECT_EQ(s.info.initiator, -1);
    EXPECT_EQ(s.info.fresh, 3);
  });
}

TEST(PartialRoundHeader, RanksThatDisagreeAreAMismatch) {
  run_ranks(1, [](Communicator &c) {
    PartialContext ctx(c);
    ctx.size = 3;
    ctx.bitmap_words = 1;
    ctx.header_words = kHdrBitmaps + 2;
    Round other_round = reduced_round(ctx, 7, 0, 0b1, 0b1);
    other_round.header[kHdrRound] -= 1;  // one rank was at round 6
    EXPECT_EQ(read_round_header(ctx, other_round), QUORUM_ERR_MISMATCH);
    EXPECT_NE(std::string(last_error()).find("round 7 header disagrees across ranks"),
              std::string::npos)
        << last_error();
    Round half_sync = reduced_round(ctx, 9, 1, 0b1, 0);  // 1 of 3 ranks synchronous
    EXPECT_EQ(read_round_header(ctx, half_sync), QUORUM_ERR_MISMATCH);
    EXPECT_NE(std::string(last_error()).find("1 of 3 ranks synchronous"), std::string::npos)
        << last_error();
  });
}

}  // namespace
}  // namespace quorum::partial
