// more_cases.hpp: gather, scatter, alltoall(v) and rooted reduce through the
// public C API, from every root, checked element by element; run by ranks as
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

// The same collectives on the odd and even halves of the communicator.
inline void MoreOnSplit(quorum_comm_t comm) {
  const int rank = quorum_comm_rank(comm);
  quorum_comm_t sub = nullptr;
  QT_OK(quorum_comm_split(comm, rank % 2, rank, &sub));
  GatherScatterEveryRoot(sub);
  AlltoallAndV(sub);
  QT_OK(quorum_finalize(sub));
}

#undef QT_OK

}  // namespace quorum::test
