// reduce_kernels.cpp: placeholder naive kernels (float32/float64/int32/int64).
#include "collectives/reduce/reduce_kernels.hpp"

#include <cstdint>

namespace quorum {

size_t dtype_size(quorum_dtype_t d) {
  switch (d) {
    case QUORUM_FLOAT32: return 4;
    case QUORUM_FLOAT64: return 8;
    case QUORUM_FLOAT16: return 2;
    case QUORUM_BFLOAT16: return 2;
    case QUORUM_INT32: return 4;
    case QUORUM_INT64: return 8;
  }
  return 0;
}
const char *dtype_name(quorum_dtype_t d) {
  switch (d) {
    case QUORUM_FLOAT32: return "float32";
    case QUORUM_FLOAT64: return "float64";
    case QUORUM_FLOAT16: return "float16";
    case QUORUM_BFLOAT16: return "bfloat16";
    case QUORUM_INT32: return "int32";
    case QUORUM_INT64: return "int64";
  }
  return "unknown";
}
const char *op_name(quorum_op_t o) {
  switch (o) {
    case QUORUM_SUM: return "sum";
    case QUORUM_PROD: return "prod";
    case QUORUM_MIN: return "min";
    case QUORUM_MAX: return "max";
    case QUORUM_AVG: return "avg";
  }
  return "unknown";
}
bool valid_dtype(quorum_dtype_t d) { return dtype_size(d) != 0; }
bool valid_op(quorum_op_t o) { return o >= QUORUM_SUM && o <= QUORUM_AVG; }

namespace {
template <typename T>
void apply(T *out, const T *a, const T *b, size_t n, quorum_op_t op) {
  for (size_t i = 0; i < n; ++i) {
    switch (op) {
      case QUORUM_SUM:
      case QUORUM_AVG: out[i] = a[i] + b[i]; break;
      case QUORUM_PROD: out[i] = a[i] * b[i]; break;
      case QUORUM_MIN: out[i] = a[i] < b[i] ? a[i] : b[i]; break;
      case QUORUM_MAX: out[i] = a[i] > b[i] ? a[i] : b[i]; break;
    }
  }
}
}  // namespace

Status reduce_out(void *out, const void *a, const void *b, size_t n, quorum_dtype_t d,
                  quorum_op_t op) {
  switch (d) {
    case QUORUM_FLOAT32: apply((float *)out, (const float *)a, (const float *)b, n, op); break;
    case QUORUM_FLOAT64: apply((double *)out, (const double *)a, (const double *)b, n, op); break;
    case QUORUM_INT32: apply((int32_t *)out, (const int32_t *)a, (const int32_t *)b, n, op); break;
    case QUORUM_INT64: apply((int64_t *)out, (const int64_t *)a, (const int64_t *)b, n, op); break;
    default: return fail(QUORUM_ERR_UNSUPPORTED, "reduce", "dtype not yet supported");
  }
  return kOk;
}
Status reduce_into(void *inout, const void *in, size_t n, quorum_dtype_t d, quorum_op_t op) {
  return reduce_out(inout, inout, in, n, d, op);
}
Status scale_average(void *buf, size_t n, quorum_dtype_t d, int p) {
  switch (d) {
    case QUORUM_FLOAT32: for (size_t i = 0; i < n; ++i) ((float *)buf)[i] /= p; break;
    case QUORUM_FLOAT64: for (size_t i = 0; i < n; ++i) ((double *)buf)[i] /= p; break;
    case QUORUM_INT32: for (size_t i = 0; i < n; ++i) ((int32_t *)buf)[i] /= p; break;
    case QUORUM_INT64: for (size_t i = 0; i < n; ++i) ((int64_t *)buf)[i] /= p; break;
    default: return fail(QUORUM_ERR_UNSUPPORTED, "reduce", "dtype not yet supported");
  }
  return kOk;
}

}  // namespace quorum
