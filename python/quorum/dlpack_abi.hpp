// dlpack_abi.hpp: the structs of the DLPack exchange ABI that the bindings
// consume (DLPack 0.8, dlpack.h of github.com/dmlc/dlpack; the layout has been
// stable since 0.3). Debian ships no dlpack.h, so the few stable declarations
// are repeated here, under DLPack's own names, rather than taken from a
// framework's private copy.
//
// A producer's __dlpack__() returns a PyCapsule named "dltensor" holding a
// DLManagedTensor. The consumer renames the capsule "used_dltensor" and then
// owns the tensor: it calls deleter(self) once it no longer needs the memory
// (the capsule's destructor frees only tensors nobody consumed).
#pragma once

#include <cstdint>

extern "C" {

enum DLDeviceType : int32_t {
  kDLCPU = 1,
  kDLCUDA = 2,
  kDLCUDAHost = 3,  // pinned host memory
  kDLOpenCL = 4,
  kDLVulkan = 7,
  kDLMetal = 8,
  kDLVPI = 9,
  kDLROCM = 10,
  kDLROCMHost = 11,
  kDLExtDev = 12,
  kDLCUDAManaged = 13,
  kDLOneAPI = 14,
};

struct DLDevice {
  DLDeviceType device_type;
  int32_t device_id;
};

enum DLDataTypeCode : uint8_t {
  kDLInt = 0,
  kDLUInt = 1,
  kDLFloat = 2,
  kDLOpaqueHandle = 3,
  kDLBfloat = 4,
  kDLComplex = 5,
  kDLBool = 6,
};

struct DLDataType {
  uint8_t code;  // a DLDataTypeCode
  uint8_t bits;
  uint16_t lanes;
};

struct DLTensor {
  void *data;
  DLDevice device;
  int32_t ndim;
  DLDataType dtype;
  int64_t *shape;
  int64_t *strides;  // in elements; NULL: compact row-major
  uint64_t byte_offset;
};

struct DLManagedTensor {
  DLTensor dl_tensor;
  void *manager_ctx;
  void (*deleter)(DLManagedTensor *self);
};

}  // extern "C"

namespace quorum_py {
inline constexpr const char *kDLTensorCapsule = "dltensor";
inline constexpr const char *kUsedDLTensorCapsule = "used_dltensor";
}  // namespace quorum_py
