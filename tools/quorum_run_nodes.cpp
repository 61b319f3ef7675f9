// quorum_run_nodes.cpp: the multi-node options of quorum-run and how they map
// to the store's address, the job token and this node's ranks.
#include "tools/quorum_run_nodes.hpp"

#include <fmt/format.h>

#include <cstdlib>
#include <fstream>

#include "runtime/bootstrap/tcp_store.hpp"

namespace quorum_run {

namespace {

std::string trimmed(const std::string &text) {
  const char *space = " \t\r\n";
  size_t begin = text.find_first_not_of(space);
  if (begin == std::string::npos) return "";
  return text.substr(begin, text.find_last_not_of(space) + 1 - begin);
}

// The shared token: the file's first line, else QUORUM_RDZV_TOKEN, else "".
bool read_token(const NodeOptions &options, std::string *token, std::string *error) {
  if (!options.token_file.empty()) {
    std::ifstream file(options.token_file);
    std::string line;
    if (!file || !std::getline(file, line)) {
      *error = fmt::format("cannot read a token from --rdzv-token-file '{}'", options.token_file);
      return false;
    }
    *token = trimmed(line);
    if (token->empty()) {
      *error = fmt::format("--rdzv-token-file '{}' starts with an empty line", options.token_file);
      return false;
    }
  } else if (const char *env = std::getenv("QUORUM_RDZV_TOKEN"); env != nullptr) {
    *token = trimmed(env);
    if (token->empty()) {
      *error = "QUORUM_RDZV_TOKEN is set but empty";
      return false;
    }
  }
  if (token->size() > quorum::store_wire::kMaxTokenBytes) {
    *error = fmt::format("the rendezvous token has {} bytes (at most {})", token->size(),
                         quorum::store_wire::kMaxTokenBytes);
    return false;
  }
  return true;
}

}  // namespace

void add_node_options(CLI::App &app, NodeOptions *options) {
  app.add_option("--nnodes", options->nnodes,
                 "Number of nodes of the job, each running one quorum-run with the same -n")
      ->check(CLI::Range(1, 4096));
  app.add_option("--node-rank", options->node_rank,
                 "This node's index, 0 to nnodes-1 (node R runs global ranks R*n..R*n+n-1); "
                 "node 0 serves the store")
      ->check(CLI::Range(0, 4095));
  app.add_option("--rdzv", options->rdzv,
                 "ADDR:PORT of the job's store: node 0 listens there, every rank connects "
                 "there (needed with --nnodes > 1)");
  app.add_option("--rdzv-token-file", options->token_file,
                 "File whose first line is the job's token, the same on every node (default: "
                 "the QUORUM_RDZV_TOKEN environment variable; needed with --nnodes > 1)");
}

bool plan_rendezvous(const NodeOptions &options, int local_size, Rendezvous *out,
                     std::string *error) {
  Rendezvous plan;
  if (options.nnodes > 1 && options.node_rank < 0) {
    *error =
        fmt::format("--nnodes {} needs --node-rank (0 to {})", options.nnodes, options.nnodes - 1);
    return false;
  }
  const int node_rank = options.node_rank < 0 ? 0 : options.node_rank;
  if (node_rank >= options.nnodes) {
    *error = fmt::format("--node-rank {} is not below --nnodes {}", node_rank, options.nnodes);
    return false;
  }
  if (options.nnodes > 1 && options.rdzv.empty()) {
    *error = fmt::format(
        "--nnodes {} needs --rdzv ADDR:PORT (the address of node 0 that every "
        "node can reach, and a free port)",
        options.nnodes);
    return false;
  }
  if (!options.rdzv.empty()) {
    std::string host;
    int port = 0;
    if (!quorum::parse_host_port(options.rdzv, &host, &port) || port <= 0) {
      *error =
          fmt::format("--rdzv '{}' is not ADDR:PORT with a port from 1 to 65535", options.rdzv);
      return false;
    }
  }
  if (!read_token(options, &plan.token, error)) return false;
  if (options.nnodes > 1 && plan.token.empty()) {
    *error =
        "--nnodes > 1 needs the job's token, the same on every node: set QUORUM_RDZV_TOKEN or "
        "give --rdzv-token-file (for example from: od -An -tx1 -N16 /dev/urandom | tr -d ' \\n')";
    return false;
  }
  plan.serve = node_rank == 0;
  plan.bind_address = options.rdzv.empty() ? "127.0.0.1:0" : options.rdzv;
  plan.store_address = plan.serve ? "" : options.rdzv;
  plan.first_rank = node_rank * local_size;
  plan.world_size = options.nnodes * local_size;
  *out = std::move(plan);
  return true;
}

}  // namespace quorum_run
