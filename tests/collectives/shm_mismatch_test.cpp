// shm_mismatch_test.cpp: run by quorum-run with the signature check off and
// the shm allreduce chosen. The last rank calls allreduce with other
// arguments than the rest (twice the count, or another dtype of the same
// size); every rank must fail with QUORUM_ERR_MISMATCH naming a rank that
// differs from it, and nothing past any rank's buffers may change (the direct
// paths write into the peers' receive buffers: with the wrong size they would
// write past them). A later allreduce must fail at once, as a mismatch,
// instead of hanging.
// Exits 0 when every check held, 1 otherwise.
//
//   shm_mismatch_test large|small|dtype|barrier [--shared]
//
// large: 1 Mi vs 2 Mi floats (cross-memory or copy path, by QUORUM_SHM_*
// knobs); small: 4 vs 8 floats (messages that ride in the flag line); dtype:
// 2 Mi float32 vs 1 Mi float64; barrier: the last rank calls quorum_barrier
// (one flag round trip through the segment, like a one-float allreduce) while
// the others allreduce one float. --shared: buffers from quorum_mem_alloc (the
// zero-copy path).
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <string>
#include <vector>

#include "quorum/quorum.h"

namespace {

constexpr uint8_t kCanary = 0xa5;

int failures = 0;

void check(bool ok, int rank, const std::string &what) {
  if (ok) return;
  std::fprintf(stderr, "rank %d: FAILED: %s\n", rank, what.c_str());
  ++failures;
}

size_t count_changed(const uint8_t *p, size_t bytes) {
  size_t n = 0;
  for (size_t i = 0; i < bytes; ++i) n += p[i] != kCanary;
  return n;
}

}  // namespace

int main(int argc, char **argv) {
  if (argc < 2) {
    std::fprintf(stderr, "usage: %s large|small|dtype|barrier [--shared]\n", argv[0]);
    return 2;
  }
  const std::string scenario = argv[1];
  const bool shared = argc > 2 && std::strcmp(argv[2], "--shared") == 0;
  quorum_comm_t comm;
  if (quorum_init(&comm) != QUORUM_OK) {
    std::fprintf(stderr, "init: %s\n", quorum_last_error());
    return 1;
  }
  const int rank = quorum_comm_rank(comm), size = quorum_comm_size(comm);
  const bool odd = rank == size - 1;
  size_t count = 0;
  quorum_dtype_t dtype = QUORUM_FLOAT32;
  if (scenario == "large") {
    count = odd ? 2u << 20 : 1u << 20;
  } else if (scenario == "small") {
    count = odd ? 8 : 4;
  } else if (scenario == "barrier") {
    count = 1;
  } else if (scenario == "dtype") {
    count = odd ? 1u << 20 : 2u << 20;
    dtype = odd ? QUORUM_FLOAT64 : QUORUM_FLOAT32;
  } else {
    std::fprintf(stderr, "unknown scenario %s\n", scenario.c_str());
    return 2;
  }
  const size_t elem = dtype == QUORUM_FLOAT64 ? 8 : 4;
  const size_t bytes = count * elem;
  // send | recv, each followed by the largest message's size of canary bytes
  // (every rank allocates the same: quorum_mem_alloc is collective).
  const size_t span = 2 * (2u << 20) * 4 + 64;
  std::vector<uint8_t> plain;
  uint8_t *base = nullptr;
  if (shared) {
    void *p = nullptr;
    if (quorum_mem_alloc(comm, 2 * span, &p) != QUORUM_OK) {
      std::fprintf(stderr, "mem_alloc: %s\n", quorum_last_error());
      return 1;
    }
    base = static_cast<uint8_t *>(p);
  } else {
    plain.resize(2 * span);
    base = plain.data();
  }
  uint8_t *send = base, *recv = base + span;
  std::memset(base, kCanary, 2 * span);
  std::vector<float> ones32(count, 1.0f);
  std::vector<double> ones64(count, 1.0);
  if (dtype == QUORUM_FLOAT64) {
    std::memcpy(send, ones64.data(), bytes);
  } else {
    std::memcpy(send, ones32.data(), bytes);
  }
  std::vector<uint8_t> sent(send, send + bytes);

  const quorum_status_t s = scenario == "barrier" && odd
                                ? quorum_barrier(comm)
                                : quorum_allreduce(comm, send, recv, count, dtype, QUORUM_SUM);
  const std::string error = s == QUORUM_OK ? "" : quorum_last_error();
  const int differing = odd ? 0 : size - 1;
  check(s == QUORUM_ERR_MISMATCH, rank,
        "allreduce returned " + std::string(quorum_strerror(s)) + ": " + error);
  check(error.find("mismatch") != std::string::npos &&
            error.find("rank " + std::to_string(differing) + " called") != std::string::npos,
        rank, "the error names rank " + std::to_string(differing) + ": " + error);
  check(std::memcmp(send, sent.data(), bytes) == 0, rank, "the send buffer changed");
  const size_t after_send = count_changed(send + bytes, span - bytes);
  const size_t after_recv = count_changed(recv + bytes, span - bytes);
  check(after_send == 0, rank, std::to_string(after_send) + " bytes past the send buffer changed");
  check(after_recv == 0, rank,
        std::to_string(after_recv) + " bytes past the receive buffer changed");

  // The ranks no longer agree on the shared-memory protocol's state: the next
  // shm allreduce fails at once (no timeout), on every rank, and says why.
  float one = 1.0f;
  const quorum_status_t later =
      quorum_allreduce(comm, QUORUM_IN_PLACE, &one, 1, QUORUM_FLOAT32, QUORUM_SUM);
  const std::string later_error = later == QUORUM_OK ? "" : quorum_last_error();
  check(later == QUORUM_ERR_MISMATCH &&
            later_error.find("no shared-memory allreduce of this communicator can go on") !=
                std::string::npos,
        rank,
        "the allreduce after the mismatch returned " + std::string(quorum_strerror(later)) + ": " +
            later_error);

  if (shared) quorum_mem_free(comm, base);
  quorum_finalize(comm);
  if (failures == 0) std::printf("rank %d: mismatch reported: %s\n", rank, error.c_str());
  return failures == 0 ? 0 : 1;
}
