// bootstrap_select.cpp: picks the bootstrap of a process from its environment
// (QUORUM_BOOTSTRAP=auto|pmix|store|single).
#include <atomic>
#include <cstdlib>

#include "runtime/bootstrap/bootstrap.hpp"
#include "runtime/bootstrap/store_bootstrap.hpp"
#include "runtime/knobs.hpp"
#include "runtime/log.hpp"
#ifdef QUORUM_HAVE_PMIX
#include "runtime/bootstrap/pmix_bootstrap.hpp"
#endif

namespace quorum {

Knob<std::string> knob_bootstrap("QUORUM_BOOTSTRAP", "auto",
                                 "How a process finds its rank, size and peers: auto tries pmix "
                                 "(if PMIX_RANK/PMIX_NAMESPACE are set), then store (if "
                                 "QUORUM_RANK is set), then single",
                                 {"auto", "pmix", "store", "single"});

namespace {

Status try_pmix(bool required, std::unique_ptr<Bootstrap> *out) {
#ifdef QUORUM_HAVE_PMIX
  return make_pmix_bootstrap(required, out);
#else
  (void)out;
  if (required) {
    return fail(QUORUM_ERR_UNSUPPORTED, "bootstrap",
                "QUORUM_BOOTSTRAP=pmix but this build has no PMIx support");
  }
  return kOk;
#endif
}

Status store(std::unique_ptr<Bootstrap> *out) {
  // Each bootstrap of this process gets its own key space in the job's store.
  // Bootstraps are created collectively (in the same order on every rank),
  // so the k-th one of every rank shares the prefix "b<k>/".
  static std::atomic<int> instances{0};
  StoreBootstrapParams params;
  QUORUM_CHECK(store_params_from_environment(&params));
  params.key_prefix = fmt::format("b{}/", instances.fetch_add(1));
  return make_store_bootstrap(params, out);
}

// The value of a numeric environment variable, or 0.
long env_count(const char *name) {
  const char *v = std::getenv(name);
  if (v == nullptr) return 0;
  char *end = nullptr;
  const long n = std::strtol(v, &end, 10);
  return end != v ? n : 0;
}

// A launcher started several tasks but gave them no way to find each other
// (srun --mpi=none, an mpirun without PMIx, a PMI-1 launcher): each would run
// alone as rank 0 of 1 and compute the wrong thing. QUORUM_BOOTSTRAP=single
// still forces it. srun's SLURM_STEP_NUM_TASKS describes this process's step;
// a batch script's SLURM_NTASKS describes the allocation and is not read.
Status refuse_launched_singletons() {
  for (const char *name : {"SLURM_STEP_NUM_TASKS", "OMPI_COMM_WORLD_SIZE", "PMI_SIZE"}) {
    const long tasks = env_count(name);
    if (tasks <= 1) continue;
    return fail(QUORUM_ERR_BOOTSTRAP, "bootstrap",
                "{}={}: this process is one of {} tasks, but quorum found no launcher to join "
                "them (no PMIx, no quorum-run): each would run alone as rank 0 of 1. Launch with "
                "`srun --mpi=pmix`, an mpirun with PMIx, or quorum-run; QUORUM_BOOTSTRAP=single "
                "forces independent single-rank runs",
                name, tasks, tasks);
  }
  return kOk;
}

Status choose(const std::string &mode, std::unique_ptr<Bootstrap> *out) {
  if (mode == "pmix") return try_pmix(true, out);
  if (mode == "store") return store(out);
  if (mode == "single") {
    *out = make_single_bootstrap();
    return kOk;
  }
  // auto: PMIx only when a launcher said so, so that singleton runs stay fast.
  if (std::getenv("PMIX_RANK") != nullptr || std::getenv("PMIX_NAMESPACE") != nullptr) {
    QUORUM_CHECK(try_pmix(false, out));
    if (*out) return kOk;
  }
  if (std::getenv("QUORUM_RANK") != nullptr) return store(out);
  QUORUM_CHECK(refuse_launched_singletons());
  *out = make_single_bootstrap();
  return kOk;
}

}  // namespace

Status bootstrap_from_environment(std::unique_ptr<Bootstrap> *out) {
  if (out == nullptr) return fail(QUORUM_ERR_INVALID_ARG, "bootstrap", "output pointer is NULL");
  if (std::string e = knob_bootstrap.error(); !e.empty()) {
    return fail(QUORUM_ERR_INVALID_ARG, "bootstrap", "{}", e);
  }
  const std::string mode = knob_bootstrap.get();
  std::unique_ptr<Bootstrap> b;
  QUORUM_CHECK(choose(mode, &b));
  set_log_rank_default(b->rank());
  QLOG_INFO("bootstrap", "bootstrap '{}' (QUORUM_BOOTSTRAP={}): rank {} of {}", b->name(), mode,
            b->rank(), b->size());
  *out = std::move(b);
  return kOk;
}

}  // namespace quorum
