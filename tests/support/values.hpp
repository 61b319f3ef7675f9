// values.hpp: typed test data for every dtype (small integers, exact in every
// type, so results can be compared exactly) and a reference reduction.
#pragma once

#include <cmath>
#include <cstdint>
#include <cstring>
#include <vector>

#include "quorum/quorum.h"

namespace quorum::test {

inline uint16_t float_to_half_exact(float f) {
  // Exact for small integers (|f| < 2048) and zero.
  if (f == 0) return 0;
  uint32_t sign = f < 0 ? 0x8000u : 0;
  float a = std::fabs(f);
  int e = static_cast<int>(std::floor(std::log2(a)));
  uint32_t mant = static_cast<uint32_t>((a / std::ldexp(1.0f, e) - 1.0f) * 1024.0f + 0.5f);
  return static_cast<uint16_t>(sign | (static_cast<uint32_t>(e + 15) << 10) | mant);
}

inline float half_to_float(uint16_t h) {
  uint32_t sign = h & 0x8000u, e = (h >> 10) & 0x1f, m = h & 0x3ff;
  float v;
  if (e == 0) {
    v = std::ldexp(static_cast<float>(m), -24);
  } else if (e == 31) {
    v = m ? NAN : INFINITY;
  } else {
    v = std::ldexp(1.0f + m / 1024.0f, static_cast<int>(e) - 15);
  }
  return sign ? -v : v;
}

inline uint16_t float_to_bf16_exact(float f) {
  uint32_t u;
  std::memcpy(&u, &f, 4);
  return static_cast<uint16_t>(u >> 16);
}

inline float bf16_to_float(uint16_t b) {
  uint32_t u = static_cast<uint32_t>(b) << 16;
  float f;
  std::memcpy(&f, &u, 4);
  return f;
}

inline size_t test_dtype_size(quorum_dtype_t d) {
  return quorum_dtype_size(d);
}

// Stores v (a small integer) as element i of a buffer of dtype d.
inline void store(void *buf, size_t i, quorum_dtype_t d, double v) {
  switch (d) {
    case QUORUM_FLOAT32:
      static_cast<float *>(buf)[i] = static_cast<float>(v);
      break;
    case QUORUM_FLOAT64:
      static_cast<double *>(buf)[i] = v;
      break;
    case QUORUM_FLOAT16:
      static_cast<uint16_t *>(buf)[i] = float_to_half_exact(static_cast<float>(v));
      break;
    case QUORUM_BFLOAT16:
      static_cast<uint16_t *>(buf)[i] = float_to_bf16_exact(static_cast<float>(v));
      break;
    case QUORUM_INT32:
      static_cast<int32_t *>(buf)[i] = static_cast<int32_t>(v);
      break;
    case QUORUM_INT64:
      static_cast<int64_t *>(buf)[i] = static_cast<int64_t>(v);
      break;
  }
}

inline double load(const void *buf, size_t i, quorum_dtype_t d) {
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

// The value rank r contributes at element i: small integers whose sums and
// products over up to 8 ranks stay exact in every dtype (bf16 has 8 bits).
inline double contribution(int r, size_t i, quorum_op_t op) {
  if (op == QUORUM_PROD) return ((i + r) % 3 == 0) ? 2.0 : 1.0;
  return static_cast<double>((r * 7 + i * 3) % 11) - 3.0;
}

inline double reference(int p, size_t i, quorum_op_t op, quorum_dtype_t d) {
  double acc = contribution(0, i, op);
  for (int r = 1; r < p; ++r) {
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
  if (op == QUORUM_AVG) {
    if (d == QUORUM_INT32 || d == QUORUM_INT64) {
      acc = std::trunc(acc / p);
    } else {
      acc = acc / p;
    }
  }
  return acc;
}

}  // namespace quorum::test
