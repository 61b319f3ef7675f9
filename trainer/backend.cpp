// backend.cpp: the backend factory (one place that knows every backend).
#include <fmt/format.h>

#include "trainer/backend.hpp"
#include "trainer/cpu_backend.hpp"
#include "trainer/cuda/cuda_backend.hpp"
#include "trainer/ref_backend.hpp"

namespace quorum::trainer {

Status make_backend(const std::string &name, const BackendOptions &options,
                    std::unique_ptr<Backend> *out) {
  if (name == "ref") {
    *out = std::make_unique<RefBackend<float>>();
  } else if (name == "cpu") {
    *out = make_cpu_backend(options);
  } else if (name == "cuda") {
    return make_cuda_backend(options, out);
  } else {
    return fail(QUORUM_ERR_INVALID_ARG, "trainer", "unknown backend '{}' (known: ref, cpu, cuda)",
                name);
  }
  return kOk;
}

std::unique_ptr<BackendT<double>> make_ref_backend_double() {
  return std::make_unique<RefBackend<double>>();
}

}  // namespace quorum::trainer
