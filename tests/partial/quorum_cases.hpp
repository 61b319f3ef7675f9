// quorum_cases.hpp: test cases of the k-of-P quorum allreduce
// (QUORUM_PARTIAL_QUORUM, collectives/partial/quorum_readiness.cpp), each a
// function of one rank's Communicator like partial_cases.hpp, so the same
// bodies run as threads over inproc and as processes over ucx.
#pragma once

#include "tests/partial/partial_cases.hpp"

namespace quorum::test::quorum_cases {

using partial_cases::expect_same_hashes;
using partial_cases::fill_contribution;
using partial_cases::round_hash;
using partial_cases::value;

inline PartialOptions quorum_options(unsigned k, uint64_t max_staleness) {
  PartialOptions o;
  o.mode = QUORUM_PARTIAL_QUORUM;
  o.k = k;
  o.max_staleness = max_staleness;
  return o;
}

// Conservation with carry under random delays, for one k: every rank posts
// every round; the sum of all results (rounds + flush) equals the sum of all
// posts exactly, every rank sees the same rounds, and each activated round
// holds at least k fresh posts (only in-time posts arrive here), activated by
// its counter rank (k > 1; k = 1 is solo: the first post). k = P makes every
// round hold every post.
inline void conservation(Communicator &c, unsigned k, uint64_t rounds = 12,
                         int max_delay_us = 400) {
  const int r = c.rank(), p = c.size();
  const size_t n = 9;
  std::unique_ptr<PartialAllreduce> pa;
  ASSERT_EQ(PartialAllreduce::create(c, n, QUORUM_INT64, QUORUM_SUM, quorum_options(k, 5), &pa),
            QUORUM_OK)
      << last_error();
  std::vector<int64_t> in(n), out(n), posted(n, 0), got(n, 0);
  std::vector<uint64_t> hashes;
  std::mt19937 rng(77u * k + static_cast<unsigned>(r));
  std::uniform_int_distribution<int> delay(0, max_delay_us);
  for (uint64_t round = 0; round < rounds; ++round) {
    partial_cases::sleep_us(delay(rng));
    fill_contribution(in, r, round);
    for (size_t i = 0; i < n; ++i) posted[i] += in[i];
    ASSERT_EQ(pa->post(in.data()), QUORUM_OK) << last_error();
    PartialRoundInfo info;
    ASSERT_EQ(pa->wait(out.data(), &info), QUORUM_OK) << "rank " << r << ": " << last_error();
    EXPECT_EQ(info.round, round);
    if (!info.synchronous) {
      EXPECT_GE(info.fresh, static_cast<int>(k)) << "P=" << p << " k=" << k << " round " << round;
      if (k > 1) {
        EXPECT_EQ(info.initiator, partial::quorum_counter(round, p)) << "round " << round;
      }
    }
    if (k == static_cast<unsigned>(p)) {
      EXPECT_EQ(info.fresh, p) << "k = P: every post in every round";
    }
    for (size_t i = 0; i < n; ++i) got[i] += out[i];
    hashes.push_back(round_hash(out.data(), n * 8, info));
  }
  PartialRoundInfo info;
  ASSERT_EQ(pa->flush(out.data(), &info), QUORUM_OK) << last_error();
  for (size_t i = 0; i < n; ++i) got[i] += out[i];
  hashes.push_back(round_hash(out.data(), n * 8, info));
  std::vector<int64_t> total(n);
  ASSERT_EQ(c.allreduce(posted.data(), total.data(), n, QUORUM_INT64, QUORUM_SUM), QUORUM_OK);
  EXPECT_EQ(got, total) << "P=" << p << " k=" << k << " rank " << r
                        << ": results do not add up to the posts";
  expect_same_hashes(c, hashes, "quorum round results");
  EXPECT_EQ(pa->destroy(), QUORUM_OK) << last_error();
}

// One driver: only `driver` posts, the others wait without posting (which
// counts as arriving), so every round still gathers k arrivals and every rank
// completes every round. With k = P each round needs the driver's post too,
// so it is exactly that post; with k < P the waiting ranks may start a round
// before the driver posts, whose post then rides in a later round: the sum
// of the results and the flush is the sum of its posts, the same on every rank.
inline void one_driver(Communicator &c, unsigned k, int driver, uint64_t rounds = 8) {
  const int r = c.rank(), p = c.size();
  std::unique_ptr<PartialAllreduce> pa;
  ASSERT_EQ(PartialAllreduce::create(c, 4, QUORUM_INT64, QUORUM_SUM, quorum_options(k, 3), &pa),
            QUORUM_OK)
      << last_error();
  std::vector<int64_t> in(4), out(4), want(4), posted(4, 0), got(4, 0);
  std::vector<uint64_t> hashes;
  for (uint64_t round = 0; round < rounds; ++round) {
    fill_contribution(in, driver, round);
    for (size_t i = 0; i < 4; ++i) posted[i] += in[i];
    if (r == driver) {
      ASSERT_EQ(pa->post(in.data()), QUORUM_OK) << last_error();
    }
    PartialRoundInfo info;
    ASSERT_EQ(pa->wait(out.data(), &info), QUORUM_OK) << "rank " << r << ": " << last_error();
    EXPECT_EQ(info.round, round);
    EXPECT_LE(info.fresh, 1);
    if (k == static_cast<unsigned>(p)) {
      EXPECT_EQ(out, in) << "rank " << r << " round " << round << ": k = P needs the driver";
      EXPECT_EQ(info.fresh, 1);
      EXPECT_EQ(info.own_fresh, r == driver);
    }
    for (size_t i = 0; i < 4; ++i) got[i] += out[i];
    hashes.push_back(round_hash(out.data(), 32, info));
  }
  ASSERT_EQ(pa->flush(out.data()), QUORUM_OK) << last_error();
  for (size_t i = 0; i < 4; ++i) got[i] += out[i];
  EXPECT_EQ(got, posted) << "rank " << r << " k " << k << ": the driver's posts, each once";
  expect_same_hashes(c, hashes, "quorum one-driver rounds");
  EXPECT_EQ(pa->destroy(), QUORUM_OK) << last_error();
}

// k = 0, k > P, and k in another mode are refused on every rank alike
// (before any collective step, so nobody waits for the others).
inline void bad_k(Communicator &c) {
  const unsigned p = static_cast<unsigned>(c.size());
  std::unique_ptr<PartialAllreduce> pa;
  for (unsigned k : {0u, p + 1, 1000u}) {
    EXPECT_EQ(PartialAllreduce::create(c, 4, QUORUM_INT64, QUORUM_SUM, quorum_options(k, 3), &pa),
              QUORUM_ERR_INVALID_ARG)
        << "k = " << k << " on " << p << " ranks";
    EXPECT_NE(std::string(last_error()).find("1 <= k <= " + std::to_string(p)), std::string::npos)
        << last_error();
  }
  PartialOptions solo;
  solo.k = 2;
  EXPECT_EQ(PartialAllreduce::create(c, 4, QUORUM_INT64, QUORUM_SUM, solo, &pa),
            QUORUM_ERR_INVALID_ARG);
  EXPECT_NE(std::string(last_error()).find("quorum mode only"), std::string::npos) << last_error();
}

}  // namespace quorum::test::quorum_cases
