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
#include "quorum/quorum.h"

namespace quorum_bench {

inline void store_value(void *buf, size_t i, quorum_dtype_t d, double v) {
  quorum::store_element(buf, i, d, v);
}
inline double load_value(const void *buf, size_t i, quorum_dtype_t d) {
  return quorum::load_element(buf, i, d);
}

// What rank r contributes at element i. Sums stay exact in bfloat16 (8 bits)
// up to 36 ranks; products are powers of two.
inline double contribution(int rank, size_t i, quorum_op_t op) {
  if (op == QUORUM_PROD) return ((i + static_cast<size_t>(rank)) % 3 == 0) ? 2.0 : 1.0;
  return static_cast<double>((static_cast<size_t>(rank) * 7 + i * 3) % 11) - 3.0;
}

// The value a neutral element that keeps the timed loop's data stable
// (in-place reductions repeated many times must not overflow into inf/NaN).
inline double neutral_value(quorum_op_t op) {
  return op == QUORUM_PROD ? 1.0 : 0.0;
}

inline bool is_integer_dtype(quorum_dtype_t d) {
  return d == QUORUM_INT32 || d == QUORUM_INT64;
}

// The reduction of every rank's contribution at element i, as the dtype holds it.
inline double expected_reduction(int nranks, size_t i, quorum_op_t op, quorum_dtype_t d) {
  double acc = contribution(0, i, op);
  for (int r = 1; r < nranks; ++r) {
    double v = contribution(r, i, op);
    switch (op) {
      case QUORUM_SUM:
      case QUORUM_AVG:
        acc += v;
        break;
      case QUORUM_PROD:
        acc *= v;
        break;
      case QUORUM_MIN:
        acc = v < acc ? v : acc;
        break;
      case QUORUM_MAX:
        acc = v > acc ? v : acc;
        break;
    }
  }
  if (op == QUORUM_AVG) acc = is_integer_dtype(d) ? std::trunc(acc / nranks) : acc / nranks;
  return acc;
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
