// reduce_identity.cpp: the identity element of every op, written into a buffer
// (what a rank with nothing to contribute adds to a reduction).
#include <cstdint>
#include <cstring>
#include <limits>

#include "collectives/reduce/reduce_kernels.hpp"

namespace quorum {

namespace {
template <typename T>
void fill(void *buf, size_t count, T v) {
  T *p = static_cast<T *>(buf);
  for (size_t i = 0; i < count; ++i) p[i] = v;
}
}  // namespace

void fill_identity(void *buf, size_t count, quorum_dtype_t dtype, quorum_op_t op) {
  const bool sum = op == QUORUM_SUM || op == QUORUM_AVG;
  if (sum && (dtype == QUORUM_INT32 || dtype == QUORUM_INT64)) {
    std::memset(buf, 0, count * dtype_size(dtype));
    return;
  }
  // Floating sums start from -0: -0 + x == x for every x, -0 included (+0 + -0 is +0).
  const bool prod = op == QUORUM_PROD, min = op == QUORUM_MIN;
  switch (dtype) {
    case QUORUM_FLOAT32: {
      const float inf = std::numeric_limits<float>::infinity();
      fill<float>(buf, count, sum ? -0.0f : prod ? 1.0f : min ? inf : -inf);
      break;
    }
    case QUORUM_FLOAT64: {
      const double inf = std::numeric_limits<double>::infinity();
      fill<double>(buf, count, sum ? -0.0 : prod ? 1.0 : min ? inf : -inf);
      break;
    }
    case QUORUM_FLOAT16:
      fill<uint16_t>(buf, count, sum ? 0x8000 : prod ? 0x3C00 : min ? 0x7C00 : 0xFC00);
      break;
    case QUORUM_BFLOAT16:
      fill<uint16_t>(buf, count, sum ? 0x8000 : prod ? 0x3F80 : min ? 0x7F80 : 0xFF80);
      break;
    case QUORUM_INT32:
      fill<int32_t>(buf, count,
                    prod  ? 1
                    : min ? std::numeric_limits<int32_t>::max()
                          : std::numeric_limits<int32_t>::min());
      break;
    case QUORUM_INT64:
      fill<int64_t>(buf, count,
                    prod  ? 1
                    : min ? std::numeric_limits<int64_t>::max()
                          : std::numeric_limits<int64_t>::min());
      break;
  }
}

}  // namespace quorum
