// patterns_test.cpp: the communication patterns, simulated in memory without a
// network for P = 1..33 and every root (the trees in tree_patterns_test.cpp).
//
// Each simulation runs the pattern step by step in lock-step: every rank's
// sends of a step are built from its state at the start of the step, then
// every rank's receives of that step are matched against them. It checks that
// send/recv pairs agree (if r sends to q at step s, q receives from r at step
// s, with the same block(s)), that no message is left unmatched, and that at
// the end every rank holds what the collective promises: every contribution
// counted exactly once (reductions), the root's value (broadcast), every
// block (allgather).
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdint>
#include <string>
#include <vector>

#include "collectives/patterns/blocks.hpp"
#include "collectives/patterns/dissemination.hpp"
#include "collectives/patterns/recursive_doubling.hpp"
#include "collectives/patterns/recursive_halving.hpp"
#include "collectives/patterns/ring.hpp"
#include "tests/collectives/pattern_simulation.hpp"

namespace quorum {
namespace patterns {
namespace {

using namespace simulation;

// ---- blocks ----

TEST(Blocks, CoverTheBufferExactly) {
  for (size_t count : {0, 1, 5, 31, 63, 64, 100, 1000, 4099, 1000003}) {
    for (int nblocks = 1; nblocks <= kMaxSize; ++nblocks) {
      for (size_t align : {1, 3, 16}) {
        SCOPED_TRACE(testing::Message()
                     << "count " << count << " nblocks " << nblocks << " align " << align);
        size_t next = 0, biggest = 0, smallest_nonlast = SIZE_MAX;
        for (int b = 0; b < nblocks; ++b) {
          const Block blk = block(count, nblocks, b, align);
          ASSERT_EQ(blk.offset, next) << "block " << b;
          if (blk.count > 0) {
            ASSERT_EQ(blk.offset % align, 0u) << "block " << b;
          }
          next += blk.count;
          biggest = std::max(biggest, blk.count);
          if (blk.offset + blk.count < count)
            smallest_nonlast = std::min(smallest_nonlast, blk.count);
          // Spans of consecutive blocks are the union of the blocks.
          const Block span = block_span(count, nblocks, {0, b + 1}, align);
          ASSERT_EQ(span.offset, 0u);
          ASSERT_EQ(span.count, next);
        }
        EXPECT_EQ(next, count);
        // Nearly equal: the blocks ending before the end differ by at most a unit.
        if (smallest_nonlast != SIZE_MAX) {
          EXPECT_LE(biggest - smallest_nonlast, align);
        }
      }
    }
  }
}

TEST(Blocks, AlignmentInBytesAndBadArguments) {
  EXPECT_EQ(align_elements(64, 4), 16u);
  EXPECT_EQ(align_elements(64, 2), 32u);
  EXPECT_EQ(align_elements(64, 3), 1u);
  EXPECT_EQ(align_elements(2, 8), 1u);
  EXPECT_EQ(align_elements(64, 0), 1u);
  // 64-byte aligned float blocks.
  const Block b1 = block(1000, 3, 1, align_elements(64, 4));
  EXPECT_EQ(b1.offset * 4 % 64, 0u);
  EXPECT_EQ(block(10, 0, 0), Block{});
  EXPECT_EQ(block(10, 3, 3), Block{});
  EXPECT_EQ(block(10, 3, -1), Block{});
  EXPECT_EQ(block(10, 3, 0, 0), Block{});
  EXPECT_EQ(block_span(10, 3, {1, 0}), Block{});
}

// ---- ring ----

TEST(Ring, NeighboursAndAllreduce) {
  for (int P = 1; P <= kMaxSize; ++P) {
    SCOPED_TRACE(testing::Message() << "P " << P);
    EXPECT_EQ(ring::steps(P), P - 1);
    for (int r = 0; r < P; ++r) {
      EXPECT_EQ(ring::prev(ring::next(r, P), P), r);
      EXPECT_EQ(ring::reduce_scatter_owned_block(r, P), r);
    }
    // state[r][b]: rank r's copy of block b.
    std::vector<std::vector<Contrib>> state(P);
    for (int r = 0; r < P; ++r) state[r].assign(P, unit(P, r));
    for (int s = 0; s < ring::steps(P); ++s) {
      SCOPED_TRACE(testing::Message() << "reduce-scatter step " << s);
      Step step;
      for (int r = 0; r < P; ++r) {
        const int b = ring::reduce_scatter_send_block(r, P, s);
        ASSERT_GE(b, 0);
        step.send(r, ring::next(r, P), {b, 1}, {state[r][b]});
      }
      for (int r = 0; r < P; ++r) {
        const Message *m = step.receive(r, ring::prev(r, P));
        ASSERT_NE(m, nullptr);
        const int b = ring::reduce_scatter_recv_block(r, P, s);
        ASSERT_EQ(m->blocks.first, b) << "rank " << r << " expects another block";
        add(state[r][b], m->payload[0]);
      }
      step.expect_all_received();
    }
    for (int r = 0; r < P; ++r)
      ASSERT_TRUE(complete(state[r][r])) << "rank " << r << " block " << show(state[r][r]);
    for (int s = 0; s < ring::steps(P); ++s) {
      SCOPED_TRACE(testing::Message() << "allgather step " << s);
      Step step;
      for (int r = 0; r < P; ++r) {
        const int b = ring::allgather_send_block(r, P, s);
        ASSERT_TRUE(complete(state[r][b])) << "rank " << r << " forwards an unreduced block " << b;
        step.send(r, ring::next(r, P), {b, 1}, {state[r][b]});
      }
      for (int r = 0; r < P; ++r) {
        const Message *m = step.receive(r, ring::prev(r, P));
        ASSERT_NE(m, nullptr);
        const int b = ring::allgather_recv_block(r, P, s);
        ASSERT_EQ(m->blocks.first, b);
        state[r][b] = m->payload[0];
      }
      step.expect_all_received();
    }
    for (int r = 0; r < P; ++r)
      for (int b = 0; b < P; ++b)
        ASSERT_TRUE(complete(state[r][b])) << "rank " << r << " block " << b;
  }
}

TEST(Ring, BadArguments) {
  EXPECT_EQ(ring::next(0, 0), kNoPeer);
  EXPECT_EQ(ring::next(3, 3), kNoPeer);
  EXPECT_EQ(ring::prev(-1, 3), kNoPeer);
  EXPECT_EQ(ring::steps(0), 0);
  EXPECT_EQ(ring::reduce_scatter_send_block(0, 1, 0), -1);  // P = 1: nothing to send
  EXPECT_EQ(ring::reduce_scatter_send_block(0, 4, 3), -1);
  EXPECT_EQ(ring::allgather_recv_block(0, 4, -1), -1);
  EXPECT_EQ(ring::reduce_scatter_owned_block(4, 4), -1);
}

// ---- recursive doubling ----

TEST(RecursiveDoubling, FoldAndAllreduce) {
  namespace rd = recursive_doubling;
  for (int P = 1; P <= kMaxSize; ++P) {
    SCOPED_TRACE(testing::Message() << "P " << P);
    const int core = rd::core_size(P);
    ASSERT_TRUE(is_power_of_two(core));
    ASSERT_LE(core, P);
    ASSERT_GT(2 * core, P);
    EXPECT_EQ(rd::extra_count(P), P - core);
    EXPECT_EQ(1 << rd::steps(P), core);
    std::vector<Contrib> acc(P);
    for (int r = 0; r < P; ++r) acc[r] = unit(P, r);
    // Fold: every extra rank sends to its partner, a core rank.
    Step fold;
    for (int r = 0; r < P; ++r) {
      const int p = rd::partner(r, P);
      if (rd::role(r, P) == rd::Role::kExtra) {
        ASSERT_EQ(rd::role(p, P), rd::Role::kCore) << "rank " << r;
        ASSERT_EQ(rd::partner(p, P), r);
        EXPECT_EQ(rd::peer(r, P, 0), kNoPeer);
        fold.send(r, p, {}, {acc[r]});
      } else if (p != kNoPeer) {
        ASSERT_EQ(rd::partner(p, P), r);
      }
    }
    for (int r = 0; r < P; ++r)
      if (rd::role(r, P) == rd::Role::kCore && rd::partner(r, P) != kNoPeer)
        add(acc[r], fold.receive(r, rd::partner(r, P))->payload[0]);
    fold.expect_all_received();
    // Core: pairwise exchange; the allgather block ranges double alongside.
    for (int s = 0; s < rd::steps(P); ++s) {
      SCOPED_TRACE(testing::Message() << "step " << s);
      Step step;
      for (int c = 0; c < core; ++c) {
        const int q = rd::peer(c, P, s);
        ASSERT_EQ(rd::peer(q, P, s), c);
        const BlockRange mine = rd::core_held(c, P, s), theirs = rd::core_held(q, P, s);
        ASSERT_FALSE(mine.contains(theirs.first)) << "core rank " << c;
        const BlockRange after = rd::core_held(c, P, s + 1);
        EXPECT_EQ(after.count, mine.count + theirs.count);
        EXPECT_TRUE(after.contains(mine.first) && after.contains(theirs.first));
        step.send(c, q, mine, {acc[c]});
      }
      std::vector<Contrib> next = acc;
      for (int c = 0; c < core; ++c) {
        const Message *m = step.receive(c, rd::peer(c, P, s));
        ASSERT_NE(m, nullptr);
        EXPECT_EQ(m->blocks, rd::core_held(m->from, P, s));
        add(next[c], m->payload[0]);
      }
      step.expect_all_received();
      acc = next;
    }
    for (int c = 0; c < core; ++c) {
      ASSERT_TRUE(complete(acc[c])) << "core rank " << c << " " << show(acc[c]);
      EXPECT_EQ(rd::core_held(c, P, rd::steps(P)), (BlockRange{0, core}));
    }
    // Unfold: partners return the result.
    for (int r = core; r < P; ++r) acc[r] = acc[rd::partner(r, P)];
    for (int r = 0; r < P; ++r) ASSERT_TRUE(complete(acc[r])) << "rank " << r;
  }
}

TEST(RecursiveDoubling, BadArguments) {
  namespace rd = recursive_doubling;
  EXPECT_EQ(rd::core_size(0), 0);
  EXPECT_EQ(rd::role(5, 5), rd::Role::kInvalid);
  EXPECT_EQ(rd::partner(-1, 5), kNoPeer);
  EXPECT_EQ(rd::partner(2, 5), kNoPeer);  // core rank without an extra
  EXPECT_EQ(rd::peer(0, 5, 2), kNoPeer);  // only 2 core steps
  EXPECT_EQ(rd::peer(0, 1, 0), kNoPeer);
  EXPECT_EQ(rd::core_held(4, 5, 0), BlockRange{});
}

// ---- recursive halving (Rabenseifner) ----

TEST(RecursiveHalving, ReduceScatterAllgatherAllreduce) {
  namespace rh = recursive_halving;
  for (int P = 1; P <= kMaxSize; ++P) {
    SCOPED_TRACE(testing::Message() << "P " << P);
    const int core = rh::core_size(P), nb = rh::block_count(P);
    ASSERT_EQ(nb, core);
    std::vector<std::vector<Contrib>> state(P);
    for (int r = 0; r < P; ++r) state[r].assign(nb, unit(P, r));
    // Fold.
    for (int r = core; r < P; ++r) {
      const int p = rh::partner(r, P);
      ASSERT_EQ(rh::partner(p, P), r);
      for (int b = 0; b < nb; ++b) add(state[p][b], state[r][b]);
    }
    // Reduce-scatter by recursive halving.
    for (int s = 0; s < rh::steps(P); ++s) {
      SCOPED_TRACE(testing::Message() << "reduce-scatter step " << s);
      Step step;
      for (int c = 0; c < core; ++c) {
        const int q = rh::reduce_scatter_peer(c, P, s);
        ASSERT_EQ(rh::reduce_scatter_peer(q, P, s), c);
        const BlockRange send = rh::reduce_scatter_send(c, P, s);
        const BlockRange keep = rh::reduce_scatter_keep(c, P, s);
        ASSERT_EQ(send.count, nb >> (s + 1));
        ASSERT_EQ(keep.count, send.count);
        ASSERT_TRUE(keep.contains(c)) << "core rank " << c << " gives away its own block";
        ASSERT_FALSE(send.contains(c));
        std::vector<Contrib> payload(state[c].begin() + send.first,
                                     state[c].begin() + send.first + send.count);
        step.send(c, q, send, payload);
      }
      for (int c = 0; c < core; ++c) {
        const Message *m = step.receive(c, rh::reduce_scatter_peer(c, P, s));
        ASSERT_NE(m, nullptr);
        const BlockRange keep = rh::reduce_scatter_keep(c, P, s);
        ASSERT_EQ(m->blocks, keep) << "core rank " << c << " keeps other blocks than it gets";
        for (int i = 0; i < keep.count; ++i) add(state[c][keep.first + i], m->payload[i]);
      }
      step.expect_all_received();
    }
    for (int c = 0; c < core; ++c) {
      const int b = rh::owned_block(c, P);
      ASSERT_TRUE(complete(state[c][b])) << "core rank " << c << " " << show(state[c][b]);
    }
    // Allgather by recursive doubling.
    for (int s = 0; s < rh::steps(P); ++s) {
      SCOPED_TRACE(testing::Message() << "allgather step " << s);
      Step step;
      for (int c = 0; c < core; ++c) {
        const int q = rh::allgather_peer(c, P, s);
        ASSERT_EQ(rh::allgather_peer(q, P, s), c);
        const BlockRange send = rh::allgather_send(c, P, s);
        std::vector<Contrib> payload;
        for (int i = 0; i < send.count; ++i) {
          ASSERT_TRUE(complete(state[c][send.first + i]))
              << "core rank " << c << " sends unreduced block " << send.first + i;
          payload.push_back(state[c][send.first + i]);
        }
        step.send(c, q, send, payload);
      }
      for (int c = 0; c < core; ++c) {
        const Message *m = step.receive(c, rh::allgather_peer(c, P, s));
        ASSERT_NE(m, nullptr);
        const BlockRange recv = rh::allgather_recv(c, P, s);
        ASSERT_EQ(m->blocks, recv);
        for (int i = 0; i < recv.count; ++i) state[c][recv.first + i] = m->payload[i];
      }
      step.expect_all_received();
    }
    // Unfold.
    for (int r = core; r < P; ++r) state[r] = state[rh::partner(r, P)];
    for (int r = 0; r < P; ++r)
      for (int b = 0; b < nb; ++b)
        ASSERT_TRUE(complete(state[r][b])) << "rank " << r << " block " << b;
  }
}

TEST(RecursiveHalving, BadArguments) {
  namespace rh = recursive_halving;
  EXPECT_EQ(rh::reduce_scatter_peer(5, 6, 0), kNoPeer);  // extra rank
  EXPECT_EQ(rh::reduce_scatter_peer(0, 4, 2), kNoPeer);
  EXPECT_EQ(rh::reduce_scatter_send(0, 4, -1), BlockRange{});
  EXPECT_EQ(rh::reduce_scatter_keep(0, 0, 0), BlockRange{});
  EXPECT_EQ(rh::allgather_peer(0, 1, 0), kNoPeer);
  EXPECT_EQ(rh::allgather_recv(7, 4, 0), BlockRange{});
  EXPECT_EQ(rh::owned_block(4, 6), -1);
}

// ---- dissemination ----

TEST(Dissemination, BarrierAndAllgather) {
  namespace ds = dissemination;
  for (int P = 1; P <= kMaxSize; ++P) {
    SCOPED_TRACE(testing::Message() << "P " << P);
    const int S = ds::steps(P);
    EXPECT_EQ(S, ceil_log2(P));
    // Barrier: know[r] = ranks r has (transitively) heard from.
    std::vector<uint64_t> know(P);
    for (int r = 0; r < P; ++r) know[r] = uint64_t(1) << r;
    const uint64_t all = P == 64 ? ~uint64_t(0) : (uint64_t(1) << P) - 1;
    // Allgather: count[r][b] = copies of block b at rank r.
    std::vector<std::vector<int>> count(P, std::vector<int>(P, 0));
    for (int r = 0; r < P; ++r) count[r][r] = 1;
    for (int s = 0; s < S; ++s) {
      SCOPED_TRACE(testing::Message() << "step " << s);
      if (P > 1) {  // ceil(log2 P) steps are needed: nobody is done early
        for (int r = 0; r < P; ++r) ASSERT_NE(know[r], all) << "rank " << r;
      }
      Step step;
      const int n = ds::allgather_block_count(P, s);
      ASSERT_GT(n, 0);
      for (int r = 0; r < P; ++r) {
        const int q = ds::send_to(r, P, s);
        ASSERT_EQ(ds::recv_from(q, P, s), r);
        std::vector<Contrib> blocks;
        for (int j = 0; j < n; ++j) {
          const int b = ds::allgather_send_block(r, P, s, j);
          ASSERT_EQ(count[r][b], 1) << "rank " << r << " sends block " << b << " it lacks";
          Contrib c(1, b);
          blocks.push_back(c);
        }
        blocks.push_back(Contrib(1, int(know[r] & 0xffffffff)));
        blocks.push_back(Contrib(1, int(know[r] >> 32)));
        step.send(r, q, {}, blocks);
      }
      for (int r = 0; r < P; ++r) {
        const Message *m = step.receive(r, ds::recv_from(r, P, s));
        ASSERT_NE(m, nullptr);
        for (int j = 0; j < n; ++j) {
          const int b = ds::allgather_recv_block(r, P, s, j);
          ASSERT_EQ(m->payload[j][0], b) << "rank " << r << " block " << j << " of step";
          ASSERT_EQ(count[r][b], 0) << "rank " << r << " receives block " << b << " twice";
          count[r][b] = 1;
        }
        know[r] |= uint64_t(uint32_t(m->payload[n][0])) | uint64_t(m->payload[n + 1][0]) << 32;
      }
      step.expect_all_received();
    }
    for (int r = 0; r < P; ++r) {
      EXPECT_EQ(know[r], all) << "rank " << r << " leaves the barrier early";
      for (int b = 0; b < P; ++b) EXPECT_EQ(count[r][b], 1) << "rank " << r << " block " << b;
    }
  }
}

TEST(Dissemination, BadArguments) {
  namespace ds = dissemination;
  EXPECT_EQ(ds::steps(1), 0);
  EXPECT_EQ(ds::steps(0), 0);
  EXPECT_EQ(ds::send_to(0, 1, 0), kNoPeer);
  EXPECT_EQ(ds::recv_from(5, 5, 0), kNoPeer);
  EXPECT_EQ(ds::allgather_block_count(5, 3), 0);
  EXPECT_EQ(ds::allgather_send_block(0, 5, 2, 1), 0 - 1);  // last step sends 1 block
  EXPECT_EQ(ds::allgather_send_block(0, 5, 2, 0), 0);
  EXPECT_EQ(ds::allgather_recv_block(0, 5, 0, -1), -1);
}

}  // namespace
}  // namespace patterns
}  // namespace quorum
