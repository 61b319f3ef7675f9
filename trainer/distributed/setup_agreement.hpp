// setup_agreement.hpp: the ranks agree on whether each could set up (backend,
// data, files) before any training collective, so that one rank's failure
// stops every rank at once, naming that rank and its reason, instead of
// leaving the others to wait for it until the timeout.
#pragma once

#include <string>

#include "quorum/quorum.h"
#include "runtime/status.hpp"

namespace quorum::trainer {

// Collective: `error` is this rank's setup failure ("" = none) and `code` its
// exit status. When any rank failed, returns INVALID_ARG with "rank R failed to
// set up: <its error>" (R the lowest such rank) on every rank, and sets
// *exit_code to R's code; a failing allgather returns its own error.
Status agree_on_setup(quorum_comm_t comm, const std::string &error, int code, int *exit_code);

}  // namespace quorum::trainer
