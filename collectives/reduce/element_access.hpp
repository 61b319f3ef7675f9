// element_access.hpp: reads and writes element i of a buffer of any quorum
// dtype as a double (16-bit types rounded to nearest-even). For checks and
// benchmarks, not for hot loops.
#pragma once

#include <cstddef>
#include <cstdint>

#include "collectives/reduce/half.hpp"
#include "quorum/quorum.h"

namespace quorum {

inline void store_element(void *buf, size_t i, quorum_dtype_t d, double v) {
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

inline double load_element(const void *buf, size_t i, quorum_dtype_t d) {
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

}  // namespace quorum
