// values.hpp: typed test data for every dtype (small integers, exact in every
// type, so results can be compared exactly) and a reference reduction.
#pragma once

#include <cstdint>
#include <cstring>
#include <vector>

#include "collectives/reduce/element_access.hpp"
#include "collectives/reduce/reference_values.hpp"
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

inline double contribution(int r, size_t i, quorum_op_t op) {
  return reference_contribution(r, i, op);
}
inline double reference(int p, size_t i, quorum_op_t op, quorum_dtype_t d) {
  return reference_reduction(p, i, op, d);
}

}  // namespace quorum::test
