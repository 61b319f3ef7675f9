// dlpack_view.cpp: consuming a DLPack capsule into a Buffer (dlpack_view.hpp).
//
// The capsule is renamed "used_dltensor" as soon as its tensor is taken, and
// the tensor's deleter runs (with the GIL) when the Buffer's last copy is
// destroyed: at the end of a blocking call, or once a Request completed. Host
// memory (CPU or pinned) is always accepted; CUDA memory only in a build with
// CUDA, where the C API takes device pointers (calls that are host-only
// refuse them with QUORUM_ERR_UNSUPPORTED). CUDA tensors are read without any
// stream synchronisation: the caller makes the producing stream finish first.
#include "dlpack_view.hpp"

#include <Python.h>

#include <string>

#include "dlpack_abi.hpp"

namespace quorum_py {
namespace {

// The DLPack type code and width of a quorum dtype.
DLDataType dlpack_type(quorum_dtype_t dtype) {
  DLDataTypeCode code = kDLFloat;
  switch (dtype) {
    case QUORUM_FLOAT32:
    case QUORUM_FLOAT64:
    case QUORUM_FLOAT16:
      code = kDLFloat;
      break;
    case QUORUM_BFLOAT16:
      code = kDLBfloat;
      break;
    case QUORUM_INT32:
    case QUORUM_INT64:
      code = kDLInt;
      break;
  }
  return {code, static_cast<uint8_t>(8 * quorum_dtype_size(dtype)), 1};
}

bool dtype_of_dlpack(DLDataType t, quorum_dtype_t *out) {
  for (quorum_dtype_t d : all_dtypes()) {
    const DLDataType want = dlpack_type(d);
    if (t.code == want.code && t.bits == want.bits && t.lanes == want.lanes) {
      *out = d;
      return true;
    }
  }
  return false;
}

std::string dlpack_type_name(DLDataType t) {
  const char *kind = "type";
  switch (t.code) {
    case kDLInt:
      kind = "int";
      break;
    case kDLUInt:
      kind = "uint";
      break;
    case kDLFloat:
      kind = "float";
      break;
    case kDLBfloat:
      kind = "bfloat";
      break;
    case kDLComplex:
      kind = "complex";
      break;
    case kDLBool:
      kind = "bool";
      break;
    default:
      break;
  }
  std::string name = kind + std::to_string(t.bits);
  if (t.lanes != 1) name += "x" + std::to_string(t.lanes);
  return name;
}

void delete_exported(void *p) {
  auto *m = static_cast<DLManagedTensor *>(p);
  if (m->deleter) {
    py::gil_scoped_acquire gil;  // producers' deleters release Python objects
    m->deleter(m);
  }
}

std::string shape_text(const DLTensor &t) {
  std::string s = "(";
  for (int32_t d = 0; d < t.ndim; ++d) {
    if (d) s += ", ";
    s += std::to_string(t.shape[d]);
  }
  return s + (t.ndim == 1 ? ",)" : ")");
}

// Compact row-major: strides (in elements) descend from the last dimension;
// a dimension of extent 1 may have any stride.
bool c_contiguous(const DLTensor &t) {
  if (!t.strides) return true;
  int64_t expect = 1;
  for (int32_t d = t.ndim - 1; d >= 0; --d) {
    if (t.shape[d] != 1 && t.strides[d] != expect) return false;
    expect *= t.shape[d];
  }
  return true;
}

// Refuses devices this build cannot pass to the C API, before anything is exported.
void check_device(const py::object &obj, const char *what) {
  int type = 0;
  try {
    py::tuple dev = obj.attr("__dlpack_device__")();
    type = dev[0].cast<int>();
  } catch (std::exception &e) {  // a Python exception or a result of another shape
    fail(QUORUM_ERR_INVALID_ARG, std::string(what) +
                                     ": __dlpack_device__ gave no (device type, id) pair (" +
                                     e.what() + ")");
  }
  switch (type) {
    case kDLCPU:
    case kDLCUDAHost:
      return;
    case kDLCUDA:
    case kDLCUDAManaged:
#ifdef QUORUM_HAVE_CUDA
      return;
#else
      fail(QUORUM_ERR_INVALID_ARG, std::string(what) +
                                       ": CUDA memory, but this quorum was built without CUDA "
                                       "(copy it to the CPU with .cpu())");
#endif
    default:
      fail(QUORUM_ERR_INVALID_ARG, std::string(what) + ": memory on DLPack device type " +
                                       std::to_string(type) + " (expected CPU or CUDA memory)");
  }
}

}  // namespace

bool has_dlpack(const py::object &obj) {
  return py::hasattr(obj, "__dlpack__") && py::hasattr(obj, "__dlpack_device__");
}

bool dlpack_view(const py::object &obj, const char *what, Buffer *out) {
  check_device(obj, what);
  py::object capsule;
  try {
    capsule = obj.attr("__dlpack__")();
  } catch (py::error_already_set &e) {
    if (PyObject_CheckBuffer(obj.ptr())) return false;
    const std::string name = dtype_attr_name(obj);
    fail(QUORUM_ERR_INVALID_ARG, std::string(what) + ": DLPack cannot export this " +
                                     (name.empty() ? std::string("object") : name + " array") +
                                     " (" + py::str(e.type().attr("__name__")).cast<std::string>() +
                                     ": " + py::str(e.value()).cast<std::string>() + ")");
  }
  auto *m = static_cast<DLManagedTensor *>(PyCapsule_GetPointer(capsule.ptr(), kDLTensorCapsule));
  if (!m) {
    PyErr_Clear();
    fail(QUORUM_ERR_INVALID_ARG,
         std::string(what) + ": __dlpack__ returned no \"dltensor\" capsule (a used one?)");
  }
  // From here the tensor is ours: the capsule's destructor leaves it alone.
  if (PyCapsule_SetName(capsule.ptr(), kUsedDLTensorCapsule) != 0) {
    PyErr_Clear();
    fail(QUORUM_ERR_INTERNAL, std::string(what) + ": cannot mark the DLPack capsule used");
  }
  Buffer b;
  b.owner = obj;
  b.exported = std::shared_ptr<void>(m, delete_exported);
  const DLTensor &t = m->dl_tensor;
  b.type_name = dtype_attr_name(obj);
  if (b.type_name.empty()) b.type_name = dlpack_type_name(t.dtype);
  if (t.dtype.lanes != 1 || t.dtype.bits == 0 || t.dtype.bits % 8 != 0)
    fail(QUORUM_ERR_INVALID_ARG, std::string(what) + ": elements of type " +
                                     dlpack_type_name(t.dtype) +
                                     " (expected whole bytes, one lane)");
  if (t.ndim < 0 || (t.ndim > 0 && !t.shape))
    fail(QUORUM_ERR_INVALID_ARG, std::string(what) + ": a DLPack tensor without a shape");
  size_t count = 1;
  for (int32_t d = 0; d < t.ndim; ++d) {
    if (t.shape[d] < 0)
      fail(QUORUM_ERR_INVALID_ARG, std::string(what) + ": a negative extent in the shape");
    count *= static_cast<size_t>(t.shape[d]);
  }
  if (count > 0 && !c_contiguous(t))
    fail(QUORUM_ERR_INVALID_ARG,
         std::string(what) + ": the array of shape " + shape_text(t) +
             " is not contiguous (not C-contiguous: copy it with .contiguous() or "
             "numpy.ascontiguousarray)");
  b.count = count;
  b.itemsize = t.dtype.bits / 8;
  b.data = static_cast<char *>(t.data) + t.byte_offset;
  b.typed = dtype_of_dlpack(t.dtype, &b.dtype);
  *out = std::move(b);
  return true;
}

}  // namespace quorum_py
