// more_cases.hpp: gather, scatter, alltoall(v) and rooted reduce through the
// public C API, blocking and not, from every root, checked element by element; run by ranks as
// threads over inproc (P = 1..8) and as processes over ucx.
#pragma once

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <vector>

#include "quorum/quorum.h"
#include "tests/support/values.hpp"

namespace quorum::test {

#define QT_OK(call) ASSERT_EQ((call), QUORUM_OK) << "rank " << rank << ": " << quorum_last_error()

inline void GatherScatterEveryRoot(quorum_comm_t comm) {
  const int rank = quorum_comm_rank(comm), p = quorum_comm_size(comm);
  const size_t n = 5;  // int32 per rank
  for (int root = 0; root < p; ++root) {
    for (int in_place = 0; in_place < 2; ++in_place) {
      std::vector<int32_t> mine(n), all(n * static_cast<size_t>(p), -1);
      for (size_t i = 0; i < n; ++i) mine[i] = rank * 100 + static_cast<int32_t>(i);
      const bool use_in_place = in_place && rank == root;
      if (use_in_place)
        std::copy(mine.begin(), mine.end(), all.begin() + static_cast<long>(n) * rank);
      QT_OK(quorum_gather(comm, use_in_place ? QUORUM_IN_PLACE : mine.data(),
                          rank == root ? all.data() : nullptr, n * 4, root));
      if (rank == root) {
        for (size_t k = 0; k < all.size(); ++k) {
          ASSERT_EQ(all[k], static_cast<int32_t>(k / n) * 100 + static_cast<int32_t>(k % n))
              << "rank " << rank << " gather root " << root << " element " << k;
        }
      }
    }
    std::vector<int32_t> blocks(n * static_cast<size_t>(p)), got(n, -1);
    for (size_t k = 0; k < blocks.size(); ++k) blocks[k] = root * 7 + static_cast<int32_t>(k);
    QT_OK(quorum_scatter(comm, rank == root ? blocks.data() : nullptr, got.data(), n * 4, root));
    for (size_t i = 0; i < n; ++i) {
      ASSERT_EQ(got[i], root * 7 + static_cast<int32_t>(n * static_cast<size_t>(rank) + i))
          << "rank " << rank << " scatter root " << root << " element " << i;
    }
  }
  int32_t x = 0;
  EXPECT_EQ(quorum_gather(comm, &x, &x, 4, p), QUORUM_ERR_INVALID_ARG) << "root out of range";
}

// Bytes rank `from` sends rank `to` in the alltoallv case (4 to 12, never equal
// for all pairs), the same formula on both sides.
inline size_t v_bytes(int from, int to) {
  return 4 * static_cast<size_t>((from * 2 + to) % 3 + 1);
}

inline void AlltoallAndV(quorum_comm_t comm) {
  const int rank = quorum_comm_rank(comm), p = quorum_comm_size(comm);
  const size_t n = 3;
  std::vector<int32_t> send(n * static_cast<size_t>(p)), recv(send.size(), -1);
  for (int j = 0; j < p; ++j) {
    for (size_t i = 0; i < n; ++i)
      send[n * static_cast<size_t>(j) + i] = rank * 100 + j * 10 + static_cast<int32_t>(i);
  }
  QT_OK(quorum_alltoall(comm, send.data(), recv.data(), n * 4));
  for (int j = 0; j < p; ++j) {
    for (size_t i = 0; i < n; ++i) {
      ASSERT_EQ(recv[n * static_cast<size_t>(j) + i], j * 100 + rank * 10 + static_cast<int32_t>(i))
          << "rank " << rank << " alltoall block " << j;
    }
  }
  std::vector<size_t> sb(static_cast<size_t>(p)), so(sb.size()), rb(sb.size()), ro(sb.size());
  size_t s_total = 0, r_total = 0;
  for (int j = 0; j < p; ++j) {
    const size_t k = static_cast<size_t>(j);
    sb[k] = v_bytes(rank, j);
    so[k] = s_total;
    s_total += sb[k];
    rb[k] = v_bytes(j, rank);
    ro[k] = r_total;
    r_total += rb[k];
  }
  std::vector<int32_t> vsend(s_total / 4), vrecv(r_total / 4, -1);
  for (int j = 0; j < p; ++j) {
    for (size_t i = 0; i < sb[static_cast<size_t>(j)] / 4; ++i) {
      vsend[so[static_cast<size_t>(j)] / 4 + i] = rank * 1000 + j * 10 + static_cast<int32_t>(i);
    }
  }
  QT_OK(quorum_alltoallv(comm, vsend.data(), sb.data(), so.data(), vrecv.data(), rb.data(),
                         ro.data()));
  for (int j = 0; j < p; ++j) {
    for (size_t i = 0; i < rb[static_cast<size_t>(j)] / 4; ++i) {
      ASSERT_EQ(vrecv[ro[static_cast<size_t>(j)] / 4 + i],
                j * 1000 + rank * 10 + static_cast<int32_t>(i))
          << "rank " << rank << " alltoallv from " << j << " element " << i;
    }
  }
}

inline void ReduceEveryOp(quorum_comm_t comm) {
  const int rank = quorum_comm_rank(comm), p = quorum_comm_size(comm);
  const size_t n = 1000;
  const quorum_op_t ops[] = {QUORUM_SUM, QUORUM_PROD, QUORUM_MIN, QUORUM_MAX, QUORUM_AVG};
  const int roots[] = {0, p - 1, p / 2};
  for (quorum_dtype_t d : {QUORUM_FLOAT32, QUORUM_FLOAT64, QUORUM_INT32, QUORUM_INT64}) {
    const size_t es = quorum_dtype_size(d);
    for (quorum_op_t op : ops) {
      for (int root : roots) {
        for (int in_place = 0; in_place < 2; ++in_place) {
          std::vector<uint8_t> send(n * es), recv(n * es, 0xee);
          for (size_t i = 0; i < n; ++i) store(send.data(), i, d, contribution(rank, i, op));
          const bool use_in_place = in_place && rank == root;
          if (use_in_place) recv = send;
          QT_OK(quorum_reduce(comm, use_in_place ? QUORUM_IN_PLACE : send.data(),
                              rank == root ? recv.data() : nullptr, n, d, op, root));
          if (rank != root) continue;
          for (size_t i = 0; i < n; ++i) {
            const double want = reference(p, i, op, d), got = load(recv.data(), i, d);
            const double tol = op == QUORUM_AVG ? 1e-6 * (std::fabs(want) + 1) : 0;
            ASSERT_LE(std::fabs(got - want), tol)
                << "rank " << rank << " reduce root " << root << " dtype " << d << " op " << op
                << " element " << i << ": " << got << ", expected " << want;
          }
        }
      }
    }
  }
}

// The non-blocking forms, all five in flight at once (each checked as its
// blocking case is), waited in an order of their own: alltoallv's size arrays
// are overwritten as soon as the call returns; then the refusals (no request
// pointer, a bad root: nothing handed out) and a finalize refused while a
// request is live.
inline void NonBlockingAllInFlight(quorum_comm_t comm) {
  const int rank = quorum_comm_rank(comm), p = quorum_comm_size(comm);
  const size_t up = static_cast<size_t>(p), n = 3, count = 257;
  const int root = p - 1;
  std::vector<int64_t> rsend(count), rrecv(count, -1);
  for (size_t i = 0; i < count; ++i)
    rsend[i] = static_cast<int64_t>(contribution(rank, i, QUORUM_SUM));
  std::vector<int32_t> gsend(n), gall(n * up, -1), sblocks(n * up), sgot(n, -1);
  for (size_t i = 0; i < n; ++i) gsend[i] = rank * 100 + static_cast<int32_t>(i);
  for (size_t k = 0; k < sblocks.size(); ++k) sblocks[k] = 7 + static_cast<int32_t>(k);
  std::vector<int32_t> asend(n * up), arecv(n * up, -1);
  for (size_t k = 0; k < asend.size(); ++k)
    asend[k] = rank * 100 + static_cast<int32_t>(k / n) * 10 + static_cast<int32_t>(k % n);
  std::vector<size_t> sb(up), so(up), rb(up), ro(up);
  size_t s_total = 0, r_total = 0;
  for (size_t j = 0; j < up; ++j) {
    sb[j] = v_bytes(rank, static_cast<int>(j));
    so[j] = s_total;
    s_total += sb[j];
    rb[j] = v_bytes(static_cast<int>(j), rank);
    ro[j] = r_total;
    r_total += rb[j];
  }
  std::vector<int32_t> vsend(s_total / 4), vrecv(r_total / 4, -1);
  for (size_t j = 0; j < up; ++j) {
    for (size_t i = 0; i < sb[j] / 4; ++i)
      vsend[so[j] / 4 + i] = rank * 1000 + static_cast<int32_t>(j) * 10 + static_cast<int32_t>(i);
  }
  const std::vector<size_t> rb_kept = rb, ro_kept = ro;

  quorum_request_t req[5] = {};
  QT_OK(quorum_ireduce(comm, rsend.data(), rank == root ? rrecv.data() : nullptr, count,
                       QUORUM_INT64, QUORUM_SUM, root, &req[0]));
  QT_OK(quorum_igather(comm, gsend.data(), rank == 0 ? gall.data() : nullptr, n * 4, 0, &req[1]));
  QT_OK(quorum_iscatter(comm, rank == root ? sblocks.data() : nullptr, sgot.data(), n * 4, root,
                        &req[2]));
  QT_OK(quorum_ialltoall(comm, asend.data(), arecv.data(), n * 4, &req[3]));
  QT_OK(quorum_ialltoallv(comm, vsend.data(), sb.data(), so.data(), vrecv.data(), rb.data(),
                          ro.data(), &req[4]));
  for (auto *a : {&sb, &so, &rb, &ro}) std::fill(a->begin(), a->end(), size_t{1} << 60);
  for (quorum_request_t r : req) ASSERT_NE(r, nullptr) << "rank " << rank;
  QT_OK(quorum_wait(req[3]));
  for (int left = 2; left > 0;) {  // alltoallv and scatter by test, the rest by wait
    left = 0;
    for (int k : {4, 2}) {
      if (!req[k]) continue;
      int done = 0;
      QT_OK(quorum_test(req[k], &done));
      if (done)
        req[k] = nullptr;
      else
        ++left;
    }
  }
  QT_OK(quorum_wait(req[1]));
  QT_OK(quorum_wait(req[0]));

  if (rank == root) {
    for (size_t i = 0; i < count; ++i) {
      ASSERT_EQ(static_cast<double>(rrecv[i]), reference(p, i, QUORUM_SUM, QUORUM_INT64))
          << "rank " << rank << " ireduce element " << i;
    }
  }
  if (rank == 0) {
    for (size_t k = 0; k < gall.size(); ++k) {
      ASSERT_EQ(gall[k], static_cast<int32_t>(k / n) * 100 + static_cast<int32_t>(k % n))
          << "rank " << rank << " igather element " << k;
    }
  }
  for (size_t i = 0; i < n; ++i) {
    ASSERT_EQ(sgot[i], 7 + static_cast<int32_t>(n * static_cast<size_t>(rank) + i))
        << "rank " << rank << " iscatter element " << i;
  }
  for (size_t k = 0; k < arecv.size(); ++k) {
    ASSERT_EQ(arecv[k], static_cast<int32_t>(k / n) * 100 + rank * 10 + static_cast<int32_t>(k % n))
        << "rank " << rank << " ialltoall element " << k;
  }
  for (size_t j = 0; j < up; ++j) {
    for (size_t i = 0; i < rb_kept[j] / 4; ++i) {
      ASSERT_EQ(vrecv[ro_kept[j] / 4 + i],
                static_cast<int32_t>(j) * 1000 + rank * 10 + static_cast<int32_t>(i))
          << "rank " << rank << " ialltoallv from " << j << " element " << i;
    }
  }

  // Refusals hand out no request.
  int32_t x = 0;
  quorum_request_t bad = reinterpret_cast<quorum_request_t>(&x);
  EXPECT_EQ(quorum_igather(comm, &x, &x, 4, p, &bad), QUORUM_ERR_INVALID_ARG) << "root " << p;
  EXPECT_EQ(bad, nullptr);
  EXPECT_EQ(quorum_ireduce(comm, &x, &x, 1, QUORUM_INT32, QUORUM_SUM, -1, &bad),
            QUORUM_ERR_INVALID_ARG);
  EXPECT_EQ(bad, nullptr);
  EXPECT_EQ(quorum_ialltoall(comm, &x, &x, 4, nullptr), QUORUM_ERR_INVALID_ARG);
  EXPECT_EQ(quorum_iscatter(comm, &x, &x, 4, 0, nullptr), QUORUM_ERR_INVALID_ARG);
  EXPECT_EQ(quorum_ialltoallv(comm, &x, nullptr, nullptr, &x, nullptr, nullptr, &bad),
            QUORUM_ERR_INVALID_ARG);
  EXPECT_EQ(bad, nullptr);

  // A live request keeps its communicator from being finalized.
  quorum_comm_t dup = nullptr;
  QT_OK(quorum_comm_dup(comm, &dup));
  std::vector<int32_t> dsend(up, rank), drecv(up, -1);
  quorum_request_t live = nullptr;
  QT_OK(quorum_ialltoall(dup, dsend.data(), drecv.data(), 4, &live));
  EXPECT_EQ(quorum_finalize(dup), QUORUM_ERR_INVALID_ARG) << "rank " << rank;
  QT_OK(quorum_wait(live));
  for (size_t j = 0; j < up; ++j) ASSERT_EQ(drecv[j], static_cast<int32_t>(j)) << "rank " << rank;
  QT_OK(quorum_finalize(dup));
}

// The same collectives on the odd and even halves of the communicator.
inline void MoreOnSplit(quorum_comm_t comm) {
  const int rank = quorum_comm_rank(comm);
  quorum_comm_t sub = nullptr;
  QT_OK(quorum_comm_split(comm, rank % 2, rank, &sub));
  GatherScatterEveryRoot(sub);
  AlltoallAndV(sub);
  NonBlockingAllInFlight(sub);
  QT_OK(quorum_finalize(sub));
}

#undef QT_OK

}  // namespace quorum::test
