// values.hpp: typed test data for every dtype (small integers, exact in every
// type, so results can be compared exactly) and a reference reduction.
#pragma once

#include <cmath>
#include <cstdint>
#include <cstring>
#include <vector>

#include "collectives/reduce/element_access.hpp"
#include "quorum/quorum.h"

namespace quorum::test {

inline size_t test_dtype_size(quorum_dtype_t d) {
  return quorum_dtype_size(d);
}

inline void store(void *buf, size_t i, quorum_dtype_t d, double v) {
  store_element(buf, i, d, v);
}
inline double load(const void *buf, size_t i, quorum_dtype_t d) {
  return load_element(buf, i, d);
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
