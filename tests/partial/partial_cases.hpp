// partial_cases.hpp: the test cases of partial collectives (PARTIAL-COLLECTIVES.md
// "What proves it"), each a function of one rank's Communicator, so the same
// bodies run as threads over inproc and as processes over ucx. Cross-rank
// checks go through the communicator (allgather/allreduce), never shared memory;
// timestamps come from the monotonic clock, which all processes of a host share.
#pragma once

#include <gtest/gtest.h>

#include <chrono>
#include <cstring>
#include <random>
#include <string>
#include <thread>
#include <type_traits>
#include <vector>

#include "collectives/communicator.hpp"
#include "collectives/partial/activation.hpp"
#include "collectives/partial/partial_allreduce.hpp"
#include "runtime/clock.hpp"

namespace quorum::test::partial_cases {

// The value rank r posts at element i of its k-th post: exact in int64 and float32.
inline int64_t value(int r, uint64_t k, size_t i) {
  return static_cast<int64_t>(((r + 1) * 131 + (k % 1000) * 17 + i * 7) % 41) - 20;
}

inline void fill_contribution(std::vector<int64_t> &buf, int r, uint64_t k) {
  for (size_t i = 0; i < buf.size(); ++i) buf[i] = value(r, k, i);
}

inline uint64_t fnv1a(const void *data, size_t bytes, uint64_t h = 1469598103934665603ull) {
  const auto *p = static_cast<const uint8_t *>(data);
  for (size_t i = 0; i < bytes; ++i) h = (h ^ p[i]) * 1099511628211ull;
  return h;
}

inline uint64_t round_hash(const void *result, size_t bytes, const PartialRoundInfo &info) {
  uint64_t h = fnv1a(result, bytes);
  int64_t meta[3] = {static_cast<int64_t>(info.round), info.fresh, info.initiator};
  return fnv1a(meta, sizeof(meta), h);
}

// Every rank's per-round hashes must be identical; names the first difference.
inline void expect_same_hashes(Communicator &c, const std::vector<uint64_t> &mine,
                               const char *what) {
  const size_t n = mine.size();
  std::vector<uint64_t> all(n * c.size());
  ASSERT_EQ(c.allgather(mine.data(), all.data(), n * sizeof(uint64_t)), QUORUM_OK) << last_error();
  for (int q = 0; q < c.size(); ++q) {
    for (size_t k = 0; k < n; ++k) {
      if (all[q * n + k] != mine[k]) {
        ADD_FAILURE() << what << ": rank " << c.rank() << " and rank " << q
                      << " disagree on round index " << k;
        return;
      }
    }
  }
}

inline void sleep_us(int us) {
  if (us > 0) std::this_thread::sleep_for(std::chrono::microseconds(us));
}

inline Status make(Communicator &c, size_t count, quorum_dtype_t d, const PartialOptions &o,
                   std::unique_ptr<PartialAllreduce> *out) {
  return PartialAllreduce::create(c, count, d, QUORUM_SUM, o, out);
}

// 1. max_staleness = 0: every round is a plain allreduce, bitwise (int64 and
// float32, sizes on both algorithms). Solo with everyone posting: rounds where
// all ranks were fresh equal the plain allreduce.
inline void all_post_together(Communicator &c) {
  const int r = c.rank();
  for (size_t count : {size_t{5}, size_t{20000}}) {
    PartialOptions o;
    o.max_staleness = 0;
    std::unique_ptr<PartialAllreduce> pa, pf;
    ASSERT_EQ(make(c, count, QUORUM_INT64, o, &pa), QUORUM_OK) << last_error();
    ASSERT_EQ(PartialAllreduce::create(c, count, QUORUM_FLOAT32, QUORUM_SUM, o, &pf), QUORUM_OK);
    std::vector<int64_t> in(count), out(count), ref(count);
    std::vector<float> fin(count), fout(count), fref(count);
    for (uint64_t k = 0; k < 6; ++k) {
      fill_contribution(in, r, k);
      for (size_t i = 0; i < count; ++i) fin[i] = static_cast<float>(in[i]) * 0.37f;
      PartialRoundInfo info;
      ASSERT_EQ(pa->post(in.data()), QUORUM_OK) << last_error();
      ASSERT_EQ(pa->wait(out.data(), &info), QUORUM_OK) << last_error();
      ASSERT_EQ(c.allreduce(in.data(), ref.data(), count, QUORUM_INT64, QUORUM_SUM), QUORUM_OK);
      EXPECT_EQ(std::memcmp(out.data(), ref.data(), count * 8), 0)
          << "rank " << r << " round " << k;
      EXPECT_EQ(info.round, k);
      EXPECT_EQ(info.fresh, c.size());
      EXPECT_TRUE(info.synchronous);
      EXPECT_EQ(info.initiator, -1);
      ASSERT_EQ(pf->post(fin.data()), QUORUM_OK) << last_error();
      ASSERT_EQ(pf->wait(fout.data(), &info), QUORUM_OK) << last_error();
      ASSERT_EQ(c.allreduce(fin.data(), fref.data(), count, QUORUM_FLOAT32, QUORUM_SUM), QUORUM_OK);
      EXPECT_EQ(std::memcmp(fout.data(), fref.data(), count * 4), 0)
          << "rank " << r << " float round " << k;
    }
    // 20000 elements: the rounds' buffers are symmetric and the data phase
    // skips the copies wherever the ranks share memory through the shm allreduce.
    const uint64_t want = c.has_shm_channel() && allreduce_uses_shm() && count == 20000 ? 6 : 0;
    EXPECT_EQ(pa->zero_copy_rounds(), want) << "rank " << r;
    EXPECT_EQ(pf->zero_copy_rounds(), want) << "rank " << r;
    EXPECT_EQ(pa->destroy(), QUORUM_OK) << last_error();
    EXPECT_EQ(pf->destroy(), QUORUM_OK) << last_error();
  }
  // Solo, everyone posts after a barrier: full rounds equal the plain allreduce.
  PartialOptions o;
  o.max_staleness = 4;
  std::unique_ptr<PartialAllreduce> p;
  ASSERT_EQ(make(c, 8, QUORUM_INT64, o, &p), QUORUM_OK);
  std::vector<int64_t> in(8), out(8), ref(8);
  bool clean = true;
  for (uint64_t k = 0; k < 10; ++k) {
    ASSERT_EQ(c.barrier(), QUORUM_OK);
    fill_contribution(in, r, k);
    PartialRoundInfo info;
    ASSERT_EQ(p->post(in.data()), QUORUM_OK);
    ASSERT_EQ(p->wait(out.data(), &info), QUORUM_OK) << last_error();
    int full = info.fresh == c.size() ? 1 : 0, all_full = 0;
    ASSERT_EQ(c.allreduce(&full, &all_full, 1, QUORUM_INT32, QUORUM_MIN), QUORUM_OK);
    // Only compare while no rank carries anything (every earlier round was full too).
    ASSERT_EQ(c.allreduce(in.data(), ref.data(), 8, QUORUM_INT64, QUORUM_SUM), QUORUM_OK);
    if (clean && all_full) {
      EXPECT_EQ(out, ref) << "rank " << r << " round " << k;
    }
    clean = clean && all_full;
  }
  ASSERT_EQ(p->flush(out.data()), QUORUM_OK);
  EXPECT_EQ(p->destroy(), QUORUM_OK) << last_error();
}

// 2. One driver: only `driver` posts; the others only wait. Every rank completes
// every round; each round is exactly the driver's post.
inline void one_driver(Communicator &c, int driver, uint64_t rounds = 12) {
  const int r = c.rank();
  PartialOptions o;
  o.max_staleness = 4;  // includes synchronous rounds, joined by waiting ranks
  std::unique_ptr<PartialAllreduce> p;
  ASSERT_EQ(make(c, 6, QUORUM_INT64, o, &p), QUORUM_OK) << last_error();
  std::vector<int64_t> in(6), out(6), want(6);
  for (uint64_t k = 0; k < rounds; ++k) {
    if (r == driver) {
      fill_contribution(in, r, k);
      ASSERT_EQ(p->post(in.data()), QUORUM_OK) << last_error();
    }
    PartialRoundInfo info;
    ASSERT_EQ(p->wait(out.data(), &info), QUORUM_OK) << "rank " << r << ": " << last_error();
    fill_contribution(want, driver, k);
    EXPECT_EQ(out, want) << "rank " << r << " round " << k << " driver " << driver;
    EXPECT_EQ(info.round, k);
    EXPECT_EQ(info.fresh, 1);
    EXPECT_EQ(info.own_fresh, r == driver);
    EXPECT_EQ(info.initiator, info.synchronous ? -1 : driver) << "round " << k;
    EXPECT_EQ(info.synchronous, partial::scheduled_sync_round(k, o.max_staleness));
  }
  EXPECT_EQ(p->destroy(), QUORUM_OK) << last_error();
}

// 2a. Catching up: rank 0 alone runs 5 solo rounds while the others stay
// out. Each of them is then exactly 5 rounds behind (a completed round means
// every rank joined it), waits 5 times without posting, one round fewer
// behind each time, and gets rank 0's posts in order. Round 5 (synchronous)
// then has every rank fresh; nobody is behind after it, and a pending post
// hides the count.
inline void rounds_behind(Communicator &c) {
  const int r = c.rank(), p = c.size();
  const uint64_t lead = 5;
  PartialOptions o;
  o.max_staleness = lead;  // round 5 is synchronous
  std::unique_ptr<PartialAllreduce> pa;
  ASSERT_EQ(make(c, 7, QUORUM_INT64, o, &pa), QUORUM_OK) << last_error();
  std::vector<int64_t> in(7), out(7), want(7);
  PartialRoundInfo info;
  if (r == 0) {
    EXPECT_EQ(pa->rounds_behind(), 0u) << "nobody else posts";
    for (uint64_t k = 0; k < lead; ++k) {
      fill_contribution(in, 0, k);
      ASSERT_EQ(pa->post(in.data()), QUORUM_OK) << last_error();
      ASSERT_EQ(pa->wait(out.data(), &info), QUORUM_OK) << last_error();
    }
  }
  ASSERT_EQ(c.barrier(), QUORUM_OK);
  if (r != 0) {
    for (uint64_t k = 0; k < lead; ++k) {
      EXPECT_EQ(pa->rounds_behind(), lead - k) << "rank " << r;
      ASSERT_EQ(pa->wait(out.data(), &info), QUORUM_OK) << last_error();
      fill_contribution(want, 0, k);
      EXPECT_EQ(out, want) << "rank " << r << " round " << k;
      EXPECT_EQ(info.round, k);
    }
  }
  EXPECT_EQ(pa->rounds_behind(), 0u) << "rank " << r;
  fill_contribution(in, r, lead);
  ASSERT_EQ(pa->post(in.data()), QUORUM_OK) << last_error();
  EXPECT_EQ(pa->rounds_behind(), 0u);
  ASSERT_EQ(pa->wait(out.data(), &info), QUORUM_OK) << last_error();
  EXPECT_TRUE(info.synchronous);
  EXPECT_EQ(info.fresh, p);
  for (size_t i = 0; i < want.size(); ++i) {
    int64_t w = 0;
    for (int q = 0; q < p; ++q) w += value(q, lead, i);
    EXPECT_EQ(out[i], w) << "rank " << r << " element " << i;
  }
  EXPECT_EQ(pa->rounds_behind(), 0u);
  EXPECT_EQ(pa->destroy(), QUORUM_OK) << last_error();
}

// 2c. Activation delay: the activating post (solo: rank 0's, the first;
// majority: the initiator's) sends its activation `delay` after it, so the
// others, posting after it (a broadcast from it orders them), are fresh in the
// round, and its round does not end before the delay has passed. A round
// nobody else posts for still runs (fresh 1) once its delay is over.
inline void activation_delay(Communicator &c, quorum_partial_mode_t mode) {
  const int r = c.rank(), p = c.size();
  const uint64_t delay_us = 300000;
  PartialOptions o;
  o.mode = mode;
  o.seed = 99;
  o.max_staleness = 8;
  o.activation_delay_us = delay_us;
  std::unique_ptr<PartialAllreduce> pa;
  ASSERT_EQ(make(c, 5, QUORUM_INT64, o, &pa), QUORUM_OK) << last_error();
  const int first = mode == QUORUM_PARTIAL_SOLO ? 0 : partial::majority_initiator(o.seed, 0, p);
  std::vector<int64_t> in(5), out(5);
  PartialRoundInfo info;
  fill_contribution(in, r, 0);
  const uint64_t posted = now_ns();
  int64_t go = 1;
  if (r == first) {
    ASSERT_EQ(pa->post(in.data()), QUORUM_OK) << last_error();
  }
  ASSERT_EQ(c.bcast(&go, sizeof(go), first), QUORUM_OK) << last_error();
  if (r != first) {
    ASSERT_EQ(pa->post(in.data()), QUORUM_OK) << last_error();
  }
  ASSERT_EQ(pa->wait(out.data(), &info), QUORUM_OK) << last_error();
  if (r == first) {
    EXPECT_GE(now_ns() - posted, delay_us * 1000) << "the round ran before the delay";
  }
  EXPECT_EQ(info.fresh, p) << "rank " << r << ": posted after the activator, within its delay";
  if (mode == QUORUM_PARTIAL_MAJORITY) {
    EXPECT_EQ(info.initiator, first);
  } else {
    // Every solo post activates: the others' delays end microseconds after
    // the first one's, so either may go out first.
    EXPECT_GE(info.initiator, 0);
  }
  for (size_t i = 0; i < out.size(); ++i) {
    int64_t w = 0;
    for (int q = 0; q < p; ++q) w += value(q, 0, i);
    EXPECT_EQ(out[i], w) << "rank " << r << " element " << i;
  }
  // Round 1: only its activator posts; the others wait without a post.
  const int second =
      mode == QUORUM_PARTIAL_SOLO ? p - 1 : partial::majority_initiator(o.seed, 1, p);
  if (r == second) {
    fill_contribution(in, r, 1);
    ASSERT_EQ(pa->post(in.data()), QUORUM_OK) << last_error();
  }
  ASSERT_EQ(pa->wait(out.data(), &info), QUORUM_OK) << last_error();
  EXPECT_EQ(info.fresh, 1);
  EXPECT_EQ(info.initiator, second);
  std::vector<int64_t> want(5);
  fill_contribution(want, second, 1);
  EXPECT_EQ(out, want) << "rank " << r;
  EXPECT_EQ(pa->destroy(), QUORUM_OK) << last_error();
}

// 2b. Majority with one driver: rank 0 alone posts, everyone waits; rounds whose
// initiator does not post are activated by the initiator's wait. Nothing hangs,
// nothing is lost, every rank sees the same rounds.
inline void majority_one_driver(Communicator &c, uint64_t rounds = 10) {
  const int r = c.rank();
  PartialOptions o;
  o.mode = QUORUM_PARTIAL_MAJORITY;
  o.seed = 31337;
  o.max_staleness = 3;
  std::unique_ptr<PartialAllreduce> p;
  ASSERT_EQ(make(c, 3, QUORUM_INT64, o, &p), QUORUM_OK);
  std::vector<int64_t> in(3), out(3), posted(3, 0), got(3, 0);
  std::vector<uint64_t> hashes;
  for (uint64_t k = 0; k < rounds; ++k) {
    if (r == 0) {
      fill_contribution(in, r, k);
      for (size_t i = 0; i < 3; ++i) posted[i] += in[i];
      ASSERT_EQ(p->post(in.data()), QUORUM_OK);
    }
    PartialRoundInfo info;
    ASSERT_EQ(p->wait(out.data(), &info), QUORUM_OK) << "rank " << r << ": " << last_error();
    if (!info.synchronous) {
      EXPECT_EQ(info.initiator, partial::majority_initiator(o.seed, k, c.size()));
    }
    for (size_t i = 0; i < 3; ++i) got[i] += out[i];
    hashes.push_back(round_hash(out.data(), 24, info));
  }
  ASSERT_EQ(p->flush(out.data()), QUORUM_OK) << last_error();
  for (size_t i = 0; i < 3; ++i) got[i] += out[i];
  std::vector<int64_t> total(3);
  ASSERT_EQ(c.allreduce(posted.data(), total.data(), 3, QUORUM_INT64, QUORUM_SUM), QUORUM_OK);
  EXPECT_EQ(got, total);
  expect_same_hashes(c, hashes, "majority one-driver rounds");
  EXPECT_EQ(p->destroy(), QUORUM_OK) << last_error();
}

// What conservation() saw of its object's zero-copy rounds.
struct ZeroCopyReport {
  uint64_t rounds = 0;               // this rank's rounds that went zero-copy
  uint64_t cross_memory_rounds = 0;  // ... and through cross-memory attach
  bool plain_used = false;           // some rank held more rounds than its symmetric
                                     // buffers (a round on a plain one copies)
};

// 3 + 5. Conservation with carry under random delays, and identical results on
// every rank: sum of all results (rounds + flush) == sum of all posts, exactly.
inline void conservation(Communicator &c, quorum_partial_mode_t mode, uint64_t max_staleness,
                         uint64_t rounds = 24, int max_delay_us = 1500, uint64_t first_round = 0,
                         size_t n = 33, ZeroCopyReport *zero_copy = nullptr, bool borrow = false,
                         bool lend_post = false) {
  const int r = c.rank();
  PartialOptions o;
  o.mode = mode;
  o.max_staleness = max_staleness;
  o.seed = 12345;
  o.first_round = first_round;
  std::unique_ptr<PartialAllreduce> p;
  ASSERT_EQ(make(c, n, QUORUM_INT64, o, &p), QUORUM_OK) << last_error();
  std::vector<int64_t> in(n), out(n), posted(n, 0), got(n, 0);
  std::vector<uint64_t> hashes;
  std::mt19937 rng(1000u + static_cast<unsigned>(r));
  std::uniform_int_distribution<int> delay(0, max_delay_us);
  // Lent posts (post_ref) from quorum_mem_alloc memory, rewritten only after
  // each wait: symmetric on one host, so the rounds can go zero-copy.
  void *lent = nullptr;
  if (lend_post) {
    ASSERT_EQ(c.mem_alloc(n * sizeof(int64_t), &lent), QUORUM_OK) << last_error();
  }
  for (uint64_t k = 0; k < rounds; ++k) {
    sleep_us(delay(rng));
    fill_contribution(in, r, k);
    for (size_t i = 0; i < n; ++i) posted[i] += in[i];
    if (lend_post) {
      std::memcpy(lent, in.data(), n * sizeof(int64_t));
      ASSERT_EQ(p->post_ref(lent), QUORUM_OK) << last_error();
    } else {
      ASSERT_EQ(p->post(in.data()), QUORUM_OK) << last_error();
    }
    PartialRoundInfo info;
    if (borrow) {
      // The result inside the object, valid until the next call on it.
      const void *ref = nullptr;
      ASSERT_EQ(p->wait_ref(&ref, &info), QUORUM_OK) << "rank " << r << ": " << last_error();
      ASSERT_NE(ref, nullptr);
      std::memcpy(out.data(), ref, n * sizeof(int64_t));
      EXPECT_LE(p->buffers_allocated(), max_staleness + 3);
    } else {
      ASSERT_EQ(p->wait(out.data(), &info), QUORUM_OK) << "rank " << r << ": " << last_error();
    }
    EXPECT_EQ(info.round, first_round + k);
    EXPECT_GE(info.fresh, 1);
    for (size_t i = 0; i < n; ++i) got[i] += out[i];
    hashes.push_back(round_hash(out.data(), n * 8, info));
  }
  PartialRoundInfo info;
  ASSERT_EQ(p->flush(out.data(), &info), QUORUM_OK) << last_error();
  EXPECT_TRUE(info.flush);
  EXPECT_EQ(info.round, first_round + rounds);
  for (size_t i = 0; i < n; ++i) got[i] += out[i];
  hashes.push_back(round_hash(out.data(), n * 8, info));
  std::vector<int64_t> total(n);
  ASSERT_EQ(c.allreduce(posted.data(), total.data(), n, QUORUM_INT64, QUORUM_SUM), QUORUM_OK);
  EXPECT_EQ(got, total) << "rank " << r << ": results do not add up to the posts";
  expect_same_hashes(c, hashes, "round results");
  EXPECT_EQ(p->dropped(), 0u);
  if (zero_copy) {
    zero_copy->rounds = p->zero_copy_rounds();
    zero_copy->cross_memory_rounds = p->cross_memory_rounds();
    const int64_t mine = static_cast<int64_t>(p->plain_buffers());
    int64_t most = 0;
    ASSERT_EQ(c.allreduce(&mine, &most, 1, QUORUM_INT64, QUORUM_MAX), QUORUM_OK);
    zero_copy->plain_used = most > 0;
  }
  EXPECT_EQ(p->destroy(), QUORUM_OK) << last_error();
  if (lent) {
    EXPECT_EQ(c.mem_free(lent), QUORUM_OK);
  }
}

// 3c. A post copies into the accumulator without the engine mutex; an
// activation that arrives meanwhile waits until the copy is in. Every rank
// posts at once (after a barrier) with buffers large enough that the copies
// overlap the activations; with carry the results still add up exactly and
// agree across ranks. Runs until some rank deferred an activation (checked
// every 10 rounds; the test fails if none did in 1000). Usually a few rounds
// do; on a loaded machine, where ranks seldom run at the same time, 200 were
// sometimes not enough.
inline void activation_during_post_copy(Communicator &c) {
  const int r = c.rank();
  const size_t n = size_t{1} << 18;  // 2 MiB of int64 per post
  PartialOptions o;
  o.mode = QUORUM_PARTIAL_SOLO;
  o.max_staleness = 4;
  o.seed = 99;
  std::unique_ptr<PartialAllreduce> p;
  ASSERT_EQ(make(c, n, QUORUM_INT64, o, &p), QUORUM_OK) << last_error();
  std::vector<int64_t> in(n), out(n), posted(n, 0), got(n, 0);
  std::vector<uint64_t> hashes;
  int64_t deferred = 0;
  uint64_t k = 0;
  while (k < 1000 && deferred == 0) {
    ASSERT_EQ(c.barrier(), QUORUM_OK) << last_error();
    fill_contribution(in, r, k);
    for (size_t i = 0; i < n; ++i) posted[i] += in[i];
    ASSERT_EQ(p->post(in.data()), QUORUM_OK) << last_error();
    PartialRoundInfo info;
    ASSERT_EQ(p->wait(out.data(), &info), QUORUM_OK) << "rank " << r << ": " << last_error();
    EXPECT_EQ(info.round, k);
    for (size_t i = 0; i < n; ++i) got[i] += out[i];
    hashes.push_back(round_hash(out.data(), n * 8, info));
    if (++k % 10 == 0) {
      int64_t mine = static_cast<int64_t>(p->deferred_activations());
      ASSERT_EQ(c.allreduce(&mine, &deferred, 1, QUORUM_INT64, QUORUM_SUM), QUORUM_OK);
    }
  }
  EXPECT_GT(deferred, 0) << "no activation arrived during a post's copy in " << k << " rounds";
  PartialRoundInfo info;
  ASSERT_EQ(p->flush(out.data(), &info), QUORUM_OK) << last_error();
  for (size_t i = 0; i < n; ++i) got[i] += out[i];
  hashes.push_back(round_hash(out.data(), n * 8, info));
  std::vector<int64_t> total(n);
  ASSERT_EQ(c.allreduce(posted.data(), total.data(), n, QUORUM_INT64, QUORUM_SUM), QUORUM_OK);
  EXPECT_TRUE(got == total) << "rank " << r << ": results do not add up to the posts";
  expect_same_hashes(c, hashes, "rounds with activations during post copies");
  EXPECT_EQ(p->destroy(), QUORUM_OK) << last_error();
}

// 3b/4b/3c. A late post, deterministically: rank 0 runs round 0 alone; the
// others post for round 0 after joining it (late). With carry the late posts
// ride in round 1 (synchronous, A = 1), multiplied by `weight` (a carry
// weight; T = double, where the sums stay exact); with drop they are discarded
// and counted. The caller's buffer is never scaled.
template <typename T = int64_t>
void late_post(Communicator &c, bool carry, double weight = 1) {
  static_assert(std::is_same_v<T, int64_t> || std::is_same_v<T, double>);
  const int r = c.rank(), p = c.size();
  const size_t n = 5;
  PartialOptions o;
  o.max_staleness = 1;
  o.carry = carry;
  o.carry_weight = weight;
  std::unique_ptr<PartialAllreduce> pa;
  const quorum_dtype_t dtype = std::is_same_v<T, double> ? QUORUM_FLOAT64 : QUORUM_INT64;
  ASSERT_EQ(make(c, n, dtype, o, &pa), QUORUM_OK) << last_error();
  std::vector<T> in(n), out(n);
  PartialRoundInfo info;
  auto fill = [&](uint64_t k) {
    for (size_t i = 0; i < n; ++i) in[i] = T(value(r, k, i));
  };
  fill(0);
  if (r == 0) {
    ASSERT_EQ(pa->post(in.data()), QUORUM_OK);
    ASSERT_EQ(pa->wait(out.data(), &info), QUORUM_OK) << last_error();
  }
  ASSERT_EQ(c.barrier(), QUORUM_OK);
  if (r != 0) {
    const std::vector<T> posted = in;
    ASSERT_EQ(pa->post(in.data()), QUORUM_OK);  // round 0 is joined already: late
    ASSERT_EQ(pa->wait(out.data(), &info), QUORUM_OK) << last_error();
    EXPECT_EQ(pa->carried(), carry ? 1u : 0u);
    EXPECT_EQ(pa->dropped(), carry ? 0u : 1u);
    EXPECT_EQ(in, posted) << "the caller's buffer is not scaled";
  }
  for (size_t i = 0; i < n; ++i)
    EXPECT_EQ(out[i], T(value(0, 0, i))) << "rank " << r << ": round 0 is rank 0's post alone";
  EXPECT_EQ(info.fresh, 1);
  EXPECT_EQ(info.initiator, 0);
  EXPECT_EQ(info.own_fresh, r == 0);
  fill(1);
  ASSERT_EQ(pa->post(in.data()), QUORUM_OK);
  ASSERT_EQ(pa->wait(out.data(), &info), QUORUM_OK) << last_error();
  EXPECT_TRUE(info.synchronous);
  EXPECT_EQ(info.fresh, p);
  for (size_t i = 0; i < n; ++i) {
    T w = 0;
    for (int q = 0; q < p; ++q)
      w += T(value(q, 1, i)) + (carry && q != 0 ? T(weight * double(value(q, 0, i))) : T(0));
    EXPECT_EQ(out[i], w) << "rank " << r << " element " << i
                         << (carry ? " carry, weight " + std::to_string(weight) : " drop");
  }
  EXPECT_EQ(pa->destroy(), QUORUM_OK) << last_error();
}

// 4. Drop mode: each round is exactly the sum of its fresh posts; every post is
// either fresh in its round or dropped, and the dropped count says so.
inline void drop_mode(Communicator &c, uint64_t rounds = 24) {
  const int r = c.rank();
  const size_t n = 9;
  PartialOptions o;
  o.carry = false;
  o.max_staleness = 5;
  std::unique_ptr<PartialAllreduce> p;
  ASSERT_EQ(make(c, n, QUORUM_INT64, o, &p), QUORUM_OK) << last_error();
  std::vector<int64_t> in(n), out(n), want(n);
  std::mt19937 rng(77u + static_cast<unsigned>(r));
  std::uniform_int_distribution<int> delay(0, 1500);
  int64_t fresh_mine = 0;
  for (uint64_t k = 0; k < rounds; ++k) {
    sleep_us(delay(rng));
    fill_contribution(in, r, k);
    ASSERT_EQ(p->post(in.data()), QUORUM_OK);
    PartialRoundInfo info;
    ASSERT_EQ(p->wait(out.data(), &info), QUORUM_OK) << last_error();
    std::fill(want.begin(), want.end(), 0);
    for (int q : info.fresh_ranks) {
      for (size_t i = 0; i < n; ++i) want[i] += value(q, k, i);
    }
    EXPECT_EQ(out, want) << "rank " << r << " round " << k;
    EXPECT_EQ(static_cast<int>(info.fresh_ranks.size()), info.fresh);
    fresh_mine += info.own_fresh ? 1 : 0;
  }
  EXPECT_EQ(static_cast<int64_t>(p->dropped()) + fresh_mine, static_cast<int64_t>(rounds));
  ASSERT_EQ(p->flush(out.data()), QUORUM_OK);
  for (size_t i = 0; i < n; ++i) EXPECT_EQ(out[i], 0) << "drop mode carries nothing";
  EXPECT_EQ(p->destroy(), QUORUM_OK) << last_error();
}

// 6. Simultaneous initiators: everyone posts right after a barrier, repeatedly;
// exactly one round per post, counters stay equal, nothing lost.
inline void simultaneous_initiators(Communicator &c, uint64_t rounds = 20) {
  const int r = c.rank();
  PartialOptions o;
  o.max_staleness = 1000;
  std::unique_ptr<PartialAllreduce> p;
  ASSERT_EQ(make(c, 4, QUORUM_INT64, o, &p), QUORUM_OK);
  std::vector<int64_t> in(4), out(4), posted(4, 0), got(4, 0);
  std::vector<uint64_t> hashes;
  for (uint64_t k = 0; k < rounds; ++k) {
    ASSERT_EQ(c.barrier(), QUORUM_OK);
    fill_contribution(in, r, k);
    for (size_t i = 0; i < 4; ++i) posted[i] += in[i];
    ASSERT_EQ(p->post(in.data()), QUORUM_OK);
    PartialRoundInfo info;
    ASSERT_EQ(p->wait(out.data(), &info), QUORUM_OK) << last_error();
    EXPECT_EQ(info.round, k);
    EXPECT_GE(info.initiator, 0);
    EXPECT_LT(info.initiator, c.size());
    for (size_t i = 0; i < 4; ++i) got[i] += out[i];
    hashes.push_back(round_hash(out.data(), 32, info));
  }
  uint64_t mine = p->next_round(), all_min = 0, all_max = 0;
  ASSERT_EQ(c.allreduce(&mine, &all_min, 1, QUORUM_INT64, QUORUM_MIN), QUORUM_OK);
  ASSERT_EQ(c.allreduce(&mine, &all_max, 1, QUORUM_INT64, QUORUM_MAX), QUORUM_OK);
  EXPECT_EQ(all_min, rounds);
  EXPECT_EQ(all_max, rounds);
  ASSERT_EQ(p->flush(out.data()), QUORUM_OK);
  for (size_t i = 0; i < 4; ++i) got[i] += out[i];
  std::vector<int64_t> total(4);
  ASSERT_EQ(c.allreduce(posted.data(), total.data(), 4, QUORUM_INT64, QUORUM_SUM), QUORUM_OK);
  EXPECT_EQ(got, total);
  expect_same_hashes(c, hashes, "simultaneous rounds");
  EXPECT_EQ(p->destroy(), QUORUM_OK) << last_error();
}

// 7. Staleness bound with one slow rank: a rank finishes round k only after the
// slow rank started its post for round k - A; a synchronous round only after
// the slow rank started its post for that very round.
inline void staleness_bound(Communicator &c, uint64_t max_staleness, uint64_t rounds = 14,
                            int slow_us = 3000) {
  const int r = c.rank(), slow = c.size() - 1;
  PartialOptions o;
  o.max_staleness = max_staleness;
  std::unique_ptr<PartialAllreduce> p;
  ASSERT_EQ(make(c, 4, QUORUM_INT64, o, &p), QUORUM_OK);
  std::vector<int64_t> in(4), out(4);
  std::vector<uint64_t> post_start(rounds), wait_end(rounds);
  for (uint64_t k = 0; k < rounds; ++k) {
    if (r == slow) sleep_us(slow_us);
    fill_contribution(in, r, k);
    post_start[k] = now_ns();
    ASSERT_EQ(p->post(in.data()), QUORUM_OK);
    PartialRoundInfo info;
    ASSERT_EQ(p->wait(out.data(), &info), QUORUM_OK) << last_error();
    wait_end[k] = now_ns();
    EXPECT_EQ(info.synchronous, partial::scheduled_sync_round(k, max_staleness));
  }
  EXPECT_LE(p->buffers_allocated(), max_staleness + 2);
  std::vector<uint64_t> slow_posts(rounds);
  if (r == slow) slow_posts = post_start;
  ASSERT_EQ(c.bcast(slow_posts.data(), rounds * 8, slow), QUORUM_OK);
  for (uint64_t k = max_staleness; k < rounds; ++k) {
    EXPECT_GE(wait_end[k], slow_posts[k - max_staleness])
        << "rank " << r << " finished round " << k << " more than " << max_staleness
        << " rounds ahead of the slow rank";
    if (partial::scheduled_sync_round(k, max_staleness)) {
      EXPECT_GE(wait_end[k], slow_posts[k])
          << "rank " << r << ": synchronous round " << k << " ended before the slow rank posted";
    }
  }
  ASSERT_EQ(p->flush(out.data()), QUORUM_OK);
  EXPECT_EQ(p->destroy(), QUORUM_OK) << last_error();
}

// 8. Majority: the reported initiator is initiator(seed, k) on every rank, the
// initiator sequence is the same everywhere, and under random arrival the mean
// fresh count of asynchronous rounds is about (P+1)/2.
inline void majority(Communicator &c, uint64_t rounds = 40, double *mean_fresh = nullptr) {
  const int r = c.rank(), p = c.size();
  PartialOptions o;
  o.mode = QUORUM_PARTIAL_MAJORITY;
  o.seed = 0xfeedbeef;
  o.max_staleness = 1000;
  std::unique_ptr<PartialAllreduce> pa;
  ASSERT_EQ(make(c, 4, QUORUM_INT64, o, &pa), QUORUM_OK);
  std::vector<uint64_t> seq(500);
  for (uint64_t k = 0; k < seq.size(); ++k) seq[k] = partial::majority_initiator(o.seed, k, p);
  expect_same_hashes(c, seq, "initiator sequence");
  std::vector<int64_t> in(4), out(4);
  std::vector<uint64_t> hashes;
  std::mt19937 rng(4242u + static_cast<unsigned>(r) * 7919u);
  std::uniform_int_distribution<int> delay(0, 8000);
  int64_t fresh_sum = 0;
  for (uint64_t k = 0; k < rounds; ++k) {
    sleep_us(delay(rng));
    fill_contribution(in, r, k);
    ASSERT_EQ(pa->post(in.data()), QUORUM_OK);
    PartialRoundInfo info;
    ASSERT_EQ(pa->wait(out.data(), &info), QUORUM_OK) << last_error();
    EXPECT_EQ(info.initiator, static_cast<int>(seq[k])) << "round " << k;
    fresh_sum += info.fresh;
    hashes.push_back(round_hash(out.data(), 32, info));
  }
  expect_same_hashes(c, hashes, "majority rounds");
  if (mean_fresh) *mean_fresh = static_cast<double>(fresh_sum) / static_cast<double>(rounds);
  ASSERT_EQ(pa->flush(out.data()), QUORUM_OK);
  EXPECT_EQ(pa->destroy(), QUORUM_OK) << last_error();
}

// 10. Several partial objects and ordinary collectives interleaved.
inline void interleaved(Communicator &c, uint64_t rounds = 12) {
  const int r = c.rank(), p = c.size();
  PartialOptions solo, maj, sync;
  maj.mode = QUORUM_PARTIAL_MAJORITY;
  maj.seed = 99;
  maj.max_staleness = 3;
  sync.max_staleness = 0;
  std::unique_ptr<PartialAllreduce> a, b, s;
  ASSERT_EQ(make(c, 16, QUORUM_INT64, solo, &a), QUORUM_OK);
  ASSERT_EQ(make(c, 3000, QUORUM_INT64, maj, &b), QUORUM_OK);
  ASSERT_EQ(make(c, 5, QUORUM_INT64, sync, &s), QUORUM_OK);
  std::vector<int64_t> ia(16), oa(16), ib(3000), ob(3000), is(5), os(5);
  std::vector<int64_t> pa(16, 0), ga(16, 0), pb(3000, 0), gb(3000, 0);
  for (uint64_t k = 0; k < rounds; ++k) {
    fill_contribution(ia, r, k);
    fill_contribution(ib, r, k + 1000);
    fill_contribution(is, r, k + 2000);
    for (size_t i = 0; i < 16; ++i) pa[i] += ia[i];
    for (size_t i = 0; i < 3000; ++i) pb[i] += ib[i];
    ASSERT_EQ(a->post(ia.data()), QUORUM_OK);
    ASSERT_EQ(b->post(ib.data()), QUORUM_OK);
    ASSERT_EQ(s->post(is.data()), QUORUM_OK);
    int64_t one = r + 1, sum = 0;
    ASSERT_EQ(c.allreduce(&one, &sum, 1, QUORUM_INT64, QUORUM_SUM), QUORUM_OK);
    EXPECT_EQ(sum, static_cast<int64_t>(p) * (p + 1) / 2);
    ASSERT_EQ(s->wait(os.data()), QUORUM_OK) << last_error();
    ASSERT_EQ(b->wait(ob.data()), QUORUM_OK) << last_error();
    ASSERT_EQ(a->wait(oa.data()), QUORUM_OK) << last_error();
    for (size_t i = 0; i < 5; ++i) {
      int64_t want = 0;
      for (int q = 0; q < p; ++q) want += value(q, k + 2000, i);
      EXPECT_EQ(os[i], want) << "synchronous object, round " << k;
    }
    for (size_t i = 0; i < 16; ++i) ga[i] += oa[i];
    for (size_t i = 0; i < 3000; ++i) gb[i] += ob[i];
    uint64_t token = r == 0 ? 0xabcdef00 + k : 0;
    ASSERT_EQ(c.bcast(&token, 8, 0), QUORUM_OK);
    EXPECT_EQ(token, 0xabcdef00 + k);
  }
  ASSERT_EQ(a->flush(oa.data()), QUORUM_OK);
  ASSERT_EQ(b->flush(ob.data()), QUORUM_OK);
  for (size_t i = 0; i < 16; ++i) ga[i] += oa[i];
  for (size_t i = 0; i < 3000; ++i) gb[i] += ob[i];
  std::vector<int64_t> ta(16), tb(3000);
  ASSERT_EQ(c.allreduce(pa.data(), ta.data(), 16, QUORUM_INT64, QUORUM_SUM), QUORUM_OK);
  ASSERT_EQ(c.allreduce(pb.data(), tb.data(), 3000, QUORUM_INT64, QUORUM_SUM), QUORUM_OK);
  EXPECT_EQ(ga, ta);
  EXPECT_EQ(gb, tb);
  EXPECT_EQ(s->destroy(), QUORUM_OK) << last_error();
  EXPECT_EQ(b->destroy(), QUORUM_OK) << last_error();
  EXPECT_EQ(a->destroy(), QUORUM_OK) << last_error();
}

// 11. A rank that dies mid-run: every survivor gets PEER_FAILED or TIMEOUT from
// a wait (never a hang) and keeps getting it; destroy then releases cleanly.
inline void peer_failure(Communicator &c, int victim, void (*kill)(Communicator &)) {
  const int r = c.rank();
  PartialOptions o;
  o.max_staleness = 3;
  std::unique_ptr<PartialAllreduce> p;
  ASSERT_EQ(make(c, 1000, QUORUM_INT64, o, &p), QUORUM_OK);
  std::vector<int64_t> in(1000, 1), out(1000);
  Status s = QUORUM_OK;
  for (uint64_t k = 0; k < 50 && s == QUORUM_OK; ++k) {
    if (r == victim && k == 3) {
      kill(c);
      return;  // the object is abandoned with the rank (its destructor runs)
    }
    s = p->post(in.data());
    if (s == QUORUM_OK) s = p->wait(out.data());
  }
  EXPECT_TRUE(s == QUORUM_ERR_PEER_FAILED || s == QUORUM_ERR_TIMEOUT)
      << "rank " << r << ": " << quorum_strerror(s) << " " << last_error();
  EXPECT_EQ(p->post(in.data()), s) << "a failed object keeps its error";
  Status d = p->destroy();
  EXPECT_EQ(d, s);
}

}  // namespace quorum::test::partial_cases
