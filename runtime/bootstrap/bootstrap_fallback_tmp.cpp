// bootstrap_fallback_tmp.cpp: placeholder until the PMIx/store/OOB bootstraps land.
#include "runtime/bootstrap/bootstrap.hpp"
namespace quorum {
Status bootstrap_from_environment(std::unique_ptr<Bootstrap> *out) {
  *out = make_single_bootstrap();
  return kOk;
}
Status make_oob_bootstrap(const quorum_oob_t *, std::unique_ptr<Bootstrap> *) {
  return fail(QUORUM_ERR_UNSUPPORTED, "bootstrap", "oob bootstrap not yet built");
}
}  // namespace quorum
