// c_api_comm.cpp: the C API of sub-communicators (quorum_comm_split,
// quorum_comm_dup) and point-to-point transfers (quorum_send/recv/isend/irecv).
#include <new>

#include "collectives/c_api_handles.hpp"
#include "collectives/comm_split.hpp"
#include "collectives/point_to_point.hpp"

using quorum::Communicator;
using quorum::fail;
using quorum::RequestPtr;
using quorum::Status;

namespace {

Status wrap(std::unique_ptr<Communicator> made, quorum_comm_t *out) {
  if (!made) return QUORUM_OK;  // QUORUM_UNDEFINED: no communicator
  auto *handle = new (std::nothrow) quorum_comm;
  if (!handle) return fail(QUORUM_ERR_NO_MEMORY, "api", "communicator handle");
  handle->comm = std::move(made);
  *out = handle;
  return QUORUM_OK;
}

Status nonblocking(Status started, quorum_comm_t comm, RequestPtr r, quorum_request_t *req) {
  if (started != QUORUM_OK) return started;
  *req = quorum::make_request_handle(comm, std::move(r));
  return QUORUM_OK;
}

}  // namespace

extern "C" {

quorum_status_t quorum_comm_split(quorum_comm_t comm, int color, int key, quorum_comm_t *newcomm) {
  ENTER_COMM(comm);
  if (!newcomm)
    return fail(QUORUM_ERR_INVALID_ARG, "api", "quorum_comm_split: NULL output pointer");
  *newcomm = nullptr;
  std::unique_ptr<Communicator> made;
  QUORUM_CHECK(quorum::comm_split(*comm->comm, color, key, &made));
  return wrap(std::move(made), newcomm);
}

quorum_status_t quorum_comm_dup(quorum_comm_t comm, quorum_comm_t *newcomm) {
  ENTER_COMM(comm);
  if (!newcomm) return fail(QUORUM_ERR_INVALID_ARG, "api", "quorum_comm_dup: NULL output pointer");
  *newcomm = nullptr;
  std::unique_ptr<Communicator> made;
  QUORUM_CHECK(quorum::comm_dup(*comm->comm, &made));
  return wrap(std::move(made), newcomm);
}

quorum_status_t quorum_send(quorum_comm_t comm, const void *buf, size_t bytes, int peer, int tag) {
  ENTER_COMM(comm);
  RequestPtr r;
  QUORUM_CHECK(quorum::point_to_point_send(*comm->comm, buf, bytes, peer, tag, &r, true));
  return comm->comm->wait(r);
}

quorum_status_t quorum_recv(quorum_comm_t comm, void *buf, size_t bytes, int peer, int tag) {
  ENTER_COMM(comm);
  RequestPtr r;
  QUORUM_CHECK(quorum::point_to_point_recv(*comm->comm, buf, bytes, peer, tag, &r, true));
  return comm->comm->wait(r);
}

quorum_status_t quorum_isend(quorum_comm_t comm, const void *buf, size_t bytes, int peer, int tag,
                             quorum_request_t *req) {
  ENTER_COMM(comm);
  if (!req) return fail(QUORUM_ERR_INVALID_ARG, "api", "quorum_isend: NULL request pointer");
  *req = nullptr;
  RequestPtr r;
  Status s = quorum::point_to_point_send(*comm->comm, buf, bytes, peer, tag, &r, false);
  return nonblocking(s, comm, std::move(r), req);
}

quorum_status_t quorum_irecv(quorum_comm_t comm, void *buf, size_t bytes, int peer, int tag,
                             quorum_request_t *req) {
  ENTER_COMM(comm);
  if (!req) return fail(QUORUM_ERR_INVALID_ARG, "api", "quorum_irecv: NULL request pointer");
  *req = nullptr;
  RequestPtr r;
  Status s = quorum::point_to_point_recv(*comm->comm, buf, bytes, peer, tag, &r, false);
  return nonblocking(s, comm, std::move(r), req);
}

}  // extern "C"
