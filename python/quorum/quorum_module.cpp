// quorum_module.cpp: the pybind11 extension quorum._quorum over the C API.
//
// Comm (init / init_oob, the collectives, partial objects; its MPI-style
// calls are in mpi_style.cpp), Request (the non-blocking calls), Partial
// (solo/majority allreduce), RoundInfo / RoundStats, and the enums. Arrays are anything with DLPack
// (torch tensors, numpy arrays) or the buffer protocol, used in place (buffers.hpp). Every blocking
// C call runs with the GIL released. Errors raise QuorumError(status, message, detail): detail is
// the library's quorum_last_error() text, or the bindings' own cause when they refuse arguments
// before calling it.
#include <pybind11/eval.h>
#include <pybind11/pybind11.h>
#include <pybind11/stl.h>

#include <cstring>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "buffers.hpp"
#include "comm.hpp"

namespace quorum_py {
namespace {

py::object g_error_type;  // quorum._quorum.QuorumError

int oob_allgather(const void *send, void *recv, size_t bytes, void *ctx_ptr) {
  auto *ctx = static_cast<OobContext *>(ctx_ptr);
  py::gil_scoped_acquire gil;
  try {
    py::object out = ctx->allgather(py::bytes(static_cast<const char *>(send), bytes));
    py::buffer_info info = py::reinterpret_borrow<py::buffer>(out).request();
    const size_t got = static_cast<size_t>(info.size * info.itemsize);
    if (got != bytes * size_t(ctx->size)) {
      ctx->error = "the allgather returned " + std::to_string(got) + " bytes, expected " +
                   std::to_string(bytes) + " x " + std::to_string(ctx->size);
      return 1;
    }
    std::memcpy(recv, info.ptr, got);
    return 0;
  } catch (py::error_already_set &e) {
    ctx->error = std::string("the allgather raised: ") + e.what();
  } catch (std::exception &e) {
    ctx->error = std::string("the allgather failed: ") + e.what();
  }
  return 1;
}

quorum_dtype_t dtype_arg(const py::object &dtype) {
  if (py::isinstance<quorum_dtype_t>(dtype)) return dtype.cast<quorum_dtype_t>();
  std::string name = py::str(dtype).cast<std::string>();
  if (name.rfind("torch.", 0) == 0) name = name.substr(6);
  for (quorum_dtype_t d : all_dtypes())
    if (name == quorum_dtype_name(d)) return d;
  fail(QUORUM_ERR_INVALID_ARG, "dtype " + name + ": expected " + dtype_list());
}

py::object new_numpy(size_t count, quorum_dtype_t dtype, const char *what) {
  if (*numpy_name(dtype) == '\0')
    fail(QUORUM_ERR_INVALID_ARG,
         std::string(what) + ": numpy has no bfloat16: pass an output tensor (out=...)");
  return py::module_::import("numpy").attr("empty")(count, numpy_name(dtype));
}

}  // namespace

void same_type(const Buffer &a, const Buffer &b, const char *call) {
  if (a.dtype != b.dtype)
    fail(QUORUM_ERR_INVALID_ARG,
         std::string(call) + ": send is " + a.type_name + " but recv is " + b.type_name);
}

class Partial {
 public:
  Partial(std::shared_ptr<CommState> comm, quorum_partial_t p, size_t count, quorum_dtype_t dtype)
      : comm_(std::move(comm)), p_(p), count_(count), dtype_(dtype) {}
  Partial(Partial &&o) noexcept
      : comm_(std::move(o.comm_)),
        p_(std::exchange(o.p_, nullptr)),
        count_(o.count_),
        dtype_(o.dtype_) {}
  Partial(const Partial &) = delete;
  Partial &operator=(const Partial &) = delete;
  ~Partial() {
    if (p_) quorum_partial_free(p_);  // local: a collective destroy could wait on peers
  }
  quorum_partial_t get() const {
    if (!p_) fail(QUORUM_ERR_INVALID_ARG, "the partial allreduce was destroyed");
    return p_;
  }
  Buffer arg(const py::object &obj, Access access, const char *what) const {
    Buffer b = typed_view(obj, access, what);
    if (b.dtype != dtype_ || b.count != count_)
      fail(QUORUM_ERR_INVALID_ARG, std::string(what) + ": " + std::to_string(b.count) +
                                       " elements of " + b.type_name +
                                       ", but the partial allreduce was created for " +
                                       std::to_string(count_) + " of " + quorum_dtype_name(dtype_));
    return b;
  }
  void post(const py::object &contribution) {
    Buffer b = arg(contribution, Access::Read, "post");
    quorum_partial_t p = get();
    py::gil_scoped_release nogil;
    check(quorum_partial_post(p, b.data));
  }
  std::pair<py::object, quorum_round_info_t> wait(py::object out) {
    if (out.is_none()) out = new_numpy(count_, dtype_, "wait");
    Buffer b = arg(out, Access::Write, "wait");
    quorum_partial_t p = get();
    quorum_round_info_t info{};
    {
      py::gil_scoped_release nogil;
      check(quorum_partial_wait(p, b.data, &info));
    }
    return {out, info};
  }
  py::object flush(py::object out) {
    if (out.is_none()) out = new_numpy(count_, dtype_, "flush");
    Buffer b = arg(out, Access::Write, "flush");
    quorum_partial_t p = get();
    {
      py::gil_scoped_release nogil;
      check(quorum_partial_flush(p, b.data));
    }
    return out;
  }
  unsigned long long rounds_behind() const {
    unsigned long long n = 0;
    check(quorum_partial_rounds_behind(get(), &n));
    return n;
  }
  quorum_round_stats_t last_round_stats() const {
    quorum_round_stats_t s{};
    check(quorum_partial_last_round_stats(get(), &s));
    return s;
  }
  void destroy() {
    if (!p_) return;
    quorum_status_t s;
    {
      py::gil_scoped_release nogil;
      s = quorum_partial_destroy(std::exchange(p_, nullptr));
    }
    check(s);
  }
  void free_locally() {
    if (p_) quorum_partial_free(std::exchange(p_, nullptr));
  }
  size_t count() const { return count_; }
  quorum_dtype_t dtype() const { return dtype_; }

 private:
  std::shared_ptr<CommState> comm_;
  quorum_partial_t p_;
  size_t count_;
  quorum_dtype_t dtype_;
};

Comm Comm::init() {
  auto s = std::make_shared<CommState>();
  quorum_status_t st;
  {
    py::gil_scoped_release nogil;
    st = quorum_init(&s->c);
  }
  check(st);
  return Comm(s);
}

Comm Comm::init_oob(int rank, int size, py::function allgather) {
  auto s = std::make_shared<CommState>();
  s->oob.reset(new OobContext{std::move(allgather), size, {}});
  OobContext &ctx = *s->oob;
  quorum_oob_t oob{rank, size, oob_allgather, &ctx};
  quorum_status_t st;
  {
    py::gil_scoped_release nogil;
    st = quorum_init_oob(&oob, &s->c);
  }
  if (st != QUORUM_OK)
    fail(st,
         ctx.error.empty() ? quorum_last_error() : ctx.error + " (" + quorum_last_error() + ")");
  return Comm(s);
}

void Comm::finalize() {
  if (!s_->c) return;
  quorum_status_t st;
  {
    py::gil_scoped_release nogil;
    st = quorum_finalize(s_->c);
  }
  if (st != QUORUM_ERR_INVALID_ARG) s_->c = nullptr;  // INVALID_ARG: refused, still usable
  if (st != QUORUM_OK && s_->oob && !s_->oob->error.empty())
    fail(st, s_->oob->error + " (" + quorum_last_error() + ")");
  check(st);
}

std::pair<Buffer, Buffer> Comm::reduce_args(const py::object &send, const py::object &recv,
                                            const char *call) const {
  Buffer r = typed_view(recv.is_none() ? send : recv, Access::Write, "recv");
  Buffer s = recv.is_none() ? r : typed_view(send, Access::Read, "send");
  same_type(s, r, call);
  return {s, r};
}

py::object Comm::allreduce(const py::object &send, const py::object &recv, quorum_op_t op) {
  auto [s, r] = reduce_args(send, recv, "allreduce");
  if (s.count != r.count)
    fail(QUORUM_ERR_INVALID_ARG, "allreduce: send has " + std::to_string(s.count) +
                                     " elements, recv " + std::to_string(r.count));
  const void *in = s.data == r.data ? QUORUM_IN_PLACE : s.data;
  quorum_comm_t c = s_->get();
  {
    py::gil_scoped_release nogil;
    check(quorum_allreduce(c, in, r.data, r.count, r.dtype, op));
  }
  return r.owner;
}

Request Comm::iallreduce(const py::object &send, const py::object &recv, quorum_op_t op) {
  auto [s, r] = reduce_args(send, recv, "iallreduce");
  if (s.count != r.count)
    fail(QUORUM_ERR_INVALID_ARG, "iallreduce: send has " + std::to_string(s.count) +
                                     " elements, recv " + std::to_string(r.count));
  const void *in = s.data == r.data ? QUORUM_IN_PLACE : s.data;
  quorum_request_t req = nullptr;
  quorum_comm_t c = s_->get();
  {
    py::gil_scoped_release nogil;
    check(quorum_iallreduce(c, in, r.data, r.count, r.dtype, op, &req));
  }
  return Request(s_, req, {s, r});
}

py::object Comm::bcast(const py::object &buf, int root) {
  Buffer b = view(buf, Access::Write, "buf");
  quorum_comm_t c = s_->get();
  {
    py::gil_scoped_release nogil;
    check(quorum_bcast(c, b.data, b.bytes(), root));
  }
  return b.owner;
}

void Comm::barrier() {
  quorum_comm_t c = s_->get();
  py::gil_scoped_release nogil;
  check(quorum_barrier(c));
}

py::object Comm::allgather(const py::object &send, const py::object &recv) {
  Buffer s = view(send, Access::Read, "send");
  Buffer r = view(recv, Access::Write, "recv");
  const size_t n = size_t(size());
  if (r.bytes() != s.bytes() * n)
    fail(QUORUM_ERR_INVALID_ARG, "allgather: recv has " + std::to_string(r.bytes()) +
                                     " bytes, expected send's " + std::to_string(s.bytes()) +
                                     " x " + std::to_string(n) + " ranks");
  quorum_comm_t c = s_->get();
  {
    py::gil_scoped_release nogil;
    check(quorum_allgather(c, s.data, r.data, s.bytes()));
  }
  return r.owner;
}

py::object Comm::reduce_scatter(const py::object &send, const py::object &recv, quorum_op_t op) {
  Buffer s = typed_view(send, Access::Read, "send");
  Buffer r = typed_view(recv, Access::Write, "recv");
  same_type(s, r, "reduce_scatter");
  const size_t n = size_t(size());
  if (s.count != r.count * n)
    fail(QUORUM_ERR_INVALID_ARG, "reduce_scatter: send has " + std::to_string(s.count) +
                                     " elements, expected recv's " + std::to_string(r.count) +
                                     " x " + std::to_string(n) + " ranks");
  quorum_comm_t c = s_->get();
  {
    py::gil_scoped_release nogil;
    check(quorum_reduce_scatter(c, s.data, r.data, r.count, r.dtype, op));
  }
  return r.owner;
}

Partial Comm::partial(size_t count, const py::object &dtype, quorum_partial_mode_t mode,
                      unsigned max_staleness, bool carry, unsigned long long seed,
                      double carry_weight, unsigned activation_delay_us, quorum_op_t op) {
  quorum_partial_opts_t opts{};
  opts.mode = mode;
  opts.max_staleness = max_staleness;
  opts.carry = carry ? 1 : 0;
  opts.seed = seed;
  opts.carry_weight = carry_weight;
  opts.activation_delay_us = activation_delay_us;
  const quorum_dtype_t dt = dtype_arg(dtype);
  quorum_partial_t p = nullptr;
  quorum_comm_t c = s_->get();
  {
    py::gil_scoped_release nogil;
    check(quorum_partial_create(c, count, dt, op, &opts, &p));
  }
  return Partial(s_, p, count, dt);
}

namespace {

const char *kErrorClass = R"(
class QuorumError(RuntimeError):
    """A quorum call failed: status (a Status) and detail (the exact cause)."""

    def __init__(self, status, message, detail):
        super().__init__(message)
        self.status = status
        self.detail = detail
)";

}  // namespace
}  // namespace quorum_py

using namespace quorum_py;  // NOLINT: the module's definitions read better without the prefix

PYBIND11_MODULE(_quorum, m) {
  m.doc() = "quorum's C API for Python (use the package quorum, not this module)";
  py::enum_<quorum_status_t>(m, "Status")
      .value("OK", QUORUM_OK)
      .value("ERR_INVALID_ARG", QUORUM_ERR_INVALID_ARG)
      .value("ERR_TIMEOUT", QUORUM_ERR_TIMEOUT)
      .value("ERR_PEER_FAILED", QUORUM_ERR_PEER_FAILED)
      .value("ERR_MISMATCH", QUORUM_ERR_MISMATCH)
      .value("ERR_NO_MEMORY", QUORUM_ERR_NO_MEMORY)
      .value("ERR_TRANSPORT", QUORUM_ERR_TRANSPORT)
      .value("ERR_BOOTSTRAP", QUORUM_ERR_BOOTSTRAP)
      .value("ERR_UNSUPPORTED", QUORUM_ERR_UNSUPPORTED)
      .value("ERR_INTERNAL", QUORUM_ERR_INTERNAL);
  py::enum_<quorum_dtype_t>(m, "DType")
      .value("FLOAT32", QUORUM_FLOAT32)
      .value("FLOAT64", QUORUM_FLOAT64)
      .value("FLOAT16", QUORUM_FLOAT16)
      .value("BFLOAT16", QUORUM_BFLOAT16)
      .value("INT32", QUORUM_INT32)
      .value("INT64", QUORUM_INT64);
  py::enum_<quorum_op_t>(m, "Op")
      .value("SUM", QUORUM_SUM)
      .value("PROD", QUORUM_PROD)
      .value("MIN", QUORUM_MIN)
      .value("MAX", QUORUM_MAX)
      .value("AVG", QUORUM_AVG);
  py::enum_<quorum_partial_mode_t>(m, "Mode")
      .value("SOLO", QUORUM_PARTIAL_SOLO)
      .value("MAJORITY", QUORUM_PARTIAL_MAJORITY);

  py::exec(kErrorClass, m.attr("__dict__"));
  g_error_type = m.attr("QuorumError");
  py::register_exception_translator([](std::exception_ptr p) {
    try {
      if (p) std::rethrow_exception(p);
    } catch (const Failure &f) {
      std::string message = std::string(quorum_strerror(f.status)) + ": " + f.detail;
      py::object e = g_error_type(py::cast(f.status), message, f.detail);
      PyErr_SetObject(g_error_type.ptr(), e.ptr());
    }
  });

  m.def("version", &quorum_version, "the library's version, MAJOR.MINOR.PATCH");
  m.def("strerror", &quorum_strerror, py::arg("status"));

  py::class_<quorum_round_info_t>(m, "RoundInfo", "which round a partial wait returned")
      .def_readonly("round", &quorum_round_info_t::round)
      .def_readonly("fresh", &quorum_round_info_t::fresh, "ranks whose post for it was in time")
      .def_property_readonly("own_fresh",
                             [](const quorum_round_info_t &i) { return i.own_fresh != 0; })
      .def_readonly("initiator", &quorum_round_info_t::initiator, "-1: a synchronous round")
      .def("__repr__", [](const quorum_round_info_t &i) {
        return "RoundInfo(round=" + std::to_string(i.round) + ", fresh=" + std::to_string(i.fresh) +
               ", own_fresh=" + (i.own_fresh ? "True" : "False") +
               ", initiator=" + std::to_string(i.initiator) + ")";
      });
  py::class_<quorum_round_stats_t>(m, "RoundStats", "timing and staleness of the last round")
      .def_readonly("post_ns", &quorum_round_stats_t::post_ns)
      .def_readonly("join_ns", &quorum_round_stats_t::join_ns)
      .def_readonly("complete_ns", &quorum_round_stats_t::complete_ns)
      .def_readonly("own_carried", &quorum_round_stats_t::own_carried)
      .def_readonly("own_staleness", &quorum_round_stats_t::own_staleness)
      .def_readonly("carried", &quorum_round_stats_t::carried)
      .def_readonly("staleness", &quorum_round_stats_t::staleness);

  py::class_<Request>(m, "Request", "a pending non-blocking call (waited when garbage collected)")
      .def("wait", &Request::wait)
      .def("test", &Request::test, "True once complete (the request is then released)")
      .def_property_readonly("done", &Request::done);

  py::class_<Partial>(m, "Partial", "a solo or majority partial allreduce (eager-SGD)")
      .def("post", &Partial::post, py::arg("contribution"))
      .def("wait", &Partial::wait, py::arg("out") = py::none(),
           "the next round's result (into out, or a new numpy array) and its RoundInfo")
      .def("flush", &Partial::flush, py::arg("out") = py::none(),
           "collective: a last synchronous round that drains every carried contribution")
      .def("rounds_behind", &Partial::rounds_behind)
      .def("last_round_stats", &Partial::last_round_stats)
      .def("destroy", &Partial::destroy, "collective")
      .def("free", &Partial::free_locally, "local, for error paths")
      .def_property_readonly("count", &Partial::count)
      .def_property_readonly("dtype", &Partial::dtype)
      .def("__enter__", [](py::object self) { return self; })
      .def("__exit__", [](Partial &p, py::object type, py::object, py::object) {
        // After an exception peers may be elsewhere: free locally, never wait for them.
        if (type.is_none())
          p.destroy();
        else
          p.free_locally();
      });

  py::class_<Comm> comm(m, "Comm", "a quorum communicator");
  comm.def_static("init", &Comm::init, "bootstrap from the environment")
      .def_static("init_oob", &Comm::init_oob, py::arg("rank"), py::arg("size"),
                  py::arg("allgather"))
      .def("finalize", &Comm::finalize)
      .def_property_readonly("finalized", &Comm::finalized)
      .def_property_readonly("rank", &Comm::rank)
      .def_property_readonly("size", &Comm::size)
      .def_property_readonly("transport", &Comm::transport)
      .def("allreduce", &Comm::allreduce, py::arg("send"), py::arg("recv") = py::none(),
           py::arg("op") = QUORUM_SUM)
      .def("iallreduce", &Comm::iallreduce, py::arg("send"), py::arg("recv") = py::none(),
           py::arg("op") = QUORUM_SUM)
      .def("bcast", &Comm::bcast, py::arg("buf"), py::arg("root") = 0)
      .def("barrier", &Comm::barrier)
      .def("allgather", &Comm::allgather, py::arg("send"), py::arg("recv"))
      .def("reduce_scatter", &Comm::reduce_scatter, py::arg("send"), py::arg("recv"),
           py::arg("op") = QUORUM_SUM)
      .def("partial", &Comm::partial, py::arg("count"), py::arg("dtype") = QUORUM_FLOAT32,
           py::arg("mode") = QUORUM_PARTIAL_SOLO, py::arg("max_staleness") = 32,
           py::arg("carry") = true, py::arg("seed") = 0, py::arg("carry_weight") = 0.0,
           py::arg("activation_delay_us") = 0, py::arg("op") = QUORUM_SUM)
      .def("__enter__", [](py::object self) { return self; })
      .def("__exit__", [](Comm &c, py::object type, py::object, py::object) {
        if (type.is_none()) {
          c.finalize();
          return;
        }
        try {
          c.finalize();  // the exception in flight matters more than this one
        } catch (const Failure &) {
        }
      });
  def_mpi_style(m, comm);
}
