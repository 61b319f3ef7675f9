// c_api_more.cpp: the C API of alltoall(v), gather, scatter and rooted reduce
// (more_collectives.hpp), blocking and not (quorum_ialltoall...: a request
// handle for quorum_wait / quorum_test, as quorum_iallreduce gives).
#include "collectives/c_api_handles.hpp"
#include "collectives/more_collectives.hpp"

using quorum::fail;
using quorum::RequestPtr;
using quorum::Status;

namespace {

// *req = NULL first, so that a call that fails leaves no stale handle.
Status no_request_yet(quorum_request_t *req, const char *call) {
  if (!req) return fail(QUORUM_ERR_INVALID_ARG, "api", "{}: NULL request pointer", call);
  *req = nullptr;
  return QUORUM_OK;
}

Status hand_out(Status started, quorum_comm_t comm, RequestPtr r, quorum_request_t *req) {
  if (started != QUORUM_OK) return started;
  *req = quorum::make_request_handle(comm, std::move(r));
  return QUORUM_OK;
}

}  // namespace

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

quorum_status_t quorum_ialltoall(quorum_comm_t comm, const void *send, void *recv,
                                 size_t bytes_per_rank, quorum_request_t *req) {
  ENTER_COMM(comm);
  QUORUM_CHECK(no_request_yet(req, __func__));
  RequestPtr r;
  Status s = quorum::alltoall(*comm->comm, send, recv, bytes_per_rank, &r);
  return hand_out(s, comm, std::move(r), req);
}

quorum_status_t quorum_ialltoallv(quorum_comm_t comm, const void *send, const size_t *send_bytes,
                                  const size_t *send_offsets, void *recv, const size_t *recv_bytes,
                                  const size_t *recv_offsets, quorum_request_t *req) {
  ENTER_COMM(comm);
  QUORUM_CHECK(no_request_yet(req, __func__));
  RequestPtr r;
  Status s = quorum::alltoallv(*comm->comm, send, send_bytes, send_offsets, recv, recv_bytes,
                               recv_offsets, &r);
  return hand_out(s, comm, std::move(r), req);
}

quorum_status_t quorum_igather(quorum_comm_t comm, const void *send, void *recv,
                               size_t bytes_per_rank, int root, quorum_request_t *req) {
  ENTER_COMM(comm);
  QUORUM_CHECK(no_request_yet(req, __func__));
  RequestPtr r;
  Status s = quorum::gather(*comm->comm, send, recv, bytes_per_rank, root, &r);
  return hand_out(s, comm, std::move(r), req);
}

quorum_status_t quorum_iscatter(quorum_comm_t comm, const void *send, void *recv,
                                size_t bytes_per_rank, int root, quorum_request_t *req) {
  ENTER_COMM(comm);
  QUORUM_CHECK(no_request_yet(req, __func__));
  RequestPtr r;
  Status s = quorum::scatter(*comm->comm, send, recv, bytes_per_rank, root, &r);
  return hand_out(s, comm, std::move(r), req);
}

quorum_status_t quorum_ireduce(quorum_comm_t comm, const void *send, void *recv, size_t count,
                               quorum_dtype_t dtype, quorum_op_t op, int root,
                               quorum_request_t *req) {
  ENTER_COMM(comm);
  QUORUM_CHECK(no_request_yet(req, __func__));
  RequestPtr r;
  Status s = quorum::reduce(*comm->comm, send, recv, count, dtype, op, root, &r);
  return hand_out(s, comm, std::move(r), req);
}

}  // extern "C"
