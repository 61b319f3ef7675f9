// c_api_more.cpp: the C API of alltoall(v), gather, scatter and rooted reduce
// (more_collectives.hpp).
#include "collectives/c_api_handles.hpp"
#include "collectives/more_collectives.hpp"

using quorum::fail;

extern "C" {

quorum_status_t quorum_alltoall(quorum_comm_t comm, const void *send, void *recv,
                                size_t bytes_per_rank) {
  ENTER_COMM(comm);
  return quorum::alltoall(*comm->comm, send, recv, bytes_per_rank);
}

quorum_status_t quorum_alltoallv(quorum_comm_t comm, const void *send, const size_t *send_bytes,
                                 const size_t *send_offsets, void *recv, const size_t *recv_bytes,
                                 const size_t *recv_offsets) {
  ENTER_COMM(comm);
  return quorum::alltoallv(*comm->comm, send, send_bytes, send_offsets, recv, recv_bytes,
                           recv_offsets);
}

quorum_status_t quorum_gather(quorum_comm_t comm, const void *send, void *recv,
                              size_t bytes_per_rank, int root) {
  ENTER_COMM(comm);
  return quorum::gather(*comm->comm, send, recv, bytes_per_rank, root);
}

quorum_status_t quorum_scatter(quorum_comm_t comm, const void *send, void *recv,
                               size_t bytes_per_rank, int root) {
  ENTER_COMM(comm);
  return quorum::scatter(*comm->comm, send, recv, bytes_per_rank, root);
}

quorum_status_t quorum_reduce(quorum_comm_t comm, const void *send, void *recv, size_t count,
                              quorum_dtype_t dtype, quorum_op_t op, int root) {
  ENTER_COMM(comm);
  return quorum::reduce(*comm->comm, send, recv, count, dtype, op, root);
}

}  // extern "C"
