// algorithms.hpp: the build functions of every algorithm (one file each).
#pragma once

#include "collectives/algorithms/algorithm.hpp"

namespace quorum {

Status build_allreduce_recursive_doubling(Builder &b, const CollArgs &a, TaskId *last);
Status build_allreduce_ring(Builder &b, const CollArgs &a, TaskId *last);
Status build_allreduce_shm(Builder &b, const CollArgs &a, TaskId *last);
Status build_allreduce_hierarchical(Builder &b, const CollArgs &a, TaskId *last);
Status build_allreduce_rabenseifner(Builder &b, const CollArgs &a, TaskId *last);
Status build_bcast_binomial(Builder &b, const CollArgs &a, TaskId *last);
Status build_bcast_scatter_allgather(Builder &b, const CollArgs &a, TaskId *last);
Status build_bcast_hierarchical(Builder &b, const CollArgs &a, TaskId *last);
Status build_barrier_dissemination(Builder &b, const CollArgs &a, TaskId *last);
Status build_barrier_hierarchical(Builder &b, const CollArgs &a, TaskId *last);
Status build_allgather_ring(Builder &b, const CollArgs &a, TaskId *last);
Status build_allgather_hierarchical(Builder &b, const CollArgs &a, TaskId *last);
Status build_reduce_scatter_ring(Builder &b, const CollArgs &a, TaskId *last);
Status build_reduce_scatter_hierarchical(Builder &b, const CollArgs &a, TaskId *last);

// A hierarchical algorithm's host layout; INTERNAL if the table chose it on a
// layout that does not fit (patterns/hierarchy.hpp), which it never should.
Status hierarchical_layout(const Builder &b, const HostLayout **out);

}  // namespace quorum
