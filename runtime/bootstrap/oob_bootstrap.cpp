// oob_bootstrap.cpp: a bootstrap over the caller's own allgather (quorum_init_oob),
// e.g. one built on MPI_Allgather over MPI_COMM_WORLD.
#include "runtime/bootstrap/bootstrap.hpp"

namespace quorum {

namespace {
class OobBootstrap : public Bootstrap {
 public:
  explicit OobBootstrap(const quorum_oob_t &oob) : oob_(oob) {}
  const char *name() const override { return "oob"; }
  int rank() const override { return oob_.rank; }
  int size() const override { return oob_.size; }
  Status allgather(const void *in, void *out, size_t bytes) override {
    int rc = oob_.allgather(in, out, bytes, oob_.ctx);
    if (rc != 0) {
      return fail(QUORUM_ERR_BOOTSTRAP, "bootstrap",
                  "the caller's out-of-band allgather returned {} (rank {} of {}, {} bytes)", rc,
                  oob_.rank, oob_.size, bytes);
    }
    return kOk;
  }

 private:
  quorum_oob_t oob_;
};
}  // namespace

Status make_oob_bootstrap(const quorum_oob_t *oob, std::unique_ptr<Bootstrap> *out) {
  if (oob == nullptr || out == nullptr) {
    return fail(QUORUM_ERR_INVALID_ARG, "bootstrap", "quorum_oob_t pointer is NULL");
  }
  if (oob->allgather == nullptr) {
    return fail(QUORUM_ERR_INVALID_ARG, "bootstrap", "quorum_oob_t.allgather is NULL");
  }
  if (oob->size < 1 || oob->rank < 0 || oob->rank >= oob->size) {
    return fail(QUORUM_ERR_INVALID_ARG, "bootstrap",
                "quorum_oob_t has rank {} and size {}: need 0 <= rank < size", oob->rank,
                oob->size);
  }
  *out = std::make_unique<OobBootstrap>(*oob);
  return kOk;
}

}  // namespace quorum
