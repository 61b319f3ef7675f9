// cuda_backend.cpp: the device executor of the cuda backend (memory, stream,
// cuBLAS, error checks) and the factory; see cuda_backend.hpp.
#include "trainer/cuda/cuda_backend.hpp"

#include <cublas_v2.h>
#include <cuda_runtime_api.h>
#include <fmt/format.h>

#include <cstdio>
#include <cstdlib>

#include "runtime/knobs.hpp"
#include "runtime/log.hpp"
#include "trainer/cuda/cuda_kernels.hpp"
#include "trainer/cuda/kernel_backend.hpp"

namespace quorum::trainer {

Knob<std::string> knob_cuda_on_error(
    "QUORUM_CUDA_ON_ERROR", "exit",
    "what the cuda trainer backend does after a CUDA/cuBLAS error: exit (status 1) or continue "
    "(the error is sticky: later calls do nothing, losses read NaN)",
    {"exit", "continue"});
Knob<int64_t> knob_cuda_workspace_mb("QUORUM_CUDA_WORKSPACE_MB", 256,
                                     "cuda trainer backend: im2col workspace budget in MiB "
                                     "(convolutions run in chunks of images that fit)");
Knob<bool> knob_cuda_tf32("QUORUM_CUDA_TF32", false,
                          "cuda trainer backend: let cuBLAS use TF32 tensor cores for the "
                          "float GEMMs (faster, about 3 fewer significant digits)");

namespace {

using kernels::Gemm;
using kernels::OpContext;

class CudaExec {
 public:
  explicit CudaExec(int device) : device_(device) {}
  ~CudaExec() {
    // Best effort: after a device fault these calls fail too; nothing to report.
    if (stream_ != nullptr) cudaStreamSynchronize(stream_);
    if (partials_ != nullptr) cudaFree(partials_);
    if (blas_ != nullptr) cublasDestroy(blas_);
    if (stream_ != nullptr) cudaStreamDestroy(stream_);
    (void)cudaGetLastError();
  }
  CudaExec(const CudaExec &) = delete;
  CudaExec &operator=(const CudaExec &) = delete;

  // Selects the device and creates the stream and the cuBLAS handle. The stream
  // is a blocking one: it orders itself with the legacy default stream, where
  // other code (the collectives' host staging uses cudaMemcpy) copies gradients
  // in and out, so their copies and this backend's kernels never overlap.
  Status open() {
    context_.op = "create";
    exit_on_error_ = false;  // a failed creation is returned, not fatal
    const bool ok = check(cudaSetDevice(device_), "cudaSetDevice") &&
                    check(cudaStreamCreateWithFlags(&stream_, cudaStreamDefault),
                          "cudaStreamCreateWithFlags") &&
                    check(cublasCreate(&blas_), "cublasCreate") &&
                    check(cublasSetStream(blas_, stream_), "cublasSetStream") &&
                    check(cublasSetMathMode(blas_, knob_cuda_tf32.get() ? CUBLAS_TF32_TENSOR_OP_MATH
                                                                        : CUBLAS_DEFAULT_MATH),
                          "cublasSetMathMode");
    exit_on_error_ = knob_cuda_on_error.get() == "exit";
    return ok ? kOk : error_;
  }

  MemoryKind memory_kind() const { return MemoryKind::Cuda; }
  bool ok() const { return error_ == kOk; }
  Status error() const { return error_; }
  void set_context(const OpContext &c) { context_ = c; }

  void fail(Status s, const std::string &what) {
    if (!ok()) return;
    error_ = s;
    fail_message(
        s, "trainer",
        fmt::format("cuda backend (device {}): {}: {}", device_, context_.describe(), what));
    if (exit_on_error_) {
      std::fprintf(stderr,
                   "quorum: the cuda backend cannot continue after this error: %s\n"
                   "quorum: exiting (QUORUM_CUDA_ON_ERROR=exit)\n",
                   last_error());
      std::exit(EXIT_FAILURE);
    }
  }

  void *alloc(size_t bytes) {
    void *p = nullptr;
    const cudaError_t e = cudaMalloc(&p, bytes);
    if (e == cudaErrorMemoryAllocation) {
      // Not sticky: the caller gets nullptr and decides.
      (void)cudaGetLastError();
      fail_message(QUORUM_ERR_NO_MEMORY, "trainer",
                   fmt::format("cuda backend (device {}): {}: cudaMalloc: {}", device_,
                               context_.describe(), cudaGetErrorString(e)));
      return nullptr;
    }
    if (!check(e, "cudaMalloc")) return nullptr;
    if (!check(cudaMemsetAsync(p, 0, bytes, stream_), "cudaMemsetAsync")) {
      cudaFree(p);
      return nullptr;
    }
    return p;
  }
  void free(void *p) {
    // cudaFree waits for the device; the stream may still use p otherwise.
    const cudaError_t e = cudaFree(p);
    if (ok()) check(e, "cudaFree");
  }
  void to_device(void *dst, const void *src, size_t n) {
    // Synchronous like the host backends: the caller may reuse src at once.
    if (ok() && check(cudaMemcpyAsync(dst, src, n, cudaMemcpyHostToDevice, stream_),
                      "cudaMemcpyAsync(host to device)"))
      sync_checked("cudaStreamSynchronize after a copy to the device");
  }
  void to_host(void *dst, const void *src, size_t n) {
    if (ok() && check(cudaMemcpyAsync(dst, src, n, cudaMemcpyDeviceToHost, stream_),
                      "cudaMemcpyAsync(device to host)"))
      sync_checked("cudaStreamSynchronize after a copy to the host");
  }
  void device_copy(void *dst, const void *src, size_t n) {
    if (ok())
      check(cudaMemcpyAsync(dst, src, n, cudaMemcpyDeviceToDevice, stream_),
            "cudaMemcpyAsync(device to device)");
  }
  void zero(void *dst, size_t n) {
    if (ok()) check(cudaMemsetAsync(dst, 0, n, stream_), "cudaMemsetAsync");
  }
  void sync() { sync_checked("cudaStreamSynchronize"); }

  template <class F>
  void each(size_t n, const F &f) {
    if (ok()) check(kernels::launch_each(stream_, n, f), F::kName, "kernel launch");
  }
  template <class F, class T>
  void reduce_rows(int rows, size_t cols, const F &f, T *out) {
    if (!ok()) return;
    const size_t need = size_t(rows) * kernels::kReduceSplits;
    if (need > partials_count_) {
      if (partials_ != nullptr) cudaFree(partials_);
      partials_ = nullptr, partials_count_ = 0;
      if (!check(cudaMalloc(&partials_, need * sizeof(double)), "cudaMalloc(reduction partials)"))
        return;
      partials_count_ = need;
    }
    check(
        kernels::launch_reduce_rows(stream_, rows, cols, f, static_cast<double *>(partials_), out),
        F::kName, "reduction kernel launch");
  }
  void gemm(const Gemm &g) {
    if (!ok()) return;
    const cublasStatus_t s = cublasSgemm(blas_, g.trans_a ? CUBLAS_OP_T : CUBLAS_OP_N,
                                         g.trans_b ? CUBLAS_OP_T : CUBLAS_OP_N, g.m, g.n, g.k,
                                         &g.alpha, g.a, g.lda, g.b, g.ldb, &g.beta, g.c, g.ldc);
    if (s != CUBLAS_STATUS_SUCCESS)
      fail(QUORUM_ERR_INTERNAL,
           fmt::format("cublasSgemm(m {}, n {}, k {}, op {}{}, ld {} {} {}): {} ({})", g.m, g.n,
                       g.k, g.trans_a ? 'T' : 'N', g.trans_b ? 'T' : 'N', g.lda, g.ldb, g.ldc,
                       cublasGetStatusName(s), cublasGetStatusString(s)));
  }

 private:
  bool check(cudaError_t e, const char *call, const char *what = nullptr) {
    if (e == cudaSuccess) return true;
    (void)cudaGetLastError();  // clear it where it is not sticky
    fail(QUORUM_ERR_INTERNAL,
         what == nullptr
             ? fmt::format("{}: {} ({})", call, cudaGetErrorString(e), cudaGetErrorName(e))
             : fmt::format("{} {}: {} ({})", what, call, cudaGetErrorString(e),
                           cudaGetErrorName(e)));
    return false;
  }
  bool check(cublasStatus_t s, const char *call) {
    if (s == CUBLAS_STATUS_SUCCESS) return true;
    fail(QUORUM_ERR_INTERNAL,
         fmt::format("{}: {} ({})", call, cublasGetStatusName(s), cublasGetStatusString(s)));
    return false;
  }
  // Errors of earlier asynchronous work surface here, under the current call's name.
  void sync_checked(const char *call) {
    if (!ok()) return;
    const cudaError_t e = cudaStreamSynchronize(stream_);
    if (e == cudaSuccess) return;
    (void)cudaGetLastError();
    fail(QUORUM_ERR_INTERNAL, fmt::format("{}: {} ({}); the failing kernel may be an earlier call: "
                                          "run with CUDA_LAUNCH_BLOCKING=1 to find it",
                                          call, cudaGetErrorString(e), cudaGetErrorName(e)));
  }

  int device_;
  cudaStream_t stream_ = nullptr;
  cublasHandle_t blas_ = nullptr;
  void *partials_ = nullptr;
  size_t partials_count_ = 0;
  Status error_ = kOk;
  OpContext context_;
  bool exit_on_error_ = true;
};

using CudaBackend = kernels::KernelBackend<CudaExec>;

}  // namespace

int cuda_device_count(std::string *why) {
  int n = 0;
  const cudaError_t e = cudaGetDeviceCount(&n);
  if (e != cudaSuccess) {
    (void)cudaGetLastError();
    if (why != nullptr)
      *why = fmt::format("cudaGetDeviceCount: {} ({} = {})", cudaGetErrorString(e),
                         cudaGetErrorName(e), int(e));
    return 0;
  }
  if (n == 0 && why != nullptr) *why = "cudaGetDeviceCount: 0 devices";
  return n;
}

Status make_cuda_backend(const BackendOptions &options, std::unique_ptr<Backend> *out,
                         size_t workspace_bytes) {
  std::string why;
  const int count = cuda_device_count(&why);
  if (count <= 0) return fail(QUORUM_ERR_UNSUPPORTED, "trainer", "no CUDA device: {}", why);
  if (options.device < 0 || options.device >= count)
    return fail(QUORUM_ERR_INVALID_ARG, "trainer",
                "cuda backend: device {} requested, but {} device(s) present (0..{})",
                options.device, count, count - 1);
  auto exec = std::make_unique<CudaExec>(options.device);
  QUORUM_CHECK(exec->open());
  if (workspace_bytes == 0)
    workspace_bytes = size_t(std::max<int64_t>(1, knob_cuda_workspace_mb.get())) << 20;
  cudaDeviceProp prop{};
  if (cudaGetDeviceProperties(&prop, options.device) == cudaSuccess)
    QLOG_INFO("trainer", "cuda backend on device {}: {} (sm_{}{}, {} MiB)", options.device,
              prop.name, prop.major, prop.minor, prop.totalGlobalMem >> 20);
  (void)cudaGetLastError();
  *out = std::make_unique<CudaBackend>("cuda", std::move(exec), workspace_bytes);
  return kOk;
}

Status cuda_backend_error(Backend &backend) {
  auto *cuda = dynamic_cast<CudaBackend *>(&backend);
  return cuda == nullptr ? kOk : cuda->error();
}

}  // namespace quorum::trainer
