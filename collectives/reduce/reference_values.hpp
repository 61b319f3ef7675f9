// reference_values.hpp: integer-valued contributions and their exact
// reduction, shared by the tests and quorum-bench's result check. Values are
// small integers, exact in every dtype (float16 and bfloat16 included): sums
// stay exact in bfloat16 (8 bits) up to 36 ranks and products are powers of
// two, so a collective's result either matches bit for bit or is wrong.
#pragma once

#include <cmath>
#include <cstddef>

#include "quorum/quorum.h"

namespace quorum {

// What rank r contributes at element i.
inline double reference_contribution(int rank, size_t i, quorum_op_t op) {
  if (op == QUORUM_PROD) return ((i + static_cast<size_t>(rank)) % 3 == 0) ? 2.0 : 1.0;
  return static_cast<double>((static_cast<size_t>(rank) * 7 + i * 3) % 11) - 3.0;
}

inline bool is_integer_dtype(quorum_dtype_t d) {
  return d == QUORUM_INT32 || d == QUORUM_INT64;
}

// The reduction over ranks 0..nranks-1 of their contributions at element i.
inline double reference_reduction(int nranks, size_t i, quorum_op_t op, quorum_dtype_t d) {
  double acc = reference_contribution(0, i, op);
  for (int r = 1; r < nranks; ++r) {
    double v = reference_contribution(r, i, op);
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

}  // namespace quorum
