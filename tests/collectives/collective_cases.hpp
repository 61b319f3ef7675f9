// collective_cases.hpp: the checks of every collective, written once and run
// both by ranks as threads over inproc and by ranks as processes over ucx
// (under quorum-run and mpirun). Each case takes this rank's communicator;
// a failure names the rank, the parameters and the first differing element.
#pragma once

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdlib>
#include <random>
#include <string>
#include <vector>

#include "collectives/algorithms/algorithm.hpp"
#include "collectives/communicator.hpp"
#include "collectives/reduce/reduce_kernels.hpp"
#include "collectives/shm/shm_path_choice.hpp"
#include "runtime/topology.hpp"
#include "tests/support/sanitizers.hpp"
#include "tests/support/values.hpp"

namespace quorum::test {

inline const quorum_dtype_t kDtypes[] = {QUORUM_FLOAT32,  QUORUM_FLOAT64, QUORUM_FLOAT16,
                                         QUORUM_BFLOAT16, QUORUM_INT32,   QUORUM_INT64};
inline const quorum_op_t kOps[] = {QUORUM_SUM, QUORUM_PROD, QUORUM_MIN, QUORUM_MAX, QUORUM_AVG};

inline double tolerance(quorum_dtype_t d, quorum_op_t op, double expected) {
  if (op != QUORUM_AVG) return 0;
  double rel = d == QUORUM_FLOAT16 ? 1e-3 : d == QUORUM_BFLOAT16 ? 1e-2 : 1e-6;
  return rel * (std::fabs(expected) + 1);
}

// First differing element, or -1.
inline long first_difference(const void *buf, size_t count, quorum_dtype_t d, quorum_op_t op, int p,
                             double *got, double *want) {
  for (size_t i = 0; i < count; ++i) {
    *want = reference(p, i, op, d);
    *got = load(buf, i, d);
    if (std::fabs(*got - *want) > tolerance(d, op, *want)) return static_cast<long>(i);
  }
  return -1;
}

inline void AllreduceEveryDtypeAndOp(Communicator &c) {
  const int p = c.size();
  // 40000 elements take the ring path for every dtype, the others recursive doubling.
  const size_t counts[] = {0, 1, 7, 1000, 40000};
  const int r = c.rank();
  for (quorum_dtype_t d : kDtypes) {
    const size_t es = dtype_size(d);
    for (quorum_op_t op : kOps) {
      for (size_t n : counts) {
        for (int in_place = 0; in_place < 2; ++in_place) {
          std::vector<uint8_t> send(n * es + 1), recv(n * es + 1);
          for (size_t i = 0; i < n; ++i) store(send.data(), i, d, contribution(r, i, op));
          if (in_place) recv = send;
          Status s = c.allreduce(in_place ? QUORUM_IN_PLACE : send.data(), recv.data(), n, d, op);
          ASSERT_EQ(s, QUORUM_OK) << "rank " << r << ": " << last_error();
          double got = 0, want = 0;
          long i = first_difference(recv.data(), n, d, op, p, &got, &want);
          ASSERT_EQ(i, -1) << "rank " << r << " P=" << p << " " << dtype_name(d) << " "
                           << op_name(op) << " n=" << n << " in_place=" << in_place << ": element "
                           << i << " is " << got << ", expected " << want;
        }
      }
    }
  }
}

inline void NonBlockingAllreduceOverlaps(Communicator &c) {
  const int p = c.size();
  const size_t n = 5000;
  std::vector<std::vector<int32_t>> bufs(4, std::vector<int32_t>(n));
  std::vector<RequestPtr> reqs(4);
  for (int k = 0; k < 4; ++k) {
    for (size_t i = 0; i < n; ++i) bufs[k][i] = c.rank() + k + static_cast<int>(i);
    ASSERT_EQ(c.iallreduce(QUORUM_IN_PLACE, bufs[k].data(), n, QUORUM_INT32, QUORUM_SUM, &reqs[k]),
              QUORUM_OK);
  }
  for (int k = 3; k >= 0; --k) ASSERT_EQ(c.wait(reqs[k]), QUORUM_OK) << last_error();
  for (int k = 0; k < 4; ++k) {
    for (size_t i = 0; i < n; ++i) {
      int32_t want = p * (p - 1) / 2 + p * (k + static_cast<int>(i));
      ASSERT_EQ(bufs[k][i], want) << "rank " << c.rank() << " request " << k << " element " << i;
    }
  }
}

// In place on some ranks and out of place on the others, which is legal (a
// partial round is in place on a rank that copied its post and not on one
// that lent it): whatever a rank's own call looks like, every rank must take
// the same protocol. Sizes from the flag line to many shm chunks (a message
// of one chunk is where 2 ranks chose differently once and waited on each
// other until the timeout: on 2 ranks one chunk is replicated up to 64 KiB,
// 16384 int32, and sliced above), on ordinary and mem_alloc buffers.
inline void InPlaceOnSomeRanksOnly(Communicator &c) {
  const int p = c.size(), r = c.rank();
  const size_t counts[] = {1, 7, 5000, 16384, 16385, 40000, 65536, 131072, 300000};
  constexpr size_t kMax = 300000;
  void *sym = nullptr;
  ASSERT_EQ(c.mem_alloc(2 * kMax * sizeof(int32_t), &sym), QUORUM_OK) << last_error();
  std::vector<int32_t> plain_send(kMax), plain_recv(kMax);
  int id = 0;
  for (int symmetric = 0; symmetric < 2; ++symmetric) {
    int32_t *send = symmetric ? static_cast<int32_t *>(sym) : plain_send.data();
    int32_t *recv = symmetric ? static_cast<int32_t *>(sym) + kMax : plain_recv.data();
    for (size_t n : counts) {
      for (int parity = 0; parity < 2; ++parity, ++id) {
        const bool in_place = r % 2 == parity;
        for (size_t i = 0; i < n; ++i) send[i] = r + id + static_cast<int32_t>(i % 97);
        int32_t *result = in_place ? send : recv;
        ASSERT_EQ(
            c.allreduce(in_place ? QUORUM_IN_PLACE : send, result, n, QUORUM_INT32, QUORUM_SUM),
            QUORUM_OK)
            << "rank " << r << " n=" << n << " in_place=" << in_place << " symmetric=" << symmetric
            << ": " << last_error();
        for (size_t i = 0; i < n; ++i) {
          ASSERT_EQ(result[i], p * (p - 1) / 2 + p * (id + static_cast<int32_t>(i % 97)))
              << "rank " << r << " n=" << n << " in_place=" << in_place
              << " symmetric=" << symmetric << " element " << i;
        }
      }
    }
  }
  EXPECT_EQ(c.mem_free(sym), QUORUM_OK);
}

// Small blocking allreduces (the shm fast path, messages in the flag line)
// while a larger non-blocking one is in flight, many times over: the shm slots
// are reused by interleaved calls, on threads that finish chunks out of order.
inline void SmallAndLargeInterleaved(Communicator &c) {
  const int p = c.size();
  const size_t n = 3000;
  std::vector<int32_t> large(n);
  for (int it = 0; it < 300; ++it) {
    for (size_t i = 0; i < n; ++i) large[i] = c.rank() * 7 + it + static_cast<int>(i);
    RequestPtr req;
    ASSERT_EQ(c.iallreduce(QUORUM_IN_PLACE, large.data(), n, QUORUM_INT32, QUORUM_SUM, &req),
              QUORUM_OK);
    for (int k = 0; k < 3; ++k) {
      const size_t m = 1 + static_cast<size_t>(it + k) % 14;  // 4..56 bytes
      int32_t small[14], out[14];
      for (size_t i = 0; i < m; ++i) small[i] = c.rank() + it * 3 + k + static_cast<int>(i);
      ASSERT_EQ(c.allreduce(small, out, m, QUORUM_INT32, QUORUM_SUM), QUORUM_OK) << last_error();
      for (size_t i = 0; i < m; ++i) {
        ASSERT_EQ(out[i], p * (p - 1) / 2 + p * (it * 3 + k + static_cast<int>(i)))
            << "rank " << c.rank() << " iteration " << it << " call " << k << " element " << i;
      }
    }
    ASSERT_EQ(c.wait(req), QUORUM_OK) << last_error();
    for (size_t i = 0; i < n; ++i) {
      ASSERT_EQ(large[i], 7 * p * (p - 1) / 2 + p * (it + static_cast<int>(i)))
          << "rank " << c.rank() << " iteration " << it << " element " << i;
    }
  }
}

// Allreduces on buffers from mem_alloc (symmetric shared memory when the ranks
// are processes of one host): every dtype with sum, max and average, in place
// and out of place, at offsets that differ between ranks and between send and
// receive, each followed by a small allreduce (slot reuse after the zero-copy
// path); a non-blocking one overlapping small blocking ones; then with rank
// 0's send buffer plain (every rank must fall back to copying). With a
// shared-memory channel and the shm allreduce, the symmetric calls must have
// gone zero-copy; allocation errors are checked on every communicator.
inline void SymmetricBuffers(Communicator &c) {
  const int p = c.size(), r = c.rank();
  const size_t n = 70001;  // above QUORUM_SHM_ZERO_COPY_BYTES for every dtype
  const size_t bytes = (n + 16) * 8;
  void *a = nullptr, *b = nullptr;
  ASSERT_EQ(c.mem_alloc(bytes, &a), QUORUM_OK) << last_error();
  ASSERT_EQ(c.mem_alloc(bytes, &b), QUORUM_OK) << last_error();
  ASSERT_NE(a, nullptr);
  const uint64_t zero_copy_before = c.zero_copy_allreduces();
  uint64_t symmetric_calls = 0;
  auto check_small = [&](int tag) {
    int32_t x = r + tag, y = 0;
    ASSERT_EQ(c.allreduce(&x, &y, 1, QUORUM_INT32, QUORUM_SUM), QUORUM_OK) << last_error();
    ASSERT_EQ(y, p * (p - 1) / 2 + p * tag) << "rank " << r;
  };
  for (quorum_dtype_t d : kDtypes) {
    const size_t es = dtype_size(d);
    for (quorum_op_t op : {QUORUM_SUM, QUORUM_MAX, QUORUM_AVG}) {
      for (int in_place = 0; in_place < 2; ++in_place) {
        uint8_t *send = static_cast<uint8_t *>(a) + es * static_cast<size_t>(r);
        uint8_t *recv =
            in_place ? send : static_cast<uint8_t *>(b) + es * static_cast<size_t>(p - r);
        for (size_t i = 0; i < n; ++i) store(send, i, d, contribution(r, i, op));
        ASSERT_EQ(c.allreduce(in_place ? QUORUM_IN_PLACE : send, recv, n, d, op), QUORUM_OK)
            << "rank " << r << ": " << last_error();
        ++symmetric_calls;
        double got = 0, want = 0;
        long i = first_difference(recv, n, d, op, p, &got, &want);
        ASSERT_EQ(i, -1) << "rank " << r << " P=" << p << " " << dtype_name(d) << " " << op_name(op)
                         << " in_place=" << in_place << ": element " << i << " is " << got
                         << ", expected " << want;
        check_small(in_place);
      }
    }
  }
  // Non-blocking, with small blocking allreduces while it is in flight.
  auto *ia = static_cast<int32_t *>(a);
  for (int it = 0; it < 20; ++it) {
    for (size_t i = 0; i < n; ++i) ia[i] = r * 5 + it + static_cast<int32_t>(i % 1000);
    RequestPtr req;
    ASSERT_EQ(c.iallreduce(QUORUM_IN_PLACE, ia, n, QUORUM_INT32, QUORUM_SUM, &req), QUORUM_OK);
    ++symmetric_calls;
    check_small(it);
    ASSERT_EQ(c.wait(req), QUORUM_OK) << last_error();
    for (size_t i = 0; i < n; ++i) {
      ASSERT_EQ(ia[i], 5 * p * (p - 1) / 2 + p * (it + static_cast<int32_t>(i % 1000)))
          << "rank " << r << " iteration " << it << " element " << i;
    }
  }
  // One rank's buffer is not symmetric: every rank copies instead.
  std::vector<int32_t> plain(n);
  int32_t *send = r == 0 ? plain.data() : ia;
  for (size_t i = 0; i < n; ++i) send[i] = r + static_cast<int32_t>(i % 77);
  auto *out = static_cast<int32_t *>(b);
  ASSERT_EQ(c.allreduce(send, out, n, QUORUM_INT32, QUORUM_SUM), QUORUM_OK) << last_error();
  for (size_t i = 0; i < n; ++i) {
    ASSERT_EQ(out[i], p * (p - 1) / 2 + p * static_cast<int32_t>(i % 77)) << "element " << i;
  }
  const uint64_t zero_copy = c.zero_copy_allreduces() - zero_copy_before;
  if (c.has_shm_channel() && allreduce_uses_shm()) {
    EXPECT_EQ(zero_copy, symmetric_calls) << "rank " << r;
  } else {
    EXPECT_EQ(zero_copy, 0u) << "rank " << r;
  }
  // Errors: unequal sizes (every rank), zero bytes, a pointer not from mem_alloc.
  void *bad = nullptr;
  if (p > 1) {
    EXPECT_EQ(c.mem_alloc(4096 + static_cast<size_t>(r == 0), &bad), QUORUM_ERR_MISMATCH);
    EXPECT_EQ(bad, nullptr);
  }
  EXPECT_EQ(c.mem_alloc(0, &bad), QUORUM_ERR_INVALID_ARG);
  EXPECT_EQ(c.mem_free(plain.data()), QUORUM_ERR_INVALID_ARG);
  EXPECT_EQ(c.mem_free(a), QUORUM_OK);
  EXPECT_EQ(c.mem_free(a), QUORUM_ERR_INVALID_ARG);
  EXPECT_EQ(c.mem_free(b), QUORUM_OK);
  EXPECT_EQ(c.barrier(), QUORUM_OK);
}

// Allreduces on ordinary buffers above QUORUM_SHM_CROSS_MEMORY_BYTES: every
// dtype with sum, max and average, in place and out of place, at offsets that
// differ between ranks, each followed by a small allreduce. With the shm
// allreduce and cross-memory attach on, each must have taken that path unless
// it was out of place and above QUORUM_SHM_CROSS_MEMORY_OUT_OF_PLACE_MAX_BYTES
// (QUORUM_TEST_EXPECT_CROSS_MEMORY=1: it must be on).
inline void CrossMemoryOnOrdinaryBuffers(Communicator &c) {
  const int p = c.size(), r = c.rank();
  const size_t n = 70001;
  std::vector<uint8_t> a((n + 16) * 8), b((n + 16) * 8);
  const uint64_t before = c.cross_memory_allreduces();
  uint64_t calls = 0;  // those that should go cross-memory
  bool all_above = true;
  for (quorum_dtype_t d : kDtypes) {
    const size_t es = dtype_size(d);
    all_above = all_above && n * es >= c.cross_memory_min_bytes();
    for (quorum_op_t op : {QUORUM_SUM, QUORUM_MAX, QUORUM_AVG}) {
      for (int in_place = 0; in_place < 2; ++in_place) {
        uint8_t *send = a.data() + es * static_cast<size_t>(r);
        uint8_t *recv = in_place ? send : b.data() + es * static_cast<size_t>(p - r);
        for (size_t i = 0; i < n; ++i) store(send, i, d, contribution(r, i, op));
        ASSERT_EQ(c.allreduce(in_place ? QUORUM_IN_PLACE : send, recv, n, d, op), QUORUM_OK)
            << "rank " << r << ": " << last_error();
        if (in_place || n * es <= c.cross_memory_out_of_place_max_bytes()) ++calls;
        double got = 0, want = 0;
        long i = first_difference(recv, n, d, op, p, &got, &want);
        ASSERT_EQ(i, -1) << "rank " << r << " P=" << p << " " << dtype_name(d) << " " << op_name(op)
                         << " in_place=" << in_place << ": element " << i << " is " << got
                         << ", expected " << want;
        int32_t x = r, y = 0;
        ASSERT_EQ(c.allreduce(&x, &y, 1, QUORUM_INT32, QUORUM_SUM), QUORUM_OK) << last_error();
        ASSERT_EQ(y, p * (p - 1) / 2) << "rank " << r;
      }
    }
  }
  const uint64_t taken = c.cross_memory_allreduces() - before;
  const char *expect = std::getenv("QUORUM_TEST_EXPECT_CROSS_MEMORY");
  if (expect && std::string(expect) == "1") {
    ASSERT_TRUE(c.has_shm_channel() && allreduce_uses_shm() && all_above)
        << "rank " << r << ": cross-memory attach is off (from " << c.cross_memory_min_bytes()
        << " B)";
  }
  if (c.has_shm_channel() && allreduce_uses_shm() && all_above) {
    EXPECT_EQ(taken, calls) << "rank " << r;
  } else if (c.cross_memory_min_bytes() == SIZE_MAX) {
    EXPECT_EQ(taken, 0u) << "rank " << r;
  }
}

// The probe that timed the cross-memory path against the copy path when the
// communicator was made: every rank ends with the same choice, and where it
// ran, its cross-memory turns took that path (and its copy turns did not),
// both were timed, and a lifted out-of-place limit goes with the cross-memory
// path. QUORUM_TEST_EXPECT_PATH_PROBE=1: it must have run where
// every rank has a core of its own (bound core per rank counts: their masks
// together cover a core each); 0: it must not have run.
inline void CrossMemoryPathChosenTogether(Communicator &c) {
  const ShmChannel::PathProbe probe = c.cross_memory_path_probe();
  constexpr size_t kFields = 5;
  const uint64_t mine[kFields] = {c.cross_memory_min_bytes(),
                                  c.cross_memory_out_of_place_max_bytes(), probe.ran,
                                  probe.copy_chosen, probe.out_of_place_unlimited};
  std::vector<uint64_t> all(kFields * static_cast<size_t>(c.size()));
  ASSERT_EQ(c.allgather(mine, all.data(), sizeof(mine)), QUORUM_OK) << last_error();
  for (int q = 0; q < c.size(); ++q) {
    for (size_t i = 0; i < kFields; ++i) {
      EXPECT_EQ(all[kFields * static_cast<size_t>(q) + i], mine[i])
          << "rank " << c.rank() << " vs rank " << q << ", field " << i;
    }
  }
  if (probe.ran) {
    EXPECT_EQ(probe.cross_memory_ops, static_cast<uint64_t>(kProbeOpsPerPath));
    EXPECT_GT(probe.cross_memory_ns, 0u);
    EXPECT_GT(probe.copy_ns, 0u);
    EXPECT_EQ(c.cross_memory_min_bytes() == SIZE_MAX, probe.copy_chosen);
    if (probe.out_of_place_unlimited) {
      EXPECT_FALSE(probe.copy_chosen);
      EXPECT_EQ(c.cross_memory_out_of_place_max_bytes(), SIZE_MAX);
    }
  }
  const char *expect = std::getenv("QUORUM_TEST_EXPECT_PATH_PROBE");
  if (expect && std::string(expect) == "0") {
    EXPECT_FALSE(probe.ran) << "rank " << c.rank();
  }
  const int cores = c.local_cores() > 0 ? c.local_cores() : usable_core_count();
  if (expect && std::string(expect) == "1" && c.size() <= cores) {
    EXPECT_TRUE(probe.ran) << "rank " << c.rank() << ": the probe did not run";
  }
}

// mem_alloc sizes whose rounding (to 64 B, to pages) or whose total over the
// ranks (symmetric memory) would wrap around fail on every rank, naming the
// size, and hand out no buffer; an ordinary allocation works afterwards.
inline void HugeAllocationsAreRefused(Communicator &c) {
  const size_t too_big[] = {SIZE_MAX,         SIZE_MAX - 1, SIZE_MAX - 63,     SIZE_MAX - 4095,
                            SIZE_MAX / 2 + 1, SIZE_MAX / 2, kMaxAllocBytes + 1};
  for (size_t bytes : too_big) {
    void *p = &c;
    EXPECT_EQ(c.mem_alloc(bytes, &p), QUORUM_ERR_INVALID_ARG) << bytes << " B";
    EXPECT_EQ(p, nullptr) << bytes << " B";
    EXPECT_NE(std::string(last_error()).find(std::to_string(bytes)), std::string::npos)
        << last_error();
  }
  if (c.has_shm_channel() && c.size() > 1) {
    // Fine for one rank, too much for all of them in one segment (no
    // allocation is attempted: plain memory would not be had either).
    void *p = &c;
    EXPECT_EQ(c.mem_alloc(kMaxAllocBytes / 2 + 1, &p), QUORUM_ERR_NO_MEMORY);
    EXPECT_EQ(p, nullptr);
    EXPECT_NE(std::string(last_error()).find("too big to map"), std::string::npos) << last_error();
  }
  void *ok = nullptr;
  ASSERT_EQ(c.mem_alloc(4096, &ok), QUORUM_OK) << last_error();
  EXPECT_EQ(static_cast<uint8_t *>(ok)[4095], 0);
  EXPECT_EQ(c.mem_free(ok), QUORUM_OK);
  EXPECT_EQ(c.barrier(), QUORUM_OK);
}

// A copying allreduce still in flight (non-blocking, two chunks) while a
// zero-copy one on mem_alloc buffers runs to its end, then a copying one on
// the same slots, many times over. The zero-copy op needs no slots of its own
// and can finish first; it may claim its slots only once the earlier op's
// chunks are finished on its rank, or a slot's done flag goes back down (the
// next allreduce then waits forever) and a peer may rewrite a slot still read.
inline void ZeroCopyOvertakesCopy(Communicator &c) {
  const int p = c.size(), r = c.rank();
  const size_t big = 200000;  // two 512 KiB chunks of int32
  const size_t n = 70001;     // above QUORUM_SHM_ZERO_COPY_BYTES
  void *sym = nullptr;
  ASSERT_EQ(c.mem_alloc(n * sizeof(int32_t), &sym), QUORUM_OK) << last_error();
  auto *zc = static_cast<int32_t *>(sym);
  std::vector<int32_t> before(big), after(big);
  const uint64_t zero_copy_before = c.zero_copy_allreduces();
  const int iterations = stress_rounds(300, 40);
  for (int it = 0; it < iterations; ++it) {
    for (size_t i = 0; i < big; ++i) before[i] = r + it + static_cast<int32_t>(i % 501);
    for (size_t i = 0; i < n; ++i) zc[i] = 2 * r + it + static_cast<int32_t>(i % 307);
    for (size_t i = 0; i < big; ++i) after[i] = 3 * r + it + static_cast<int32_t>(i % 211);
    RequestPtr req;
    ASSERT_EQ(c.iallreduce(QUORUM_IN_PLACE, before.data(), big, QUORUM_INT32, QUORUM_SUM, &req),
              QUORUM_OK);
    ASSERT_EQ(c.allreduce(QUORUM_IN_PLACE, zc, n, QUORUM_INT32, QUORUM_SUM), QUORUM_OK)
        << "rank " << r << " iteration " << it << ": " << last_error();
    ASSERT_EQ(c.wait(req), QUORUM_OK)
        << "rank " << r << " iteration " << it << ": " << last_error();
    ASSERT_EQ(c.allreduce(QUORUM_IN_PLACE, after.data(), big, QUORUM_INT32, QUORUM_SUM), QUORUM_OK)
        << "rank " << r << " iteration " << it << ": " << last_error();
    const int32_t ranks = p * (p - 1) / 2;
    for (size_t i = 0; i < big; ++i) {
      ASSERT_EQ(before[i], ranks + p * (it + static_cast<int32_t>(i % 501)))
          << "rank " << r << " iteration " << it << " element " << i;
      ASSERT_EQ(after[i], 3 * ranks + p * (it + static_cast<int32_t>(i % 211)))
          << "rank " << r << " iteration " << it << " element " << i;
    }
    for (size_t i = 0; i < n; ++i) {
      ASSERT_EQ(zc[i], 2 * ranks + p * (it + static_cast<int32_t>(i % 307)))
          << "rank " << r << " iteration " << it << " element " << i;
    }
  }
  if (c.has_shm_channel() && allreduce_uses_shm()) {
    EXPECT_EQ(c.zero_copy_allreduces() - zero_copy_before, static_cast<uint64_t>(iterations));
  }
  EXPECT_EQ(c.mem_free(sym), QUORUM_OK);
}

// A random mix (the same on every rank, from a shared seed) of blocking and
// non-blocking allreduces, up to three in flight, from 4 B to 1.2 MB, in place
// and out of place, on mem_alloc and on ordinary buffers: every path of the
// shm allreduce (inline payload, replicated, sliced, zero-copy, copying)
// interleaved on the same slots, finished in any order.
inline void RandomMixOfAllreduces(Communicator &c) {
  const int p = c.size(), r = c.rank();
  constexpr size_t kMax = 300000, kBuffers = 4;
  void *sym = nullptr;
  ASSERT_EQ(c.mem_alloc(kBuffers * kMax * sizeof(int32_t), &sym), QUORUM_OK) << last_error();
  std::vector<std::vector<int32_t>> plain(kBuffers, std::vector<int32_t>(kMax));
  std::vector<std::vector<int32_t>> out(kBuffers, std::vector<int32_t>(kMax));
  struct Op {
    int32_t *result;
    size_t n;
    int id;
    RequestPtr req;
  };
  std::vector<Op> in_flight;
  std::vector<bool> busy(kBuffers, false);
  auto check = [&](const Op &op) {
    for (size_t i = 0; i < op.n; ++i) {
      ASSERT_EQ(op.result[i], p * (p - 1) / 2 + p * (op.id + static_cast<int32_t>(i % 97)))
          << "rank " << r << " op " << op.id << " (" << op.n << " elements) element " << i;
    }
  };
  auto finish = [&](size_t k) {
    Op op = in_flight[k];
    in_flight.erase(in_flight.begin() + static_cast<long>(k));
    ASSERT_EQ(c.wait(op.req), QUORUM_OK) << "rank " << r << " op " << op.id << ": " << last_error();
    check(op);
  };
  std::mt19937 rng(2024);  // the same sequence on every rank
  const int ops = stress_rounds(600, 150);
  for (int id = 0; id < ops; ++id) {
    if (in_flight.size() == 3 || (!in_flight.empty() && rng() % 3 == 0)) {
      const size_t k = rng() % in_flight.size();
      const size_t slot = static_cast<size_t>(in_flight[k].id) % kBuffers;
      finish(k);
      if (::testing::Test::HasFatalFailure()) return;
      busy[slot] = false;
    }
    size_t slot = static_cast<size_t>(id) % kBuffers;
    if (busy[slot]) {  // its earlier op is still in flight: finish that one first
      for (size_t k = 0; k < in_flight.size(); ++k) {
        if (static_cast<size_t>(in_flight[k].id) % kBuffers == slot) {
          finish(k);
          break;
        }
      }
      if (::testing::Test::HasFatalFailure()) return;
      busy[slot] = false;
    }
    const size_t n = std::min<size_t>(kMax, size_t{1} << (rng() % 19)) + rng() % 7;
    const bool symmetric = rng() % 2 == 0, in_place = rng() % 3 != 0, blocking = rng() % 2 == 0;
    int32_t *send = symmetric ? static_cast<int32_t *>(sym) + slot * kMax : plain[slot].data();
    int32_t *recv = in_place ? send : out[slot].data();
    for (size_t i = 0; i < n; ++i) send[i] = r + id + static_cast<int32_t>(i % 97);
    const void *src = in_place ? QUORUM_IN_PLACE : send;
    if (blocking) {
      ASSERT_EQ(c.allreduce(src, recv, n, QUORUM_INT32, QUORUM_SUM), QUORUM_OK)
          << "rank " << r << " op " << id << ": " << last_error();
      check(Op{recv, n, id, nullptr});
      if (::testing::Test::HasFatalFailure()) return;
      continue;
    }
    Op op{recv, n, id, nullptr};
    ASSERT_EQ(c.iallreduce(src, recv, n, QUORUM_INT32, QUORUM_SUM, &op.req), QUORUM_OK);
    in_flight.push_back(op);
    busy[slot] = true;
  }
  while (!in_flight.empty()) {
    finish(0);
    if (::testing::Test::HasFatalFailure()) return;
  }
  EXPECT_EQ(c.mem_free(sym), QUORUM_OK);
}

inline void BcastFromEveryRoot(Communicator &c) {
  const int p = c.size();
  for (int root = 0; root < p; ++root) {
    for (size_t bytes : {size_t(0), size_t(1), size_t(1000), size_t(3 << 20)}) {
      std::vector<uint8_t> buf(bytes + 1, 0);
      if (c.rank() == root) {
        for (size_t i = 0; i < bytes; ++i) buf[i] = static_cast<uint8_t>(i * 13 + root);
      }
      ASSERT_EQ(c.bcast(buf.data(), bytes, root), QUORUM_OK) << last_error();
      for (size_t i = 0; i < bytes; ++i) {
        ASSERT_EQ(buf[i], static_cast<uint8_t>(i * 13 + root))
            << "rank " << c.rank() << " root " << root << " byte " << i;
      }
    }
  }
}

inline void AllgatherInAndOutOfPlace(Communicator &c) {
  const int p = c.size();
  for (size_t n : {size_t(0), size_t(1), size_t(100), size_t(70000)}) {
    for (int in_place = 0; in_place < 2; ++in_place) {
      std::vector<uint8_t> mine(n + 1), all(n * p + 1, 0xee);
      for (size_t i = 0; i < n; ++i) mine[i] = static_cast<uint8_t>(c.rank() * 31 + i);
      if (in_place) std::copy(mine.begin(), mine.begin() + n, all.begin() + n * c.rank());
      ASSERT_EQ(c.allgather(in_place ? QUORUM_IN_PLACE : mine.data(), all.data(), n), QUORUM_OK)
          << last_error();
      for (int q = 0; q < p; ++q) {
        for (size_t i = 0; i < n; ++i) {
          ASSERT_EQ(all[q * n + i], static_cast<uint8_t>(q * 31 + i))
              << "rank " << c.rank() << " block " << q << " byte " << i;
        }
      }
    }
  }
}

inline void ReduceScatterEveryDtype(Communicator &c) {
  const int p = c.size();
  const int r = c.rank();
  for (quorum_dtype_t d : kDtypes) {
    const size_t es = dtype_size(d);
    for (quorum_op_t op : {QUORUM_SUM, QUORUM_MAX, QUORUM_AVG}) {
      for (size_t n : {size_t(0), size_t(1), size_t(3000)}) {
        for (int in_place = 0; in_place < 2; ++in_place) {
          std::vector<uint8_t> send(n * p * es + 1), recv(n * p * es + 1);
          for (size_t i = 0; i < n * p; ++i) store(send.data(), i, d, contribution(r, i, op));
          if (in_place) recv = send;
          ASSERT_EQ(
              c.reduce_scatter(in_place ? QUORUM_IN_PLACE : send.data(), recv.data(), n, d, op),
              QUORUM_OK)
              << last_error();
          for (size_t i = 0; i < n; ++i) {
            double want = reference(p, r * n + i, op, d);
            double got = load(recv.data(), i, d);
            ASSERT_LE(std::fabs(got - want), tolerance(d, op, want))
                << "rank " << r << " " << dtype_name(d) << " " << op_name(op) << " n=" << n
                << " in_place=" << in_place << " element " << i;
          }
        }
      }
    }
  }
}

// Every message size around one shared-memory segment of UCX (8256 B with
// its headers): UCX 1.13 sent those just above it as several eager fragments,
// which over posix/sysv could stay undelivered (a ring reduce-scatter of 2063
// float32 per rank, 8252 B messages, hung every time).
inline void MessagesAroundTheSegmentSize(Communicator &c) {
  const int p = c.size();
  const int r = c.rank();
  for (size_t bytes = 8240; bytes <= 8264; ++bytes) {
    std::vector<uint8_t> mine(bytes), all(bytes * p);
    for (size_t i = 0; i < bytes; ++i) mine[i] = static_cast<uint8_t>(r * 31 + i + bytes);
    ASSERT_EQ(c.allgather(mine.data(), all.data(), bytes), QUORUM_OK)
        << "allgather of " << bytes << " B per rank: " << last_error();
    for (int q = 0; q < p; ++q) {
      for (size_t i = 0; i < bytes; ++i) {
        ASSERT_EQ(all[q * bytes + i], static_cast<uint8_t>(q * 31 + i + bytes))
            << "allgather of " << bytes << " B, block of rank " << q << ", byte " << i;
      }
    }
  }
  const size_t n = 2063;  // float32 per rank: 8252 B on the wire per step
  std::vector<uint8_t> send(n * p * 4), recv(n * 4);
  for (size_t i = 0; i < n * p; ++i)
    store(send.data(), i, QUORUM_FLOAT32, contribution(r, i, QUORUM_SUM));
  ASSERT_EQ(c.reduce_scatter(send.data(), recv.data(), n, QUORUM_FLOAT32, QUORUM_SUM), QUORUM_OK)
      << last_error();
  for (size_t i = 0; i < n; ++i) {
    const double want = reference(p, r * n + i, QUORUM_SUM, QUORUM_FLOAT32);
    ASSERT_LE(std::fabs(load(recv.data(), i, QUORUM_FLOAT32) - want),
              tolerance(QUORUM_FLOAT32, QUORUM_SUM, want))
        << "reduce_scatter of 2063 float32, element " << i;
  }
}

inline void BarrierAndMixedSequence(Communicator &c) {
  const int p = c.size();
  for (int k = 0; k < 20; ++k) {
    ASSERT_EQ(c.barrier(), QUORUM_OK) << last_error();
    int64_t v = c.rank() + k;
    ASSERT_EQ(c.allreduce(QUORUM_IN_PLACE, &v, 1, QUORUM_INT64, QUORUM_MAX), QUORUM_OK);
    ASSERT_EQ(v, p - 1 + k);
  }
}

}  // namespace quorum::test
