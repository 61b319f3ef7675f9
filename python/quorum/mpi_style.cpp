// mpi_style.cpp: the MPI-style calls of quorum.Comm over the C API.
//
// split / dup (sub-communicators), send / recv / isend / irecv
// (point-to-point), rooted reduce, gather and scatter, alltoall and
// alltoallv, and the non-blocking forms of the collectives (each returns a
// Request that holds its arrays until it completes). Conventions as
// quorum_module.cpp's collectives: arrays through buffers.hpp, checked here
// before the C call (sizes, dtypes, writability), the GIL released during
// the call, failures raised as QuorumError. What the C API checks itself
// (root, peer, tag, sizes that disagree between ranks) it reports.
#include <Python.h>

#include <string>
#include <utility>
#include <vector>

#include "comm.hpp"

namespace quorum_py {
namespace {

std::string str(size_t v) {
  return std::to_string(v);
}

// The arguments of one rooted or personalised collective, checked: the C
// call's pointers and size, the arrays to keep alive, and what Python gets
// back (the result array, or None where this rank receives nothing).
struct Call {
  std::vector<Buffer> keep;
  const void *send = nullptr;
  void *recv = nullptr;
  size_t size = 0;  // elements (reduce) or bytes per rank
  quorum_dtype_t dtype = QUORUM_FLOAT32;
  py::object result = py::none();
};

// Rooted reduce: on the root as allreduce's (in place when recv is None or
// send's memory); elsewhere send alone (recv is not used there).
Call reduce_call(const Comm &comm, const py::object &send, const py::object &recv, int root,
                 const char *call) {
  Call c;
  if (comm.rank() != root) {
    Buffer s = typed_view(send, Access::Read, "send");
    c.send = s.data, c.size = s.count, c.dtype = s.dtype;
    c.keep = {s};
    return c;
  }
  Buffer r = typed_view(recv.is_none() ? send : recv, Access::Write, "recv");
  Buffer s = recv.is_none() ? r : typed_view(send, Access::Read, "send");
  same_type(s, r, call);
  if (s.count != r.count)
    fail(QUORUM_ERR_INVALID_ARG,
         std::string(call) + ": send has " + str(s.count) + " elements, recv " + str(r.count));
  c.send = s.data == r.data ? QUORUM_IN_PLACE : s.data;
  c.recv = r.data, c.size = r.count, c.dtype = r.dtype, c.result = r.owner;
  c.keep = {s, r};
  return c;
}

// Gather: the root's recv holds size x send's bytes; a root that passes send
// None has its own block in place in recv. Elsewhere send alone.
Call gather_call(const Comm &comm, const py::object &send, const py::object &recv, int root,
                 const char *call) {
  Call c;
  if (comm.rank() != root) {
    Buffer s = view(send, Access::Read, "send");
    c.send = s.data, c.size = s.bytes();
    c.keep = {s};
    return c;
  }
  if (recv.is_none())
    fail(QUORUM_ERR_INVALID_ARG,
         std::string(call) + ": the root (rank " + std::to_string(root) + ") needs recv");
  Buffer r = view(recv, Access::Write, "recv");
  const size_t n = size_t(comm.size());
  c.recv = r.data, c.result = r.owner;
  if (send.is_none()) {
    if (r.count % n != 0)
      fail(QUORUM_ERR_INVALID_ARG, std::string(call) + ": recv has " + str(r.count) +
                                       " elements, not a multiple of " + str(n) + " ranks");
    c.send = QUORUM_IN_PLACE, c.size = r.bytes() / n;
    c.keep = {r};
    return c;
  }
  Buffer s = view(send, Access::Read, "send");
  if (r.bytes() != s.bytes() * n)
    fail(QUORUM_ERR_INVALID_ARG, std::string(call) + ": recv has " + str(r.bytes()) +
                                     " bytes, expected send's " + str(s.bytes()) + " x " + str(n) +
                                     " ranks");
  c.send = s.data, c.size = s.bytes();
  c.keep = {s, r};
  return c;
}

// Scatter: the root's send holds size x recv's bytes; elsewhere send is not
// used (None).
Call scatter_call(const Comm &comm, const py::object &send, const py::object &recv, int root,
                  const char *call) {
  Call c;
  Buffer r = view(recv, Access::Write, "recv");
  c.recv = r.data, c.size = r.bytes(), c.result = r.owner;
  c.keep = {r};
  if (comm.rank() != root) return c;
  Buffer s = view(send, Access::Read, "send");
  const size_t n = size_t(comm.size());
  if (s.bytes() != r.bytes() * n)
    fail(QUORUM_ERR_INVALID_ARG, std::string(call) + ": send has " + str(s.bytes()) +
                                     " bytes, expected recv's " + str(r.bytes()) + " x " + str(n) +
                                     " ranks");
  c.send = s.data;
  c.keep.push_back(s);
  return c;
}

// Alltoall: send and recv of equal size, a whole number of elements per rank.
Call alltoall_call(const Comm &comm, const py::object &send, const py::object &recv,
                   const char *call) {
  Buffer s = view(send, Access::Read, "send");
  Buffer r = view(recv, Access::Write, "recv");
  const size_t n = size_t(comm.size());
  if (s.bytes() != r.bytes())
    fail(QUORUM_ERR_INVALID_ARG,
         std::string(call) + ": send has " + str(s.bytes()) + " bytes, recv " + str(r.bytes()));
  if (s.count % n != 0)
    fail(QUORUM_ERR_INVALID_ARG, std::string(call) + ": send has " + str(s.count) +
                                     " elements, not a multiple of " + str(n) + " ranks");
  Call c;
  c.send = s.data, c.recv = r.data, c.size = s.bytes() / n, c.result = r.owner;
  c.keep = {s, r};
  return c;
}

// One non-negative integer per rank (a list, tuple or integer array).
std::vector<size_t> per_rank(const py::object &obj, size_t n, const char *what, const char *call) {
  const std::string name = std::string(call) + ": " + what;
  if (!PySequence_Check(obj.ptr()) || py::isinstance<py::str>(obj) ||
      py::isinstance<py::bytes>(obj))
    fail(QUORUM_ERR_INVALID_ARG,
         name + ": expected a sequence of " + str(n) + " integers, got " +
             py::str(py::type::of(obj).attr("__name__")).cast<std::string>());
  py::sequence seq = py::reinterpret_borrow<py::sequence>(obj);
  if (seq.size() != n)
    fail(QUORUM_ERR_INVALID_ARG,
         name + ": " + str(seq.size()) + " entries, expected one per rank (" + str(n) + ")");
  std::vector<size_t> out(n);
  for (size_t j = 0; j < n; ++j) {
    py::object item = seq[j];
    PyObject *index = PyNumber_Index(item.ptr());
    long long v = -1;
    if (index) {
      v = PyLong_AsLongLong(index);
      Py_DECREF(index);
    }
    if (PyErr_Occurred()) PyErr_Clear();
    if (!index || v < 0)
      fail(QUORUM_ERR_INVALID_ARG, name + "[" + str(j) + "] is " +
                                       py::repr(item).cast<std::string>() +
                                       ", expected a non-negative integer");
    out[j] = size_t(v);
  }
  return out;
}

// Alltoallv's sizes and offsets in bytes, from counts and offsets in elements
// of the array (offsets None: the blocks one after another in rank order),
// every block inside its array.
struct Blocks {
  std::vector<size_t> bytes, offsets;
};
Blocks blocks(const Buffer &b, const py::object &counts, const py::object &offsets, size_t n,
              const char *which, const char *call) {
  const std::string counts_name = std::string(which) + "_counts";
  const std::string offsets_name = std::string(which) + "_offsets";
  std::vector<size_t> cnt = per_rank(counts, n, counts_name.c_str(), call);
  std::vector<size_t> off(n);
  if (offsets.is_none()) {
    for (size_t j = 1; j < n; ++j) off[j] = off[j - 1] + cnt[j - 1];
  } else {
    off = per_rank(offsets, n, offsets_name.c_str(), call);
  }
  Blocks out{std::vector<size_t>(n), std::vector<size_t>(n)};
  for (size_t j = 0; j < n; ++j) {
    if (cnt[j] > b.count || off[j] > b.count - cnt[j])
      fail(QUORUM_ERR_INVALID_ARG, std::string(call) + ": rank " + str(j) + "'s block of " + which +
                                       " (" + str(cnt[j]) + " elements at " + str(off[j]) +
                                       ") ends past its " + str(b.count) + " elements");
    out.bytes[j] = cnt[j] * b.itemsize;
    out.offsets[j] = off[j] * b.itemsize;
  }
  return out;
}

struct VCall {
  Buffer s, r;
  Blocks sb, rb;
};
VCall alltoallv_call(const Comm &comm, const py::object &send, const py::object &send_counts,
                     const py::object &recv, const py::object &recv_counts,
                     const py::object &send_offsets, const py::object &recv_offsets,
                     const char *call) {
  Buffer s = view(send, Access::Read, "send");
  Buffer r = view(recv, Access::Write, "recv");
  if (s.itemsize != r.itemsize || s.type_name != r.type_name)
    fail(QUORUM_ERR_INVALID_ARG,
         std::string(call) + ": send is " + s.type_name + " but recv is " + r.type_name);
  const size_t n = size_t(comm.size());
  Blocks sb = blocks(s, send_counts, send_offsets, n, "send", call);
  Blocks rb = blocks(r, recv_counts, recv_offsets, n, "recv", call);
  return {std::move(s), std::move(r), std::move(sb), std::move(rb)};
}

}  // namespace

py::object Comm::split(const py::object &color, int key) {
  int col = QUORUM_UNDEFINED;
  if (!color.is_none()) {
    if (!py::isinstance<py::int_>(color))
      fail(QUORUM_ERR_INVALID_ARG,
           "split: color must be an int or None, got " +
               py::str(py::type::of(color).attr("__name__")).cast<std::string>());
    col = color.cast<int>();
  }
  auto state = std::make_shared<CommState>();
  quorum_comm_t c = s_->get();
  {
    py::gil_scoped_release nogil;
    check(quorum_comm_split(c, col, key, &state->c));
  }
  if (!state->c) return py::none();
  return py::cast(Comm(state));
}

Comm Comm::dup() {
  auto state = std::make_shared<CommState>();
  quorum_comm_t c = s_->get();
  {
    py::gil_scoped_release nogil;
    check(quorum_comm_dup(c, &state->c));
  }
  return Comm(state);
}

py::object Comm::send(const py::object &buf, int peer, int tag) {
  Buffer b = view(buf, Access::Read, "buf");
  quorum_comm_t c = s_->get();
  {
    py::gil_scoped_release nogil;
    check(quorum_send(c, b.data, b.bytes(), peer, tag));
  }
  return py::none();
}

py::object Comm::recv(const py::object &buf, int peer, int tag) {
  Buffer b = view(buf, Access::Write, "buf");
  quorum_comm_t c = s_->get();
  {
    py::gil_scoped_release nogil;
    check(quorum_recv(c, b.data, b.bytes(), peer, tag));
  }
  return b.owner;
}

Request Comm::isend(const py::object &buf, int peer, int tag) {
  Buffer b = view(buf, Access::Read, "buf");
  quorum_comm_t c = s_->get();
  quorum_request_t req = nullptr;
  {
    py::gil_scoped_release nogil;
    check(quorum_isend(c, b.data, b.bytes(), peer, tag, &req));
  }
  return Request(s_, req, {b});
}

Request Comm::irecv(const py::object &buf, int peer, int tag) {
  Buffer b = view(buf, Access::Write, "buf");
  quorum_comm_t c = s_->get();
  quorum_request_t req = nullptr;
  {
    py::gil_scoped_release nogil;
    check(quorum_irecv(c, b.data, b.bytes(), peer, tag, &req));
  }
  return Request(s_, req, {b});
}

py::object Comm::reduce(const py::object &send, const py::object &recv, quorum_op_t op, int root) {
  Call a = reduce_call(*this, send, recv, root, "reduce");
  quorum_comm_t c = s_->get();
  {
    py::gil_scoped_release nogil;
    check(quorum_reduce(c, a.send, a.recv, a.size, a.dtype, op, root));
  }
  return a.result;
}

Request Comm::ireduce(const py::object &send, const py::object &recv, quorum_op_t op, int root) {
  Call a = reduce_call(*this, send, recv, root, "ireduce");
  quorum_comm_t c = s_->get();
  quorum_request_t req = nullptr;
  {
    py::gil_scoped_release nogil;
    check(quorum_ireduce(c, a.send, a.recv, a.size, a.dtype, op, root, &req));
  }
  return Request(s_, req, std::move(a.keep));
}

py::object Comm::gather(const py::object &send, const py::object &recv, int root) {
  Call a = gather_call(*this, send, recv, root, "gather");
  quorum_comm_t c = s_->get();
  {
    py::gil_scoped_release nogil;
    check(quorum_gather(c, a.send, a.recv, a.size, root));
  }
  return a.result;
}

Request Comm::igather(const py::object &send, const py::object &recv, int root) {
  Call a = gather_call(*this, send, recv, root, "igather");
  quorum_comm_t c = s_->get();
  quorum_request_t req = nullptr;
  {
    py::gil_scoped_release nogil;
    check(quorum_igather(c, a.send, a.recv, a.size, root, &req));
  }
  return Request(s_, req, std::move(a.keep));
}

py::object Comm::scatter(const py::object &send, const py::object &recv, int root) {
  Call a = scatter_call(*this, send, recv, root, "scatter");
  quorum_comm_t c = s_->get();
  {
    py::gil_scoped_release nogil;
    check(quorum_scatter(c, a.send, a.recv, a.size, root));
  }
  return a.result;
}

Request Comm::iscatter(const py::object &send, const py::object &recv, int root) {
  Call a = scatter_call(*this, send, recv, root, "iscatter");
  quorum_comm_t c = s_->get();
  quorum_request_t req = nullptr;
  {
    py::gil_scoped_release nogil;
    check(quorum_iscatter(c, a.send, a.recv, a.size, root, &req));
  }
  return Request(s_, req, std::move(a.keep));
}

py::object Comm::alltoall(const py::object &send, const py::object &recv) {
  Call a = alltoall_call(*this, send, recv, "alltoall");
  quorum_comm_t c = s_->get();
  {
    py::gil_scoped_release nogil;
    check(quorum_alltoall(c, a.send, a.recv, a.size));
  }
  return a.result;
}

Request Comm::ialltoall(const py::object &send, const py::object &recv) {
  Call a = alltoall_call(*this, send, recv, "ialltoall");
  quorum_comm_t c = s_->get();
  quorum_request_t req = nullptr;
  {
    py::gil_scoped_release nogil;
    check(quorum_ialltoall(c, a.send, a.recv, a.size, &req));
  }
  return Request(s_, req, std::move(a.keep));
}

py::object Comm::alltoallv(const py::object &send, const py::object &send_counts,
                           const py::object &recv, const py::object &recv_counts,
                           const py::object &send_offsets, const py::object &recv_offsets) {
  VCall a = alltoallv_call(*this, send, send_counts, recv, recv_counts, send_offsets, recv_offsets,
                           "alltoallv");
  quorum_comm_t c = s_->get();
  {
    py::gil_scoped_release nogil;
    check(quorum_alltoallv(c, a.s.data, a.sb.bytes.data(), a.sb.offsets.data(), a.r.data,
                           a.rb.bytes.data(), a.rb.offsets.data()));
  }
  return a.r.owner;
}

Request Comm::ialltoallv(const py::object &send, const py::object &send_counts,
                         const py::object &recv, const py::object &recv_counts,
                         const py::object &send_offsets, const py::object &recv_offsets) {
  VCall a = alltoallv_call(*this, send, send_counts, recv, recv_counts, send_offsets, recv_offsets,
                           "ialltoallv");
  quorum_comm_t c = s_->get();
  quorum_request_t req = nullptr;
  {
    py::gil_scoped_release nogil;
    // The size and offset arrays are read during the call: only the arrays stay.
    check(quorum_ialltoallv(c, a.s.data, a.sb.bytes.data(), a.sb.offsets.data(), a.r.data,
                            a.rb.bytes.data(), a.rb.offsets.data(), &req));
  }
  return Request(s_, req, {a.s, a.r});
}

void def_mpi_style(py::module_ &m, py::class_<Comm> &cls) {
  m.attr("UNDEFINED") = QUORUM_UNDEFINED;
  cls.def("split", &Comm::split, py::arg("color"), py::arg("key") = 0,
          "collective: a Comm of the ranks that pass this color, ranked by key (None for a "
          "color of None or UNDEFINED)")
      .def("dup", &Comm::dup, "collective: the same ranks, with tags of their own")
      .def("send", &Comm::send, py::arg("buf"), py::arg("peer"), py::arg("tag") = 0)
      .def("recv", &Comm::recv, py::arg("buf"), py::arg("peer"), py::arg("tag") = 0,
           "into buf, whose size must be the size sent")
      .def("isend", &Comm::isend, py::arg("buf"), py::arg("peer"), py::arg("tag") = 0)
      .def("irecv", &Comm::irecv, py::arg("buf"), py::arg("peer"), py::arg("tag") = 0)
      .def("reduce", &Comm::reduce, py::arg("send"), py::arg("recv") = py::none(),
           py::arg("op") = QUORUM_SUM, py::arg("root") = 0,
           "the reduction lands in the root's recv (or send, in place); None elsewhere")
      .def("ireduce", &Comm::ireduce, py::arg("send"), py::arg("recv") = py::none(),
           py::arg("op") = QUORUM_SUM, py::arg("root") = 0)
      .def("gather", &Comm::gather, py::arg("send"), py::arg("recv") = py::none(),
           py::arg("root") = 0,
           "every rank's send, in rank order, into the root's recv (send None on the root: its "
           "block is in place); None elsewhere")
      .def("igather", &Comm::igather, py::arg("send"), py::arg("recv") = py::none(),
           py::arg("root") = 0)
      .def("scatter", &Comm::scatter, py::arg("send"), py::arg("recv"), py::arg("root") = 0,
           "block j of the root's send into rank j's recv (send unused elsewhere)")
      .def("iscatter", &Comm::iscatter, py::arg("send"), py::arg("recv"), py::arg("root") = 0)
      .def("alltoall", &Comm::alltoall, py::arg("send"), py::arg("recv"),
           "block j of send into rank j's recv, as its block `rank`")
      .def("ialltoall", &Comm::ialltoall, py::arg("send"), py::arg("recv"))
      .def("alltoallv", &Comm::alltoallv, py::arg("send"), py::arg("send_counts"), py::arg("recv"),
           py::arg("recv_counts"), py::arg("send_offsets") = py::none(),
           py::arg("recv_offsets") = py::none(),
           "counts and offsets in elements, one per rank (offsets None: blocks back to back)")
      .def("ialltoallv", &Comm::ialltoallv, py::arg("send"), py::arg("send_counts"),
           py::arg("recv"), py::arg("recv_counts"), py::arg("send_offsets") = py::none(),
           py::arg("recv_offsets") = py::none());
}

}  // namespace quorum_py
