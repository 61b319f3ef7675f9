// host_exec.hpp: an executor that runs the cuda backend's algorithms on the CPU.
//
// KernelBackend<HostExec> is the cuda backend with its device replaced by plain
// loops (each functor called for every index, in order) and cblas_sgemm in
// column-major, the convention of cublasSgemm. It checks the index arithmetic,
// chunking and GEMM arguments of the cuda backend on machines without a GPU.
#pragma once

#include <cblas.h>

#include <cstdlib>
#include <cstring>
#include <string>

#include "runtime/status.hpp"
#include "trainer/cuda/kernel_backend.hpp"

namespace quorum::trainer::kernels {

class HostExec {
 public:
  MemoryKind memory_kind() const { return MemoryKind::Host; }
  bool ok() const { return error_ == kOk; }
  Status error() const { return error_; }
  const std::string &message() const { return message_; }
  void set_context(const OpContext &c) { context_ = c; }
  void fail(Status s, const std::string &what) {
    if (!ok()) return;
    error_ = s;
    message_ = "emulated cuda backend: " + context_.describe() + ": " + what;
    fail_message(s, "trainer", message_);
  }

  void *alloc(size_t bytes) {
    if (bytes > (size_t(1) << 40)) return nullptr;  // the "device" is small
    const size_t rounded = (bytes + 255) / 256 * 256;
    void *p = std::aligned_alloc(256, rounded);
    if (p != nullptr) std::memset(p, 0, rounded);
    return p;
  }
  void free(void *p) { std::free(p); }
  void to_device(void *dst, const void *src, size_t n) { std::memcpy(dst, src, n); }
  void to_host(void *dst, const void *src, size_t n) { std::memcpy(dst, src, n); }
  void device_copy(void *dst, const void *src, size_t n) { std::memcpy(dst, src, n); }
  void zero(void *dst, size_t n) { std::memset(dst, 0, n); }
  void sync() {}

  template <class F>
  void each(size_t n, const F &f) {
    if (!ok()) return;
    for (size_t i = 0; i < n; ++i) f(i);
  }
  template <class F, class T>
  void reduce_rows(int rows, size_t cols, const F &f, T *out) {
    if (!ok()) return;
    for (int r = 0; r < rows; ++r) {
      double acc = 0;
      for (size_t c = 0; c < cols; ++c) acc += f(size_t(r), c);
      out[r] = T(acc);
    }
  }
  void gemm(const Gemm &g) {
    if (!ok()) return;
    ++gemms_;
    cblas_sgemm(CblasColMajor, g.trans_a ? CblasTrans : CblasNoTrans,
                g.trans_b ? CblasTrans : CblasNoTrans, g.m, g.n, g.k, g.alpha, g.a, g.lda, g.b,
                g.ldb, g.beta, g.c, g.ldc);
  }
  int gemms() const { return gemms_; }

 private:
  Status error_ = kOk;
  std::string message_;
  OpContext context_;
  int gemms_ = 0;
};

}  // namespace quorum::trainer::kernels
