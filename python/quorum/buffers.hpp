// buffers.hpp: views of the arrays the Python bindings hand to the C API.
//
// A Buffer is a pointer, an element count and a quorum dtype taken from a
// numpy array (or anything with the buffer protocol) or a torch tensor
// (data_ptr), without a copy. It keeps the Python object alive, so a
// non-blocking call can hold it until the operation completes. Arrays that are
// not contiguous, of a dtype quorum has no reduction for, or read-only where
// the call writes are refused with a QuorumError(INVALID_ARG) that names them.
#pragma once

#include <pybind11/pybind11.h>

#include <cstddef>
#include <string>

#include "quorum/quorum.h"

namespace quorum_py {

namespace py = pybind11;

// A failure the bindings detect (the C API was not called) or one it returned.
struct Failure {
  quorum_status_t status;
  std::string detail;
};
// Throws a Failure carrying status and quorum_last_error() unless s is OK.
void check(quorum_status_t s);
[[noreturn]] void fail(quorum_status_t s, std::string detail);

struct Buffer {
  py::object owner;  // the array or tensor (kept alive)
  void *data = nullptr;
  size_t count = 0;  // elements
  size_t itemsize = 0;
  bool typed = false;  // dtype holds a quorum dtype (false: raw bytes, e.g. uint8)
  quorum_dtype_t dtype = QUORUM_FLOAT32;
  std::string type_name;  // for messages: "float32", "uint8"...
  size_t bytes() const { return count * itemsize; }
};

enum class Access { Read, Write };

// what names the argument in error messages ("send", "recv"...).
Buffer view(const py::object &obj, Access access, const char *what);
// view() that also requires a dtype quorum can reduce.
Buffer typed_view(const py::object &obj, Access access, const char *what);

// The numpy dtype name of a quorum dtype ("float32"...), or "" for bfloat16.
const char *numpy_name(quorum_dtype_t dtype);
const char *dtype_name(quorum_dtype_t dtype);

}  // namespace quorum_py
