// store_bootstrap.hpp: the bootstrap of processes started by quorum-run (or any
// launcher that sets QUORUM_RANK, QUORUM_SIZE, QUORUM_STORE and QUORUM_TOKEN):
// an allgather built on the TCP key-value store.
#pragma once

#include <memory>
#include <string>

#include "runtime/bootstrap/bootstrap.hpp"

namespace quorum {

struct StoreBootstrapParams {
  int rank = -1;
  int size = 0;
  std::string address;     // "host:port" of the TcpStoreServer
  std::string token;       // the job's token
  std::string key_prefix;  // lets several groups share one store (tests)
};

// Reads and validates QUORUM_RANK / QUORUM_SIZE / QUORUM_STORE / QUORUM_TOKEN;
// errors name the variable at fault.
Status store_params_from_environment(StoreBootstrapParams *params);

// Connects to the store (retrying until QUORUM_TIMEOUT_MS: it may start later).
Status make_store_bootstrap(const StoreBootstrapParams &params, std::unique_ptr<Bootstrap> *out);

}  // namespace quorum
