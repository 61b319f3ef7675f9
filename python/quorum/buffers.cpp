// buffers.cpp: views of arrays, through DLPack (dlpack_view.cpp) or the buffer
// protocol; see buffers.hpp. Dtype names and sizes come from the C API.
#include "buffers.hpp"

#include <cstdint>
#include <utility>

#include "dlpack_view.hpp"

namespace quorum_py {

void fail(quorum_status_t s, std::string detail) {
  throw Failure{s, std::move(detail)};
}

void check(quorum_status_t s) {
  if (s != QUORUM_OK) fail(s, quorum_last_error());
}

const std::vector<quorum_dtype_t> &all_dtypes() {
  static const std::vector<quorum_dtype_t> dtypes = [] {
    std::vector<quorum_dtype_t> v;
    for (int d = 0; quorum_dtype_size(static_cast<quorum_dtype_t>(d)) != 0; ++d)
      v.push_back(static_cast<quorum_dtype_t>(d));
    return v;
  }();
  return dtypes;
}

std::string dtype_list() {
  std::string s;
  const auto &all = all_dtypes();
  for (size_t i = 0; i < all.size(); ++i) {
    if (i) s += i + 1 == all.size() ? " or " : ", ";
    s += quorum_dtype_name(all[i]);
  }
  return s;
}

const char *numpy_name(quorum_dtype_t dtype) {
  return dtype == QUORUM_BFLOAT16 ? "" : quorum_dtype_name(dtype);
}

std::string dtype_attr_name(const py::object &obj) {
  if (!py::hasattr(obj, "dtype")) return "";
  std::string name = py::str(obj.attr("dtype")).cast<std::string>();
  if (name.rfind("torch.", 0) == 0) name = name.substr(6);
  return name;
}

namespace {

// The quorum dtype of a buffer-protocol format: one type code, optionally
// after a native byte-order prefix.
bool dtype_of_format(const py::buffer_info &info, quorum_dtype_t *dtype) {
  const std::string &f = info.format;
  if (f.empty() || f.size() > 2 || (f.size() == 2 && f[0] != '=' && f[0] != '@' && f[0] != '<'))
    return false;
  switch (f.back()) {
    case 'f':
    case 'd':
    case 'e':
      for (quorum_dtype_t d : {QUORUM_FLOAT16, QUORUM_FLOAT32, QUORUM_FLOAT64})
        if (quorum_dtype_size(d) == size_t(info.itemsize)) return *dtype = d, true;
      return false;
    case 'i':
    case 'l':
    case 'q':
      for (quorum_dtype_t d : {QUORUM_INT32, QUORUM_INT64})
        if (quorum_dtype_size(d) == size_t(info.itemsize)) return *dtype = d, true;
      return false;
    default:
      return false;
  }
}

Buffer buffer_view(const py::object &obj, Access access, const char *what) {
  Buffer b;
  b.owner = obj;
  py::buffer_info info;
  try {
    info = py::reinterpret_borrow<py::buffer>(obj).request(access == Access::Write);
  } catch (py::error_already_set &e) {
    fail(QUORUM_ERR_INVALID_ARG,
         std::string(what) + ": " +
             (access == Access::Write ? "not a writable array (" : "not an array (") + e.what() +
             ")");
  }
  // C-contiguous: strides descend from the last dimension.
  py::ssize_t expect = info.itemsize;
  for (py::ssize_t d = info.ndim - 1; d >= 0; --d) {
    if (info.shape[d] != 1 && info.strides[d] != expect && info.size > 0)
      fail(QUORUM_ERR_INVALID_ARG, std::string(what) +
                                       ": the array is not contiguous (not C-contiguous: use "
                                       "numpy.ascontiguousarray)");
    expect *= info.shape[d];
  }
  b.data = info.ptr;
  b.count = static_cast<size_t>(info.size);
  b.itemsize = static_cast<size_t>(info.itemsize);
  b.typed = dtype_of_format(info, &b.dtype);
  b.type_name = dtype_attr_name(obj);
  if (b.type_name.empty())
    b.type_name = b.typed ? quorum_dtype_name(b.dtype) : "format '" + info.format + "'";
  return b;
}

}  // namespace

Buffer view(const py::object &obj, Access access, const char *what) {
  Buffer b;
  if (has_dlpack(obj) && dlpack_view(obj, what, &b)) return b;
  if (!PyObject_CheckBuffer(obj.ptr()))
    fail(QUORUM_ERR_INVALID_ARG,
         std::string(what) +
             ": expected a numpy array, a torch tensor, an object with "
             "__dlpack__ or a buffer, got " +
             py::str(py::type::of(obj).attr("__name__")).cast<std::string>());
  return buffer_view(obj, access, what);
}

Buffer typed_view(const py::object &obj, Access access, const char *what) {
  Buffer b = view(obj, access, what);
  if (!b.typed)
    fail(QUORUM_ERR_INVALID_ARG, std::string(what) + ": dtype " + b.type_name +
                                     " has no reduction (expected " + dtype_list() + ")");
  return b;
}

}  // namespace quorum_py
