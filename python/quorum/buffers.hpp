// buffers.hpp: views of the arrays the Python bindings hand to the C API.
//
// A Buffer is a pointer, an element count and a quorum dtype taken, without a
// copy, from any object that offers DLPack (__dlpack__: torch tensors, numpy
// arrays; dlpack_view.cpp) or else the buffer protocol (array.array,
// bytearray, numpy arrays DLPack cannot export: read-only, bool, non-native
// byte order). It keeps the Python object and the consumed DLPack tensor
// alive, so a non-blocking call can hold it until the operation completes.
// Arrays that are not contiguous, of a dtype quorum has no reduction for, on a
// device this build cannot reach, or read-only where the call writes are
// refused with a QuorumError(INVALID_ARG) that names them.
#pragma once

#include <pybind11/pybind11.h>

#include <cstddef>
#include <memory>
#include <string>
#include <vector>

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
  // The consumed DLManagedTensor: its deleter runs when the last copy goes.
  std::shared_ptr<void> exported;
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

// Every dtype of the C API, in enum order (from quorum_dtype_size).
const std::vector<quorum_dtype_t> &all_dtypes();
// "float32, float64, ..., int64": the dtypes, for messages.
std::string dtype_list();
// The numpy dtype name of a quorum dtype ("float32"...), or "" for bfloat16.
const char *numpy_name(quorum_dtype_t dtype);

// The name of obj's dtype attribute without a "torch." prefix, or "".
std::string dtype_attr_name(const py::object &obj);

}  // namespace quorum_py
