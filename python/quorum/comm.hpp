// comm.hpp: the communicator and request types the Python bindings share.
//
// Comm is the Python class quorum.Comm: its collectives and partial objects
// are bound in quorum_module.cpp, the MPI-style calls (split/dup,
// point-to-point, rooted and personalised collectives) in mpi_style.cpp.
// Request is a pending non-blocking call: it holds the arrays it reads or
// writes until the operation completes.
#pragma once

#include <pybind11/pybind11.h>

#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "buffers.hpp"

namespace quorum_py {

// Context of the out-of-band allgather: a Python callable(bytes) -> bytes.
struct OobContext {
  py::function allgather;
  int size = 0;
  std::string error;
};

// A communicator; shared by the Requests and Partials made from it.
struct CommState {
  quorum_comm_t c = nullptr;
  // init_oob: the bootstrap calls the allgather again later (finalize).
  std::unique_ptr<OobContext> oob;
  ~CommState() {
    if (c) quorum_finalize(c);
  }
  quorum_comm_t get() const {
    if (!c) fail(QUORUM_ERR_INVALID_ARG, "the communicator was finalized");
    return c;
  }
};

class Request {
 public:
  Request(std::shared_ptr<CommState> comm, quorum_request_t r, std::vector<Buffer> keep)
      : comm_(std::move(comm)), r_(r), keep_(std::move(keep)) {}
  Request(Request &&o) noexcept
      : comm_(std::move(o.comm_)), r_(std::exchange(o.r_, nullptr)), keep_(std::move(o.keep_)) {}
  Request(const Request &) = delete;
  Request &operator=(const Request &) = delete;
  ~Request() {
    if (r_) {
      py::gil_scoped_release nogil;
      quorum_wait(r_);
    }
  }
  void wait() {
    if (!r_) return;
    quorum_status_t s;
    {
      py::gil_scoped_release nogil;
      s = quorum_wait(std::exchange(r_, nullptr));
    }
    keep_.clear();
    check(s);
  }
  bool test() {
    if (!r_) return true;
    int done = 0;
    quorum_status_t s = quorum_test(r_, &done);
    if (done) r_ = nullptr, keep_.clear();
    check(s);
    return done != 0;
  }
  bool done() const { return r_ == nullptr; }

 private:
  std::shared_ptr<CommState> comm_;
  quorum_request_t r_;
  std::vector<Buffer> keep_;  // the arrays, alive until the operation completes
};

class Partial;

// Refuses send and recv of different dtypes (INVALID_ARG naming both).
void same_type(const Buffer &a, const Buffer &b, const char *call);

class Comm {
 public:
  explicit Comm(std::shared_ptr<CommState> s) : s_(std::move(s)) {}

  // quorum_module.cpp
  static Comm init();
  static Comm init_oob(int rank, int size, py::function allgather);
  void finalize();
  bool finalized() const { return s_->c == nullptr; }
  int rank() const { return quorum_comm_rank(s_->get()); }
  int size() const { return quorum_comm_size(s_->get()); }
  std::string transport() const { return quorum_comm_transport(s_->get()); }
  py::object allreduce(const py::object &send, const py::object &recv, quorum_op_t op);
  Request iallreduce(const py::object &send, const py::object &recv, quorum_op_t op);
  py::object bcast(const py::object &buf, int root);
  void barrier();
  py::object allgather(const py::object &send, const py::object &recv);
  py::object reduce_scatter(const py::object &send, const py::object &recv, quorum_op_t op);
  Partial partial(size_t count, const py::object &dtype, quorum_partial_mode_t mode,
                  unsigned max_staleness, bool carry, unsigned long long seed, double carry_weight,
                  unsigned activation_delay_us, quorum_op_t op);

  // mpi_style.cpp
  py::object split(const py::object &color, int key);
  Comm dup();
  py::object send(const py::object &buf, int peer, int tag);
  py::object recv(const py::object &buf, int peer, int tag);
  Request isend(const py::object &buf, int peer, int tag);
  Request irecv(const py::object &buf, int peer, int tag);
  py::object reduce(const py::object &send, const py::object &recv, quorum_op_t op, int root);
  Request ireduce(const py::object &send, const py::object &recv, quorum_op_t op, int root);
  py::object gather(const py::object &send, const py::object &recv, int root);
  Request igather(const py::object &send, const py::object &recv, int root);
  py::object scatter(const py::object &send, const py::object &recv, int root);
  Request iscatter(const py::object &send, const py::object &recv, int root);
  py::object alltoall(const py::object &send, const py::object &recv);
  Request ialltoall(const py::object &send, const py::object &recv);
  py::object alltoallv(const py::object &send, const py::object &send_counts,
                       const py::object &recv, const py::object &recv_counts,
                       const py::object &send_offsets, const py::object &recv_offsets);
  Request ialltoallv(const py::object &send, const py::object &send_counts, const py::object &recv,
                     const py::object &recv_counts, const py::object &send_offsets,
                     const py::object &recv_offsets);

 private:
  // In place when recv is None or the same memory as send.
  std::pair<Buffer, Buffer> reduce_args(const py::object &send, const py::object &recv,
                                        const char *call) const;
  std::shared_ptr<CommState> s_;
};

// Adds the MPI-style methods of mpi_style.cpp to the Python class Comm.
void def_mpi_style(py::module_ &m, py::class_<Comm> &cls);

}  // namespace quorum_py
