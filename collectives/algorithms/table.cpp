// table.cpp: the algorithm table and the default selection rule.
//
// Defaults: allreduce uses recursive doubling up to QUORUM_ALLREDUCE_SMALL_BYTES
// (latency: log2 P steps) and the pipelined ring above (bandwidth: 2(P-1)/P n
// bytes per rank). Where shared memory may carry the call (shm_usable: every
// rank a process of this host, host buffers), allreduce uses "shm" at every
// size unless QUORUM_ALLREDUCE_SHM_AUTO=0 (allreduce_uses_shm, shm/shm_use.cpp). On several hosts
// with the same number (> 1) of ranks each, allreduce from QUORUM_ALLREDUCE_LARGE_BYTES is
// hierarchical instead of the ring, and broadcast, barrier, allgather and reduce-scatter are
// hierarchical at every size (the latter two up to 4096 ranks, their tag steps); other layouts
// keep the flat rule (the choice's info line says why). Each collective's choice can be forced
// with its knob.
#include <atomic>
#include <cstring>

#include "collectives/algorithms/algorithms.hpp"
#include "collectives/patterns/hierarchy.hpp"
#include "collectives/reduce/reduce_kernels.hpp"
#include "collectives/shm/shm.hpp"
#include "runtime/knobs.hpp"
#include "runtime/log.hpp"

namespace quorum {

Knob<std::string> knob_allreduce_algo(
    "QUORUM_ALLREDUCE_ALGO", "auto",
    "Allreduce algorithm: auto, recursive_doubling, rabenseifner, ring, shm (shared memory; "
    "only when every rank is a process of this host, else the default rule applies) or "
    "hierarchical (within hosts, then across them; only on several hosts with the same number "
    "of ranks each, more than one, else the default rule applies)",
    {"auto", "recursive_doubling", "rabenseifner", "ring", "shm", "hierarchical"});
Knob<int64_t> knob_allreduce_small_bytes("QUORUM_ALLREDUCE_SMALL_BYTES", 32768,
                                         "Allreduce under auto: messages up to this size use "
                                         "recursive doubling");
Knob<int64_t> knob_allreduce_large_bytes("QUORUM_ALLREDUCE_LARGE_BYTES", 262144,
                                         "Allreduce under auto: messages from this size use the "
                                         "pipelined ring (hierarchical on several hosts with equal "
                                         "numbers of ranks); between the two thresholds "
                                         "Rabenseifner");
Knob<std::string> knob_bcast_algo(
    "QUORUM_BCAST_ALGO", "auto",
    "Broadcast algorithm: auto, binomial, scatter_allgather or hierarchical (across hosts, then "
    "within them; only on several hosts with the same number of ranks each, more than one, else "
    "the default rule applies)",
    {"auto", "binomial", "scatter_allgather", "hierarchical"});
Knob<int64_t> knob_bcast_large_bytes("QUORUM_BCAST_LARGE_BYTES", 1 << 20,
                                     "Broadcast under auto: messages from this size (on more "
                                     "than 2 ranks) use scatter + ring allgather");
Knob<std::string> knob_barrier_algo(
    "QUORUM_BARRIER_ALGO", "auto",
    "Barrier algorithm over messages: auto, dissemination or "
    "hierarchical (only on several hosts with the same number of "
    "ranks each, more than one, else the default rule applies); "
    "auto with QUORUM_SIGNATURE_CHECK on: the check's exchange alone",
    {"auto", "dissemination", "hierarchical"});
Knob<std::string> knob_allgather_algo(
    "QUORUM_ALLGATHER_ALGO", "auto",
    "Allgather algorithm: auto, ring or hierarchical (across hosts, then within them; only on "
    "several hosts with the same number of ranks each, more than one, else the default rule "
    "applies)",
    {"auto", "ring", "hierarchical"});
Knob<std::string> knob_reduce_scatter_algo(
    "QUORUM_REDUCE_SCATTER_ALGO", "auto",
    "Reduce-scatter algorithm: auto, ring or hierarchical (within hosts, then across them; only "
    "on several hosts with the same number of ranks each, more than one, else the default rule "
    "applies)",
    {"auto", "ring", "hierarchical"});

const std::vector<AlgorithmInfo> &algorithm_table() {
  static const std::vector<AlgorithmInfo> table = {
      {CollKind::Allreduce, "recursive_doubling",
       "log2(P) exchange steps of n bytes (+2 fold steps if P is not a power of two)",
       build_allreduce_recursive_doubling, AlgorithmMedium::Messages,
       OwnSignatureCheck::UpToInlineBytes},
      {CollKind::Allreduce, "ring",
       "2(P-1) steps, 2(P-1)/P n bytes sent per rank, pipelined in chunks", build_allreduce_ring},
      {CollKind::Allreduce, "rabenseifner",
       "2 log2(P') steps (recursive halving + doubling), about 2(P'-1)/P' n bytes per rank",
       build_allreduce_rabenseifner},
      {CollKind::Allreduce, "hierarchical",
       "ring reduce-scatter in each host, ring allreduce of each slice across hosts, ring "
       "allgather in each host: 2(H-1)/H n bytes per host across hosts (H hosts)",
       build_allreduce_hierarchical},
      {CollKind::Allreduce, "shm",
       "through a shared-memory segment: copy in, reduce 1/P each, copy out, per chunk; no "
       "messages",
       build_allreduce_shm, AlgorithmMedium::SharedMemory, OwnSignatureCheck::Always},
      {CollKind::Bcast, "binomial", "ceil(log2 P) steps, chunked pipeline along the tree",
       build_bcast_binomial},
      {CollKind::Bcast, "scatter_allgather",
       "scatter from the root then ring allgather: 2(P-1)/P n bytes per rank",
       build_bcast_scatter_allgather},
      {CollKind::Bcast, "hierarchical",
       "binomial tree among one rank per host (the root's local index), then binomial tree in "
       "each host; chunked: n bytes across each host's link once",
       build_bcast_hierarchical},
      {CollKind::Barrier, "dissemination", "ceil(log2 P) steps of empty messages",
       build_barrier_dissemination},
      {CollKind::Barrier, "hierarchical",
       "empty messages to each host's leader, dissemination among the leaders, release: "
       "2 + ceil(log2 H) steps, only leaders signal across hosts",
       build_barrier_hierarchical},
      {CollKind::Allgather, "ring", "P-1 steps of n bytes", build_allgather_ring},
      {CollKind::Allgather, "hierarchical",
       "ring among one rank per host (H-1 steps of n bytes), then ring in each host passing "
       "columns of H blocks (L-1 steps): (H-1) L n bytes across each host's link each way, "
       "each block once into each other host",
       build_allgather_hierarchical},
      {CollKind::ReduceScatter, "ring", "P-1 steps of n bytes, reduce on receive",
       build_reduce_scatter_ring},
      {CollKind::ReduceScatter, "hierarchical",
       "ring in each host over columns of H blocks (L-1 steps), then ring among one rank per "
       "host (H-1 steps of n bytes): (H-1) L n bytes across each host's link each way, host "
       "partial sums only",
       build_reduce_scatter_hierarchical},
  };
  return table;
}

namespace {

const AlgorithmInfo *find(CollKind kind, const char *name) {
  for (const auto &a : algorithm_table()) {
    if (a.kind == kind && std::strcmp(name, a.name) == 0) return &a;
  }
  return nullptr;
}

}  // namespace

bool algorithm_checks_signature(const CollArgs &args, const AlgorithmInfo &algo) {
  // A barrier over messages is the separate check alone (communicator.cpp):
  // it meets a collective of another kind there, or a rank that went
  // through shared memory (shm/shm_mismatch.cpp).
  if (args.kind != CollKind::Allreduce) return false;
  switch (algo.signature_check) {
    case OwnSignatureCheck::Always:
      return true;
    case OwnSignatureCheck::UpToInlineBytes:
      return args.count * dtype_size(args.dtype) <= kSignatureInlineBytes;
    case OwnSignatureCheck::None:
      break;
  }
  return false;
}

bool barrier_algorithm_forced() {
  return knob_barrier_algo.get() != "auto";
}

namespace {

namespace hier = patterns::hierarchy;

hier::Fit hierarchy_fit(const HostLayout *layout, int size) {
  return layout ? hier::fit(layout->hosts, size) : hier::Fit::kOneHost;
}

const char *default_choice(const CollArgs &args, int size, bool shm_ready,
                           const HostLayout *layout) {
  switch (args.kind) {
    case CollKind::Allreduce: {
      if (shm_ready && allreduce_uses_shm()) return "shm";
      size_t bytes = args.count * dtype_size(args.dtype);
      if (bytes <= static_cast<size_t>(knob_allreduce_small_bytes.get()) ||
          args.count < static_cast<size_t>(size)) {
        return "recursive_doubling";
      }
      if (bytes < static_cast<size_t>(knob_allreduce_large_bytes.get())) return "rabenseifner";
      return hierarchy_fit(layout, size) == hier::Fit::kFits ? "hierarchical" : "ring";
    }
    case CollKind::Bcast:
      if (hierarchy_fit(layout, size) == hier::Fit::kFits) return "hierarchical";
      return size > 2 && args.count >= static_cast<size_t>(knob_bcast_large_bytes.get())
                 ? "scatter_allgather"
                 : "binomial";
    case CollKind::Barrier:
      return hierarchy_fit(layout, size) == hier::Fit::kFits ? "hierarchical" : "dissemination";
    case CollKind::Allgather:
    case CollKind::ReduceScatter:
      // Tag steps: P-1 of the 4096 (allgather_hierarchical.cpp).
      return hierarchy_fit(layout, size) == hier::Fit::kFits && size <= (1 << kTagStepBits)
                 ? "hierarchical"
                 : "ring";
    default:
      return "";
  }
}

Knob<std::string> *knob_for(CollKind kind) {
  switch (kind) {
    case CollKind::Allreduce:
      return &knob_allreduce_algo;
    case CollKind::Bcast:
      return &knob_bcast_algo;
    case CollKind::Barrier:
      return &knob_barrier_algo;
    case CollKind::Allgather:
      return &knob_allgather_algo;
    case CollKind::ReduceScatter:
      return &knob_reduce_scatter_algo;
    default:
      return nullptr;
  }
}

}  // namespace

Status select_algorithm(const CollArgs &args, int size, const AlgorithmInfo **out, bool shm_ready,
                        const HostLayout *layout) {
  Knob<std::string> *knob = knob_for(args.kind);
  std::string forced = knob ? knob->get() : "auto";
  // shm without a segment (threads, ranks on several hosts): the default rule.
  if (forced == "shm" && !shm_ready) forced = "auto";
  // Hierarchical where the hosts are not uniform: the default rule, said once.
  const hier::Fit fit = hierarchy_fit(layout, size);
  bool hier_refused = false;
  if (forced == "hierarchical" && fit != hier::Fit::kFits) {
    forced = "auto";
    hier_refused = true;
    static std::atomic<bool> warned[16];
    if (!warned[static_cast<size_t>(args.kind) & 15].exchange(true)) {
      QLOG_WARN("select", "{}=hierarchical does not apply ({}): default rule", knob->name(),
                hier::fit_reason(fit));
    }
  }
  const char *name =
      forced == "auto" ? default_choice(args, size, shm_ready, layout) : forced.c_str();
  const AlgorithmInfo *algo = find(args.kind, name);
  if (!algo) {
    return fail(QUORUM_ERR_INTERNAL, "select", "no algorithm '{}' for {}", name,
                coll_kind_name(args.kind));
  }
  // Log the choice at info level when it changes for this kind of collective.
  static std::atomic<const AlgorithmInfo *> last[16];
  auto k = static_cast<size_t>(args.kind) & 15;
  if (last[k].exchange(algo) != algo) {
    // Where a hierarchical allreduce was wanted, say why the flat one runs.
    const bool flat_instead =
        fit != hier::Fit::kFits &&
        (args.kind == CollKind::Bcast || args.kind == CollKind::Barrier ||
         args.kind == CollKind::Allgather || args.kind == CollKind::ReduceScatter ||
         (args.kind == CollKind::Allreduce && std::strcmp(algo->name, "ring") == 0));
    QLOG_INFO("select", "{} of {} B on {} ranks: {} ({}{}{})", coll_kind_name(args.kind),
              args.kind == CollKind::Allreduce || args.kind == CollKind::ReduceScatter
                  ? args.count * dtype_size(args.dtype)
                  : args.count,
              size, algo->name, forced == "auto" ? "default rule" : "forced by knob",
              hier_refused || flat_instead ? "; not hierarchical: " : "",
              hier_refused || flat_instead ? hier::fit_reason(fit) : "");
  }
  *out = algo;
  return kOk;
}

}  // namespace quorum
