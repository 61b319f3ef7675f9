// pmix_bootstrap.hpp: the bootstrap of processes started by a PMIx launcher
// (mpirun of Open MPI, srun --mpi=pmix). Built only where PMIx was found
// (QUORUM_HAVE_PMIX).
#pragma once

#include <memory>

#include "runtime/bootstrap/bootstrap.hpp"

namespace quorum {

// Under a PMIx launcher: *out is the bootstrap. Without one PMIx_Init fails;
// then *out stays empty and the result is kOk, or QUORUM_ERR_BOOTSTRAP when
// `required` (QUORUM_BOOTSTRAP=pmix).
Status make_pmix_bootstrap(bool required, std::unique_ptr<Bootstrap> *out);

}  // namespace quorum
