// buffers.cpp: numpy (buffer protocol) and torch (data_ptr) views; see buffers.hpp.
#include "buffers.hpp"

#include <cstdint>
#include <utility>

namespace quorum_py {

void fail(quorum_status_t s, std::string detail) {
  throw Failure{s, std::move(detail)};
}

void check(quorum_status_t s) {
  if (s != QUORUM_OK) fail(s, quorum_last_error());
}

const char *dtype_name(quorum_dtype_t dtype) {
  switch (dtype) {
    case QUORUM_FLOAT32:
      return "float32";
    case QUORUM_FLOAT64:
      return "float64";
    case QUORUM_FLOAT16:
      return "float16";
    case QUORUM_BFLOAT16:
      return "bfloat16";
    case QUORUM_INT32:
      return "int32";
    case QUORUM_INT64:
      return "int64";
  }
  return "unknown";
}

const char *numpy_name(quorum_dtype_t dtype) {
  return dtype == QUORUM_BFLOAT16 ? "" : dtype_name(dtype);
}

namespace {

// torch, once something imported it (the bindings never import it themselves).
struct Torch {
  py::object tensor_type;
  py::dict dtypes;  // torch.dtype -> quorum_dtype_t
  bool ready = false;
};

Torch *torch_module() {
  static Torch *t = new Torch();  // leaked: lives as long as the interpreter
  if (t->ready) return t;
  py::dict modules = py::module_::import("sys").attr("modules");
  if (!modules.contains("torch")) return nullptr;
  py::object torch = modules["torch"];
  if (!py::hasattr(torch, "Tensor")) return nullptr;  // torch is still being imported
  t->tensor_type = torch.attr("Tensor");
  const std::pair<const char *, quorum_dtype_t> names[] = {
      {"float32", QUORUM_FLOAT32},   {"float64", QUORUM_FLOAT64}, {"float16", QUORUM_FLOAT16},
      {"bfloat16", QUORUM_BFLOAT16}, {"int32", QUORUM_INT32},     {"int64", QUORUM_INT64}};
  for (auto &[name, dtype] : names) t->dtypes[torch.attr(name)] = py::int_(int(dtype));
  t->ready = true;
  return t;
}

Buffer torch_view(Torch *torch, const py::object &t, const char *what) {
  Buffer b;
  b.owner = t;
  py::object dtype = t.attr("dtype");
  b.type_name = py::str(dtype).cast<std::string>();
  if (b.type_name.rfind("torch.", 0) == 0) b.type_name = b.type_name.substr(6);
  if (torch->dtypes.contains(dtype)) {
    b.typed = true;
    b.dtype = static_cast<quorum_dtype_t>(torch->dtypes[dtype].cast<int>());
  }
  if (!t.attr("is_contiguous")().cast<bool>())
    fail(QUORUM_ERR_INVALID_ARG,
         std::string(what) + ": the tensor is not contiguous (call .contiguous())");
  if (t.attr("is_sparse").cast<bool>())
    fail(QUORUM_ERR_INVALID_ARG, std::string(what) + ": sparse tensors are not supported");
  const std::string device = py::str(t.attr("device").attr("type")).cast<std::string>();
  if (device != "cpu" && device != "cuda")
    fail(QUORUM_ERR_INVALID_ARG,
         std::string(what) + ": a tensor on '" + device + "' (expected cpu or cuda memory)");
  b.count = t.attr("numel")().cast<size_t>();
  b.itemsize = t.attr("element_size")().cast<size_t>();
  b.data = reinterpret_cast<void *>(t.attr("data_ptr")().cast<uintptr_t>());
  return b;
}

bool dtype_of_format(const py::buffer_info &info, quorum_dtype_t *dtype) {
  const std::string &f = info.format;
  const char code = f.empty() ? '?' : f.back();  // strip byte-order prefixes ('<', '=', '@')
  if (f.size() > 2 || (f.size() == 2 && f[0] != '<' && f[0] != '=' && f[0] != '@')) return false;
  switch (code) {
    case 'f':
      *dtype = QUORUM_FLOAT32;
      return info.itemsize == 4;
    case 'd':
      *dtype = QUORUM_FLOAT64;
      return info.itemsize == 8;
    case 'e':
      *dtype = QUORUM_FLOAT16;
      return info.itemsize == 2;
    case 'i':
    case 'l':
    case 'q':
      if (info.itemsize == 4)
        *dtype = QUORUM_INT32;
      else if (info.itemsize == 8)
        *dtype = QUORUM_INT64;
      else
        return false;
      return true;
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
    if (info.shape[d] != 1 && info.strides[d] != expect)
      fail(QUORUM_ERR_INVALID_ARG, std::string(what) +
                                       ": the array is not C-contiguous (use "
                                       "numpy.ascontiguousarray)");
    expect *= info.shape[d];
  }
  b.data = info.ptr;
  b.count = static_cast<size_t>(info.size);
  b.itemsize = static_cast<size_t>(info.itemsize);
  b.typed = dtype_of_format(info, &b.dtype);
  b.type_name = b.typed ? dtype_name(b.dtype) : "format '" + info.format + "'";
  if (py::hasattr(obj, "dtype")) b.type_name = py::str(obj.attr("dtype")).cast<std::string>();
  return b;
}

}  // namespace

Buffer view(const py::object &obj, Access access, const char *what) {
  if (Torch *torch = torch_module(); torch && py::isinstance(obj, torch->tensor_type))
    return torch_view(torch, obj, what);
  if (!PyObject_CheckBuffer(obj.ptr()))
    fail(QUORUM_ERR_INVALID_ARG,
         std::string(what) + ": expected a numpy array, a torch tensor or a buffer, got " +
             py::str(py::type::of(obj).attr("__name__")).cast<std::string>());
  return buffer_view(obj, access, what);
}

Buffer typed_view(const py::object &obj, Access access, const char *what) {
  Buffer b = view(obj, access, what);
  if (!b.typed)
    fail(QUORUM_ERR_INVALID_ARG, std::string(what) + ": dtype " + b.type_name +
                                     " has no reduction (expected float32, float64, "
                                     "float16, bfloat16, int32 or int64)");
  return b;
}

}  // namespace quorum_py
