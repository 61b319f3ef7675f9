// quorum_bench_values.hpp: the integer-valued data quorum-bench feeds to the
// collectives, and the exact results it expects back. Values are small
// integers, exact in every dtype (float16 and bfloat16 included), so a result
// either matches bit for bit or counts as wrong. Uses only the public C API.
#pragma once

#include <cmath>
#include <cstddef>
#include <cstdint>
#include <cstring>

#include "collectives/reduce/element_access.hpp"
#include "collectives/reduce/reference_values.hpp"
#include "quorum/quorum.h"

namespace quorum_bench {

inline void store_value(void *buf, size_t i, quorum_dtype_t d, double v) {
  quorum::store_element(buf, i, d, v);
}
inline double load_value(const void *buf, size_t i, quorum_dtype_t d) {
  return quorum::load_element(buf, i, d);
}

inline double contribution(int rank, size_t i, quorum_op_t op) {
  return quorum::reference_contribution(rank, i, op);
}

// The value a neutral element that keeps the timed loop's data stable
// (in-place reductions repeated many times must not overflow into inf/NaN).
inline double neutral_value(quorum_op_t op) {
  return op == QUORUM_PROD ? 1.0 : 0.0;
}

using quorum::is_integer_dtype;

// The reduction of every rank's contribution at element i, as the dtype holds it.
inline double expected_reduction(int nranks, size_t i, quorum_op_t op, quorum_dtype_t d) {
  return quorum::reference_reduction(nranks, i, op, d);
}

// Whether got equals want as stored in dtype d. Averages of floats may differ
// by rounding (sum then divide, or multiply by 1/P), so they get a few ulps.
inline bool value_matches(double got, double want, quorum_dtype_t d, quorum_op_t op) {
  unsigned char tmp[8];
  store_value(tmp, 0, d, want);
  double want_stored = load_value(tmp, 0, d);
  if (op != QUORUM_AVG || is_integer_dtype(d)) return got == want_stored;
  double eps = 0;
  switch (d) {
    case QUORUM_FLOAT32:
      eps = 1.0 / (1 << 23);
      break;
    case QUORUM_FLOAT64:
      eps = 1.0 / (1ll << 52);
      break;
    case QUORUM_FLOAT16:
      eps = 1.0 / (1 << 10);
      break;
    case QUORUM_BFLOAT16:
      eps = 1.0 / (1 << 7);
      break;
    default:
      break;
  }
  return std::fabs(got - want) <= 4 * eps * std::fmax(1.0, std::fabs(want));
}

// Byte pattern for the byte-moving collectives (allgather, bcast).
inline uint8_t pattern_byte(int rank, size_t j) {
  return static_cast<uint8_t>((static_cast<size_t>(rank) * 131 + j * 7 + 1) & 0xff);
}

}  // namespace quorum_bench
