// c_api.cpp: the C API (include/quorum/quorum.h) over the C++ communicator.
#include <cstring>
#include <mutex>
#include <new>
#include <unordered_set>

#include "collectives/c_api_handles.hpp"
#include "collectives/communicator.hpp"
#include "collectives/reduce/reduce_kernels.hpp"
#include "runtime/log.hpp"

using quorum::Communicator;
using quorum::fail;
using quorum::RequestPtr;
using quorum::Status;

struct quorum_request {
  quorum_comm *handle;
  RequestPtr req;
};

namespace {

// The request handles the non-blocking calls gave out and nobody released yet. A
// released one (by quorum_wait, or a quorum_test that set *done) passed again
// is refused instead of read after it was freed.
class LiveRequestHandles {
 public:
  void add(quorum_request_t r) {
    std::lock_guard<std::mutex> lock(mutex_);
    handles_.insert(r);
  }
  bool contains(quorum_request_t r) {
    std::lock_guard<std::mutex> lock(mutex_);
    return handles_.count(r) != 0;
  }
  // Removes r; false if it was not live.
  bool take(quorum_request_t r) {
    std::lock_guard<std::mutex> lock(mutex_);
    return handles_.erase(r) != 0;
  }

 private:
  std::mutex mutex_;
  std::unordered_set<quorum_request_t> handles_;
};

// Never destroyed: a thread may still wait on a request while the process exits.
LiveRequestHandles &live_request_handles() {
  static auto *handles = new LiveRequestHandles;
  return *handles;
}

Status not_live(const char *what, quorum_request_t req) {
  return fail(QUORUM_ERR_INVALID_ARG, "api",
              "{}: request {} is not live (released by an earlier quorum_wait, or by a "
              "quorum_test that reported it done)",
              what, static_cast<const void *>(req));
}

Status make_comm(std::unique_ptr<quorum::Bootstrap> bootstrap, quorum_comm_t *out) {
  std::unique_ptr<Communicator> comm;
  QUORUM_CHECK(Communicator::create(std::move(bootstrap), &comm));
  auto *c = new (std::nothrow) quorum_comm;  // never freed: see c_api_handles.hpp
  if (!c) return fail(QUORUM_ERR_NO_MEMORY, "api", "communicator handle");
  c->comm = std::move(comm);
  *out = c;
  return QUORUM_OK;
}

}  // namespace

quorum_request_t quorum::make_request_handle(quorum_comm *comm, RequestPtr req) {
  auto *handle = new quorum_request{comm, std::move(req)};
  live_request_handles().add(handle);
  return handle;
}

extern "C" {

const char *quorum_version(void) {
  return "0.1.0";
}

quorum_status_t quorum_init(quorum_comm_t *comm) {
  if (!comm) return fail(QUORUM_ERR_INVALID_ARG, "api", "quorum_init: NULL output pointer");
  *comm = nullptr;
  std::unique_ptr<quorum::Bootstrap> bootstrap;
  QUORUM_CHECK(quorum::bootstrap_from_environment(&bootstrap));
  return make_comm(std::move(bootstrap), comm);
}

quorum_status_t quorum_init_oob(const quorum_oob_t *oob, quorum_comm_t *comm) {
  if (!comm) return fail(QUORUM_ERR_INVALID_ARG, "api", "quorum_init_oob: NULL output pointer");
  *comm = nullptr;
  std::unique_ptr<quorum::Bootstrap> bootstrap;
  QUORUM_CHECK(quorum::make_oob_bootstrap(oob, &bootstrap));
  return make_comm(std::move(bootstrap), comm);
}

quorum_status_t quorum_finalize(quorum_comm_t comm) {
  ENTER_COMM(comm);
  Status s = comm->comm->finalize();
  // Refused (requests in flight, INVALID_ARG): the handle stays valid, so
  // that the caller can wait for them and finalize again.
  if (!comm->comm->finalized()) return s;
  comm->state.store(quorum::HandleState::Released, std::memory_order_release);
  comm->comm.reset();
  quorum::keep_released_handle(comm);
  // INVALID_ARG tells the caller the handle is still valid: a failure of the
  // closing itself (the transport's shutdown) must not read as that.
  return s == QUORUM_ERR_INVALID_ARG ? QUORUM_ERR_TRANSPORT : s;
}

namespace {
bool live(quorum_comm_t comm) {
  return comm && comm->state.load(std::memory_order_acquire) == quorum::HandleState::Live &&
         comm->comm;
}
}  // namespace

int quorum_comm_rank(quorum_comm_t comm) {
  return live(comm) ? comm->comm->rank() : -1;
}
int quorum_comm_size(quorum_comm_t comm) {
  return live(comm) ? comm->comm->size() : -1;
}
const char *quorum_comm_transport(quorum_comm_t comm) {
  return live(comm) ? comm->comm->transport_name() : "none";
}

const char *quorum_strerror(quorum_status_t status) {
  return quorum::status_text(status);
}
const char *quorum_last_error(void) {
  return quorum::last_error();
}

quorum_status_t quorum_allreduce(quorum_comm_t comm, const void *send, void *recv, size_t count,
                                 quorum_dtype_t dtype, quorum_op_t op) {
  ENTER_COMM(comm);
  return comm->comm->allreduce(send, recv, count, dtype, op);
}

quorum_status_t quorum_iallreduce(quorum_comm_t comm, const void *send, void *recv, size_t count,
                                  quorum_dtype_t dtype, quorum_op_t op, quorum_request_t *req) {
  ENTER_COMM(comm);
  if (!req) return fail(QUORUM_ERR_INVALID_ARG, "api", "quorum_iallreduce: NULL request pointer");
  *req = nullptr;
  RequestPtr r;
  QUORUM_CHECK(comm->comm->iallreduce(send, recv, count, dtype, op, &r));
  *req = quorum::make_request_handle(comm, std::move(r));
  return QUORUM_OK;
}

quorum_status_t quorum_test(quorum_request_t req, int *done) {
  if (!req || !done) return fail(QUORUM_ERR_INVALID_ARG, "api", "quorum_test: NULL argument");
  if (!live_request_handles().contains(req)) return not_live("quorum_test", req);
  ENTER_COMM(req->handle);
  bool finished = false;
  Status s = req->handle->comm->test(req->req, &finished);
  *done = finished ? 1 : 0;
  if (finished && live_request_handles().take(req)) delete req;
  return s;
}

quorum_status_t quorum_wait(quorum_request_t req) {
  if (!req) return fail(QUORUM_ERR_INVALID_ARG, "api", "quorum_wait: NULL request");
  if (!live_request_handles().contains(req)) return not_live("quorum_wait", req);
  ENTER_COMM(req->handle);
  if (!live_request_handles().take(req)) return not_live("quorum_wait", req);
  Status s = req->handle->comm->wait(req->req);
  delete req;
  return s;
}

quorum_status_t quorum_bcast(quorum_comm_t comm, void *buf, size_t bytes, int root) {
  ENTER_COMM(comm);
  return comm->comm->bcast(buf, bytes, root);
}

quorum_status_t quorum_mem_alloc(quorum_comm_t comm, size_t bytes, void **ptr) {
  ENTER_COMM(comm);
  return comm->comm->mem_alloc(bytes, ptr);
}

quorum_status_t quorum_mem_free(quorum_comm_t comm, void *ptr) {
  ENTER_COMM(comm);
  return comm->comm->mem_free(ptr);
}

quorum_status_t quorum_barrier(quorum_comm_t comm) {
  ENTER_COMM(comm);
  return comm->comm->barrier();
}

quorum_status_t quorum_allgather(quorum_comm_t comm, const void *send, void *recv,
                                 size_t bytes_per_rank) {
  ENTER_COMM(comm);
  return comm->comm->allgather(send, recv, bytes_per_rank);
}

quorum_status_t quorum_reduce_scatter(quorum_comm_t comm, const void *send, void *recv,
                                      size_t count_per_rank, quorum_dtype_t dtype, quorum_op_t op) {
  ENTER_COMM(comm);
  return comm->comm->reduce_scatter(send, recv, count_per_rank, dtype, op);
}

}  // extern "C"
