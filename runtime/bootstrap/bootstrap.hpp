// bootstrap.hpp: how a process learns its rank and size and exchanges the small
// blobs (transport addresses, host identities) needed to connect to its peers.
//
// Implementations, tried in this order by bootstrap_from_environment():
//   pmix   - under mpirun / srun --mpi=pmix (PMIx_Put/Commit/Fence/Get)
//   store  - QUORUM_RANK/QUORUM_SIZE/QUORUM_STORE/QUORUM_TOKEN (quorum-run), TCP store
//   single - one process, rank 0 of 1
// plus make_oob_bootstrap() for a caller-supplied allgather (quorum_init_oob) and
// ThreadGroup (thread_group_bootstrap.hpp) for ranks that are threads of one process.
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>

#include "quorum/quorum.h"
#include "runtime/status.hpp"

namespace quorum {

class Bootstrap {
 public:
  virtual ~Bootstrap() = default;
  virtual const char *name() const = 0;
  virtual int rank() const = 0;
  virtual int size() const = 0;
  // Gathers `bytes` bytes from every rank into out[rank * bytes]; the same
  // `bytes` on every rank. Bounded by QUORUM_TIMEOUT_MS.
  virtual Status allgather(const void *in, void *out, size_t bytes) = 0;
  virtual Status barrier();

  // Used by the transport's closing barrier (finalize). watch: names a peer
  // known to have failed (-1: none); the store's waits ask it a few times a
  // second and end with QUORUM_ERR_PEER_FAILED naming that rank. null: none.
  void set_peer_watch(std::function<int()> watch) { peer_watch_ = std::move(watch); }
  // Bounds every later wait to `ms` (0: QUORUM_TIMEOUT_MS again): finalize
  // after a failure waits a short grace for the peers, not a whole timeout.
  void limit_waits_ms(int64_t ms) { wait_limit_ms_ = ms; }

 protected:
  // How long a wait may last: the limit, else QUORUM_TIMEOUT_MS.
  int64_t wait_ms() const;
  // The watch's answer (-1 without one).
  int failed_peer() const { return peer_watch_ ? peer_watch_() : -1; }
  bool has_peer_watch() const { return static_cast<bool>(peer_watch_); }

 private:
  std::function<int()> peer_watch_;
  int64_t wait_limit_ms_ = 0;
};

// PMIx, then the QUORUM_* store environment, then a single process.
// QUORUM_BOOTSTRAP=auto|pmix|store|single forces one.
Status bootstrap_from_environment(std::unique_ptr<Bootstrap> *out);

// Wraps a caller-supplied allgather (validated: non-null, 0 <= rank < size).
Status make_oob_bootstrap(const quorum_oob_t *oob, std::unique_ptr<Bootstrap> *out);

// Rank 0 of 1.
std::unique_ptr<Bootstrap> make_single_bootstrap();

}  // namespace quorum
