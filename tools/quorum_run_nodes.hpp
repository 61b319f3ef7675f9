// quorum_run_nodes.hpp: quorum-run across nodes, torchrun style. One
// quorum-run per node, each given the same --nnodes, --rdzv ADDR:PORT and
// token and its own --node-rank; node 0 serves the job's TCP store on
// ADDR:PORT, every rank on every node bootstraps through it. Node R runs
// global ranks R*n .. R*n+n-1 (n = -n/--np, the same on every node).
#pragma once

#include <CLI/CLI.hpp>
#include <string>

namespace quorum_run {

struct NodeOptions {
  int nnodes = 1;
  int node_rank = -1;      // required when nnodes > 1
  std::string rdzv;        // ADDR:PORT of the store; required when nnodes > 1
  std::string token_file;  // first line is the job's token
};

// What this node does, once the options are checked.
struct Rendezvous {
  bool serve = true;          // this node runs the store
  std::string bind_address;   // where it listens (when serve)
  std::string store_address;  // what the ranks connect to ("" on node 0: the server's own)
  std::string token;          // shared by every node; "" here: make a random one
  int first_rank = 0;         // global rank of this node's local rank 0
  int world_size = 0;         // ranks on all nodes
};

// Declares --nnodes, --node-rank, --rdzv, --rdzv-token-file on `app`.
void add_node_options(CLI::App &app, NodeOptions *options);

// Checks the options (and reads the token: --rdzv-token-file, else the
// QUORUM_RDZV_TOKEN environment variable) for a node that starts
// `local_size` ranks. False with *error set when they do not make sense.
bool plan_rendezvous(const NodeOptions &options, int local_size, Rendezvous *out,
                     std::string *error);

}  // namespace quorum_run
