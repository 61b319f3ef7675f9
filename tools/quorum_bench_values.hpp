// quorum_bench_values.hpp: the integer-valued data quorum-bench feeds to the
// collectives, and the exact results it expects back. Values are small
// integers, exact in every dtype (float16 and bfloat16 included), so a result
// either matches bit for bit or counts as wrong. Uses only the public C API.
#pragma once

#include <cmath>
#include <cstddef>
#include <cstdint>
#include <cstring>

#include "quorum/quorum.h"

namespace quorum_bench {

inline uint16_t float_to_half(float f) {
  // Round to nearest even, with subnormals and overflow to infinity.
  uint32_t x;
  std::memcpy(&x, &f, 4);
  uint32_t sign = (x >> 16) & 0x8000u;
  uint32_t abs = x & 0x7fffffffu;
  if (abs >= 0x7f800000u)
    return static_cast<uint16_t>(sign | (abs > 0x7f800000u ? 0x7e00u : 0x7c00u));
  if (abs >= 0x477ff000u) return static_cast<uint16_t>(sign | 0x7c00u);  // rounds past 65504
  if (abs < 0x38800000u) {                                               // subnormal half
    float m = std::fabs(f) * 16777216.0f;                                // units of 2^-24
    return static_cast<uint16_t>(sign | static_cast<uint32_t>(std::nearbyint(m)));
  }
  uint32_t mant = abs & 0x7fffffu;
  uint32_t exp = (abs >> 23) - 112;
  uint32_t h = (exp << 10) | (mant >> 13);
  uint32_t rest = mant & 0x1fffu;
  if (rest > 0x1000u || (rest == 0x1000u && (h & 1u))) ++h;
  return static_cast<uint16_t>(sign | h);
}

inline float half_to_float(uint16_t h) {
  uint32_t sign = h & 0x8000u, e = (h >> 10) & 0x1fu, m = h & 0x3ffu;
  float v;
  if (e == 0) {
    v = std::ldexp(static_cast<float>(m), -24);
  } else if (e == 31) {
    v = m ? NAN : INFINITY;
  } else {
    v = std::ldexp(1.0f + static_cast<float>(m) / 1024.0f, static_cast<int>(e) - 15);
  }
  return sign ? -v : v;
}

inline uint16_t float_to_bf16(float f) {
  uint32_t u;
  std::memcpy(&u, &f, 4);
  if ((u & 0x7fffffffu) > 0x7f800000u) return static_cast<uint16_t>((u >> 16) | 0x40u);
  u += 0x7fffu + ((u >> 16) & 1u);  // round to nearest even
  return static_cast<uint16_t>(u >> 16);
}

inline float bf16_to_float(uint16_t b) {
  uint32_t u = static_cast<uint32_t>(b) << 16;
  float f;
  std::memcpy(&f, &u, 4);
  return f;
}

// Stores v as element i of a buffer of dtype d (rounded as the dtype rounds).
inline void store_value(void *buf, size_t i, quorum_dtype_t d, double v) {
  switch (d) {
    case QUORUM_FLOAT32:
      static_cast<float *>(buf)[i] = static_cast<float>(v);
      break;
    case QUORUM_FLOAT64:
      static_cast<double *>(buf)[i] = v;
      break;
    case QUORUM_FLOAT16:
      static_cast<uint16_t *>(buf)[i] = float_to_half(static_cast<float>(v));
      break;
    case QUORUM_BFLOAT16:
      static_cast<uint16_t *>(buf)[i] = float_to_bf16(static_cast<float>(v));
      break;
    case QUORUM_INT32:
      static_cast<int32_t *>(buf)[i] = static_cast<int32_t>(v);
      break;
    case QUORUM_INT64:
      static_cast<int64_t *>(buf)[i] = static_cast<int64_t>(v);
      break;
  }
}

inline double load_value(const void *buf, size_t i, quorum_dtype_t d) {
  switch (d) {
    case QUORUM_FLOAT32:
      return static_cast<const float *>(buf)[i];
    case QUORUM_FLOAT64:
      return static_cast<const double *>(buf)[i];
    case QUORUM_FLOAT16:
      return half_to_float(static_cast<const uint16_t *>(buf)[i]);
    case QUORUM_BFLOAT16:
      return bf16_to_float(static_cast<const uint16_t *>(buf)[i]);
    case QUORUM_INT32:
      return static_cast<const int32_t *>(buf)[i];
    case QUORUM_INT64:
      return static_cast<double>(static_cast<const int64_t *>(buf)[i]);
  }
  return 0;
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
