// reduce_kernels.hpp: elementwise reductions for every dtype and op.
#pragma once

#include <cstddef>

#include "quorum/quorum.h"
#include "runtime/status.hpp"

namespace quorum {

size_t dtype_size(quorum_dtype_t dtype);
const char *dtype_name(quorum_dtype_t dtype);
const char *op_name(quorum_op_t op);
bool valid_dtype(quorum_dtype_t dtype);
bool valid_op(quorum_op_t op);

// inout[i] = inout[i] op in[i]   (AVG reduces as SUM; see scale_average)
Status reduce_into(void *inout, const void *in, size_t count, quorum_dtype_t dtype, quorum_op_t op);
// out[i] = a[i] op b[i]; out may alias a or b.
Status reduce_out(void *out, const void *a, const void *b, size_t count, quorum_dtype_t dtype,
                  quorum_op_t op);
// buf[i] /= nranks (finishes AVG).
Status scale_average(void *buf, size_t count, quorum_dtype_t dtype, int nranks);

}  // namespace quorum
