// reduce_kernels.hpp: element-wise reductions on host memory, for every public
// dtype (float32, float64, float16, bfloat16, int32, int64) and op (sum, prod,
// min, max, avg).
//
// These are the local "reduce" tasks of every allreduce / reduce-scatter
// schedule, so they are written to run at memory bandwidth: simple loops the
// compiler vectorises (the file is built at -O3 with AVX-512/AVX2/baseline
// clones picked at load time).
//
// Semantics:
// - Every op is commutative bit for bit (a op b == b op a, NaN payloads
//   aside), so two ranks that combine the same two partial results in either
//   order get identical bits (recursive doubling relies on it). Floating SUM
//   and PROD are not associative: the result depends on the order in which a
//   pattern combines the contributions.
// - AVG reduces as SUM; the algorithm calls scale_average() once at the end.
//   Integer averages divide with C++ truncation toward zero (-7 / 2 == -3).
// - Integer SUM and PROD wrap around modulo 2^bits (two's complement), never UB.
// - float16 / bfloat16 are computed in float32 and rounded to nearest-even,
//   which gives the correctly rounded 16-bit result (see half.hpp).
// - MIN / MAX on floating types propagate NaN: if either input is NaN the
//   result is NaN (for float32/float64 one of the input NaNs; for 16-bit
//   types a quiet NaN), as IEEE 754-2019 minimum/maximum, unlike std::min or
//   fmin. -0 counts as smaller than +0, so both ops are commutative bit for
//   bit. NaN payloads are unspecified for every op (SUM/PROD of NaN give NaN).
// - Pointers need no particular alignment (byte-misaligned buffers are
//   handled through a bounce buffer, slower); count == 0 is a no-op and then
//   the pointers may be null.
#pragma once

#include <cstddef>

#include "collectives/reduce/dtype.hpp"
#include "runtime/knobs.hpp"
#include "runtime/status.hpp"

namespace quorum {

// QUORUM_REDUCE_F16C (default true): float16 via F16C instructions where the
// CPU has them; false selects the portable code (same results, slower).
extern Knob<bool> knob_reduce_f16c;

// inout[i] = inout[i] op in[i] for i < count. in may equal inout; partial
// overlap is refused (QUORUM_ERR_INVALID_ARG).
Status reduce_into(void *inout, const void *in, size_t count, quorum_dtype_t dtype, quorum_op_t op);

// out[i] = a[i] op b[i]: a copy fused with the reduction. out may be exactly a
// or b (then it is reduce_into); any other overlap with out is refused.
Status reduce_out(void *out, const void *a, const void *b, size_t count, quorum_dtype_t dtype,
                  quorum_op_t op);

// buf[i] /= nranks, the final step of AVG (nranks >= 1). Floating types divide
// (correctly rounded); integers truncate toward zero.
Status scale_average(void *buf, size_t count, quorum_dtype_t dtype, int nranks);

// buf[i] = the identity of op (x op identity == x bit for bit): 0 for integer
// sum and avg, -0 for floating ones, 1 for prod, +inf / the largest integer
// for min, -inf / the smallest for max.
// dtype must be a valid one (unchecked).
void fill_identity(void *buf, size_t count, quorum_dtype_t dtype, quorum_op_t op);

}  // namespace quorum
