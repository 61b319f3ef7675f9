// dtype_c_api.cpp: the public C entry points about element types.
#include "collectives/reduce/dtype.hpp"
#include "quorum/quorum.h"

extern "C" size_t quorum_dtype_size(quorum_dtype_t dtype) {
  return quorum::dtype_size(dtype);
}

extern "C" const char *quorum_dtype_name(quorum_dtype_t dtype) {
  return quorum::dtype_name(dtype);
}
