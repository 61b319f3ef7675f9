// streaming.hpp: writes that bypass the caches (non-temporal stores), for
// large outputs that are not read again soon: a copy, and a reduction whose
// results are written that way.
//
// A normal store first reads the line it writes (read for ownership); a
// streaming store does not, which saves a third of a copy's memory traffic
// once the buffers exceed the last-level cache, and keeps them from evicting
// what is still in use. When the buffers fit in the cache it is slower (the
// output must come back from memory when read). Both functions end with a
// store fence, so a release store that follows publishes what they wrote.
// On targets without SSE2 they are memcpy and reduce_out.
#pragma once

#include <cstddef>

#include "collectives/reduce/dtype.hpp"
#include "runtime/status.hpp"

namespace quorum {

// memcpy(dst, src, bytes) with streaming stores; no overlap allowed.
void copy_streaming(void *dst, const void *src, size_t bytes);

// reduce_out (same kernels: the same bits) written with streaming stores, in
// blocks computed in a small buffer that stays in L1. For QUORUM_AVG with
// average_over > 0, each block is also divided by average_over (as
// scale_average) before it is written. out equal to a or b falls back to
// reduce_out (in place, no streaming).
Status reduce_out_streaming(void *out, const void *a, const void *b, size_t count,
                            quorum_dtype_t dtype, quorum_op_t op, int average_over = 0);

}  // namespace quorum
