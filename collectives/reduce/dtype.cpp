// dtype.cpp: sizes and names of the public element types and operators.
#include "collectives/reduce/dtype.hpp"

namespace quorum {

size_t dtype_size(quorum_dtype_t dtype) {
  switch (dtype) {
    case QUORUM_FLOAT32:
      return 4;
    case QUORUM_FLOAT64:
      return 8;
    case QUORUM_FLOAT16:
      return 2;
    case QUORUM_BFLOAT16:
      return 2;
    case QUORUM_INT32:
      return 4;
    case QUORUM_INT64:
      return 8;
  }
  return 0;
}

const char *dtype_name(quorum_dtype_t dtype) {
  switch (dtype) {
    case QUORUM_FLOAT32:
      return "float32";
    case QUORUM_FLOAT64:
      return "float64";
    case QUORUM_FLOAT16:
      return "float16";
    case QUORUM_BFLOAT16:
      return "bfloat16";
    case QUORUM_INT32:
      return "int32";
    case QUORUM_INT64:
      return "int64";
  }
  return "unknown";
}

const char *op_name(quorum_op_t op) {
  switch (op) {
    case QUORUM_SUM:
      return "sum";
    case QUORUM_PROD:
      return "prod";
    case QUORUM_MIN:
      return "min";
    case QUORUM_MAX:
      return "max";
    case QUORUM_AVG:
      return "avg";
  }
  return "unknown";
}

bool valid_dtype(quorum_dtype_t dtype) {
  return dtype_size(dtype) != 0;
}

bool valid_op(quorum_op_t op) {
  switch (op) {
    case QUORUM_SUM:
    case QUORUM_PROD:
    case QUORUM_MIN:
    case QUORUM_MAX:
    case QUORUM_AVG:
      return true;
  }
  return false;
}

}  // namespace quorum
