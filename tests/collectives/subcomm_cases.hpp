// subcomm_cases.hpp: sub-communicators (quorum_comm_split, quorum_comm_dup)
// and point-to-point transfers (quorum_send/recv/isend/irecv), through the
// public C API, written once and run by ranks as threads over inproc (P =
// 1..8) and as processes over ucx. A failure names the rank and the case.
#pragma once

#include <gtest/gtest.h>

#include <algorithm>
#include <cstdint>
#include <numeric>
#include <vector>

#include "quorum/quorum.h"

namespace quorum::test {

#define QT_OK(call) ASSERT_EQ((call), QUORUM_OK) << "rank " << rank << ": " << quorum_last_error()

// The parent ranks whose color matches `color`, ordered by key then rank.
inline std::vector<int> expected_members(int p, int color, int (*color_of)(int),
                                         int (*key_of)(int)) {
  std::vector<int> m;
  for (int r = 0; r < p; ++r) {
    if (color_of(r) == color) m.push_back(r);
  }
  std::stable_sort(m.begin(), m.end(), [&](int a, int b) { return key_of(a) < key_of(b); });
  return m;
}

// Allreduce, bcast, allgather, barrier and a partial allreduce on `sub`, whose
// ranks are the parent ranks `members` in order; `rank` is the parent rank.
inline void CheckCollectivesOn(quorum_comm_t sub, const std::vector<int> &members, int rank) {
  const int n = quorum_comm_size(sub);
  const int me = quorum_comm_rank(sub);
  ASSERT_EQ(n, static_cast<int>(members.size())) << "rank " << rank;
  ASSERT_EQ(members[static_cast<size_t>(me)], rank) << "rank " << rank << " ranked " << me;
  const int64_t member_sum = std::accumulate(members.begin(), members.end(), int64_t{0});

  std::vector<int64_t> v(1000, rank);
  QT_OK(quorum_allreduce(sub, QUORUM_IN_PLACE, v.data(), v.size(), QUORUM_INT64, QUORUM_SUM));
  for (size_t i = 0; i < v.size(); ++i) {
    ASSERT_EQ(v[i], member_sum) << "rank " << rank << " allreduce element " << i;
  }
  for (int root = 0; root < n; ++root) {
    int32_t b = me == root ? 1000 + rank : -1;
    QT_OK(quorum_bcast(sub, &b, sizeof b, root));
    ASSERT_EQ(b, 1000 + members[static_cast<size_t>(root)]) << "rank " << rank << " root " << root;
  }
  std::vector<int32_t> all(static_cast<size_t>(n), -1);
  int32_t mine = rank;
  QT_OK(quorum_allgather(sub, &mine, all.data(), sizeof mine));
  for (int i = 0; i < n; ++i) {
    ASSERT_EQ(all[static_cast<size_t>(i)], members[static_cast<size_t>(i)]) << "rank " << rank;
  }
  QT_OK(quorum_barrier(sub));

  // A partial object, synchronous rounds: every rank's post is in the round.
  quorum_partial_opts_t opts{};
  opts.mode = QUORUM_PARTIAL_SOLO;
  opts.max_staleness = 0;
  opts.carry = 1;
  quorum_partial_t partial = nullptr;
  QT_OK(quorum_partial_create(sub, 64, QUORUM_FLOAT64, QUORUM_SUM, &opts, &partial));
  for (int round = 0; round < 3; ++round) {
    std::vector<double> grad(64, rank + round), out(64, -1);
    QT_OK(quorum_partial_post(partial, grad.data()));
    quorum_round_info_t info{};
    QT_OK(quorum_partial_wait(partial, out.data(), &info));
    EXPECT_EQ(info.fresh, n) << "rank " << rank;
    ASSERT_EQ(out[63], static_cast<double>(member_sum + int64_t{n} * round))
        << "rank " << rank << " round " << round;
  }
  QT_OK(quorum_partial_destroy(partial));
}

inline int parity(int r) {
  return r % 2;
}
inline int reversed(int r) {
  return -r;
}
inline int rank_itself(int r) {
  return r;
}
inline int zero(int) {
  return 0;
}

// Even and odd ranks, each ranked in reverse; then the even ones split again.
inline void SplitEvenOdd(quorum_comm_t comm) {
  const int rank = quorum_comm_rank(comm), p = quorum_comm_size(comm);
  quorum_comm_t sub = nullptr;
  QT_OK(quorum_comm_split(comm, parity(rank), reversed(rank), &sub));
  ASSERT_NE(sub, nullptr) << "rank " << rank;
  CheckCollectivesOn(sub, expected_members(p, parity(rank), parity, reversed), rank);
  // The parent still works between and after (its sequence stays in step).
  int64_t x = 1;
  QT_OK(quorum_allreduce(comm, QUORUM_IN_PLACE, &x, 1, QUORUM_INT64, QUORUM_SUM));
  ASSERT_EQ(x, p) << "rank " << rank;
  // Nested: a split of the split (halves of the even ranks by parent rank).
  quorum_comm_t nested = nullptr;
  const int sub_size = quorum_comm_size(sub);
  const int color = quorum_comm_rank(sub) < sub_size / 2 ? 0 : 1;
  QT_OK(quorum_comm_split(sub, color, rank, &nested));
  int64_t count = 1;
  QT_OK(quorum_allreduce(nested, QUORUM_IN_PLACE, &count, 1, QUORUM_INT64, QUORUM_SUM));
  const int half = sub_size / 2;
  ASSERT_EQ(count, color == 0 ? half : sub_size - half) << "rank " << rank;
  QT_OK(quorum_finalize(nested));
  QT_OK(quorum_finalize(sub));
}

// Rank 0 passes QUORUM_UNDEFINED and gets no communicator; the rest form one.
inline void SplitUndefinedColor(quorum_comm_t comm) {
  const int rank = quorum_comm_rank(comm), p = quorum_comm_size(comm);
  quorum_comm_t sub = reinterpret_cast<quorum_comm_t>(1);
  QT_OK(quorum_comm_split(comm, rank == 0 ? QUORUM_UNDEFINED : 5, 0, &sub));
  if (rank == 0) {
    EXPECT_EQ(sub, nullptr);
  } else {
    std::vector<int> members;
    for (int r = 1; r < p; ++r) members.push_back(r);
    CheckCollectivesOn(sub, members, rank);
    QT_OK(quorum_finalize(sub));
  }
  quorum_comm_t none = nullptr;
  EXPECT_EQ(quorum_comm_split(comm, -7, 0, &none), QUORUM_ERR_INVALID_ARG) << "rank " << rank;
}

// A duplicate: same ranks; its collectives and the parent's run side by side.
inline void DupIsIndependent(quorum_comm_t comm) {
  const int rank = quorum_comm_rank(comm), p = quorum_comm_size(comm);
  quorum_comm_t dup = nullptr;
  QT_OK(quorum_comm_dup(comm, &dup));
  CheckCollectivesOn(dup, expected_members(p, 0, zero, rank_itself), rank);
  std::vector<int32_t> a(3000, rank), b(3000, 2 * rank);
  quorum_request_t ra = nullptr, rb = nullptr;
  QT_OK(
      quorum_iallreduce(comm, QUORUM_IN_PLACE, a.data(), a.size(), QUORUM_INT32, QUORUM_SUM, &ra));
  QT_OK(quorum_iallreduce(dup, QUORUM_IN_PLACE, b.data(), b.size(), QUORUM_INT32, QUORUM_SUM, &rb));
  QT_OK(quorum_wait(rb));
  QT_OK(quorum_wait(ra));
  const int32_t s = p * (p - 1) / 2;
  ASSERT_EQ(a[2999], s) << "rank " << rank;
  ASSERT_EQ(b[2999], 2 * s) << "rank " << rank;
  QT_OK(quorum_finalize(dup));
}

// Every rank sends to the next and receives from the previous (non-blocking),
// then blocking in the other direction; messages of one tag keep their order,
// tags are matched apart, and a collective after them is still in step.
inline void PointToPointRing(quorum_comm_t comm) {
  const int rank = quorum_comm_rank(comm), p = quorum_comm_size(comm);
  int32_t x = 0;
  EXPECT_EQ(quorum_send(comm, &x, sizeof x, rank, 0), QUORUM_ERR_INVALID_ARG) << "to itself";
  EXPECT_EQ(quorum_send(comm, &x, sizeof x, p, 0), QUORUM_ERR_INVALID_ARG) << "peer out of range";
  EXPECT_EQ(quorum_recv(comm, &x, sizeof x, p > 1 ? (rank + 1) % p : 0, -1), QUORUM_ERR_INVALID_ARG)
      << "negative tag";
  if (p == 1) return;
  const int next = (rank + 1) % p, prev = (rank + p - 1) % p;
  const size_t n = 20000;  // 80 KB: past the transports' eager sizes
  std::vector<int32_t> out(n), in(n, -1);
  for (size_t i = 0; i < n; ++i) out[i] = rank * 100000 + static_cast<int32_t>(i);
  quorum_request_t rs = nullptr, rr = nullptr;
  QT_OK(quorum_irecv(comm, in.data(), n * 4, prev, 7, &rr));
  QT_OK(quorum_isend(comm, out.data(), n * 4, next, 7, &rs));
  QT_OK(quorum_wait(rs));
  QT_OK(quorum_wait(rr));
  for (size_t i = 0; i < n; i += 997) {
    ASSERT_EQ(in[i], prev * 100000 + static_cast<int32_t>(i)) << "rank " << rank << " i " << i;
  }
  // Three messages of tag 1 and one of tag 2 to the previous rank; received
  // tag 2 first, then tag 1 in order.
  int32_t m[4] = {rank * 10 + 1, rank * 10 + 2, rank * 10 + 3, rank * 10 + 9};
  quorum_request_t sends[4];
  for (int k = 0; k < 4; ++k) QT_OK(quorum_isend(comm, &m[k], 4, prev, k < 3 ? 1 : 2, &sends[k]));
  int32_t got = -1;
  QT_OK(quorum_recv(comm, &got, 4, next, 2));
  ASSERT_EQ(got, next * 10 + 9) << "rank " << rank << " tag 2";
  for (int k = 0; k < 3; ++k) {
    QT_OK(quorum_recv(comm, &got, 4, next, 1));
    ASSERT_EQ(got, next * 10 + 1 + k) << "rank " << rank << " tag 1, message " << k;
  }
  for (auto &r : sends) QT_OK(quorum_wait(r));
  // Only ranks 0 and 1 talk; the allreduce after must still match.
  if (rank < 2) {
    int32_t y = rank;
    if (rank == 0) {
      QT_OK(quorum_send(comm, &y, 4, 1, 3));
    }
    if (rank == 1) {
      QT_OK(quorum_recv(comm, &y, 4, 0, 3));
      ASSERT_EQ(y, 0);
    }
  }
  int64_t one = 1;
  QT_OK(quorum_allreduce(comm, QUORUM_IN_PLACE, &one, 1, QUORUM_INT64, QUORUM_SUM));
  ASSERT_EQ(one, p) << "rank " << rank;
  // A receive that expects more than was sent fails as a mismatch.
  if (rank < 2) {
    int64_t big = 0;
    int32_t small = 5;
    if (rank == 0) {
      QT_OK(quorum_send(comm, &small, sizeof small, 1, 4));
    }
    if (rank == 1) {
      EXPECT_EQ(quorum_recv(comm, &big, sizeof big, 0, 4), QUORUM_ERR_MISMATCH);
    }
  }
  QT_OK(quorum_barrier(comm));
}

// Point-to-point on a sub-communicator: ranks are the sub-communicator's.
inline void PointToPointOnSplit(quorum_comm_t comm) {
  const int rank = quorum_comm_rank(comm);
  quorum_comm_t sub = nullptr;
  QT_OK(quorum_comm_split(comm, parity(rank), rank, &sub));
  const int me = quorum_comm_rank(sub), n = quorum_comm_size(sub);
  if (n > 1 && me < 2) {
    int32_t v = rank;
    if (me == 0) {
      QT_OK(quorum_send(sub, &v, 4, 1, 11));
    }
    if (me == 1) {
      QT_OK(quorum_recv(sub, &v, 4, 0, 11));
      ASSERT_EQ(v, rank - 2) << "rank " << rank << ": sub rank 0 is parent rank " << rank - 2;
    }
  }
  QT_OK(quorum_finalize(sub));
}

#undef QT_OK

}  // namespace quorum::test
