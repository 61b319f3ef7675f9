// more_collectives.hpp: the collectives an MPI programmer expects beyond the
// core ones: alltoall(v), gather, scatter and rooted reduce. Each is a
// schedule of send, receive, copy and reduce tasks built here (steps and
// bytes on the wire in docs/algorithms.md) and run like every collective: a
// sequence number, the optional signature check, the timeout. Host buffers
// only (device memory fails with QUORUM_ERR_UNSUPPORTED). Sizes are bytes
// except reduce's count of elements.
//
// Each runs to completion when req is null; otherwise it is started and *req
// is the request to wait on (quorum_ialltoall...): the buffers must stay
// untouched until then, but alltoallv's size and offset arrays are read at
// the call.
#pragma once

#include <cstddef>

#include "collectives/communicator.hpp"

namespace quorum {

// Block j of send (bytes_per_rank each) goes to rank j, which stores it as
// block `rank` of recv. send and recv do not overlap.
Status alltoall(Communicator &comm, const void *send, void *recv, size_t bytes_per_rank,
                RequestPtr *req = nullptr);
// send_bytes[j] bytes at send + send_offsets[j] go to rank j; recv_bytes[j]
// bytes from rank j land at recv + recv_offsets[j] (the sizes must agree
// pairwise, else QUORUM_ERR_MISMATCH).
Status alltoallv(Communicator &comm, const void *send, const size_t *send_bytes,
                 const size_t *send_offsets, void *recv, const size_t *recv_bytes,
                 const size_t *recv_offsets, RequestPtr *req = nullptr);
// Root receives every rank's bytes_per_rank bytes, in rank order, in recv
// (recv is read only at the root; QUORUM_IN_PLACE as the root's send: its
// block is already in place).
Status gather(Communicator &comm, const void *send, void *recv, size_t bytes_per_rank, int root,
              RequestPtr *req = nullptr);
// Root sends block j of send to rank j's recv (send is read only at the root).
Status scatter(Communicator &comm, const void *send, void *recv, size_t bytes_per_rank, int root,
               RequestPtr *req = nullptr);
// The reduction of every rank's send lands in the root's recv (recv is
// written only at the root; QUORUM_IN_PLACE as the root's send).
Status reduce(Communicator &comm, const void *send, void *recv, size_t count, quorum_dtype_t dtype,
              quorum_op_t op, int root, RequestPtr *req = nullptr);

}  // namespace quorum
