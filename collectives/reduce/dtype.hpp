// dtype.hpp: element types and reduction operators of the C API, by name and size.
//
// The enums are the public quorum_dtype_t / quorum_op_t; these helpers validate
// values that come from users (a C enum may hold anything) and name them in
// error messages and benchmark output.
#pragma once

#include <cstddef>

#include "quorum/quorum.h"

namespace quorum {

// Bytes per element, or 0 for a value that is not a known dtype.
size_t dtype_size(quorum_dtype_t dtype);
// "float32", "float64", "float16", "bfloat16", "int32", "int64"; "unknown" otherwise.
const char *dtype_name(quorum_dtype_t dtype);
// "sum", "prod", "min", "max", "avg"; "unknown" otherwise.
const char *op_name(quorum_op_t op);

bool valid_dtype(quorum_dtype_t dtype);
bool valid_op(quorum_op_t op);

}  // namespace quorum
