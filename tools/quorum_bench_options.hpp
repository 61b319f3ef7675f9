// quorum_bench_options.hpp: what quorum-bench was asked to measure, and the
// name <-> value tables its command line uses (nccl-tests style flags).
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "quorum/quorum.h"

namespace quorum_bench {

enum class Coll { Allreduce, Bcast, Allgather, ReduceScatter, Barrier };

struct CollOptions {
  Coll coll = Coll::Allreduce;
  size_t min_bytes = 8;
  size_t max_bytes = size_t{64} << 20;
  int step_factor = 2;    // sizes grow by this factor...
  size_t step_bytes = 0;  // ...or, when non-zero, by this many bytes
  quorum_dtype_t dtype = QUORUM_FLOAT32;
  quorum_op_t op = QUORUM_SUM;
  int iters = 0;                // 0: scaled per size
  int warmup = -1;              // -1: scaled per size
  int check = 1;                // check passes per size and placement (0: none)
  int root = 0;                 // bcast
  bool json = false;            // JSON lines on stdout instead of the table
  bool shared_buffers = false;  // buffers from quorum_mem_alloc (zero-copy on one host)
  std::string json_out;         // also write JSON lines to this file
};

// Names used on the command line and in the output.
const char *coll_name(Coll c);
std::optional<Coll> coll_from_name(const std::string &name);
std::vector<std::string> coll_names();
const char *dtype_name(quorum_dtype_t d);
std::optional<quorum_dtype_t> dtype_from_name(const std::string &name);
std::vector<std::string> dtype_names();
// Bytes per element (0 for an unknown dtype).
size_t dtype_bytes(quorum_dtype_t d);
const char *op_name(quorum_op_t o);
std::optional<quorum_op_t> op_from_name(const std::string &name);
std::vector<std::string> op_names();

// "8", "64K", "64M", "1G" (powers of 1024, as nccl-tests); nullopt when malformed.
std::optional<size_t> parse_bytes(const std::string &text);

// The message sizes to run (bytes), before rounding to the element and rank grid.
std::vector<size_t> size_sweep(const CollOptions &o);

// Iterations scaled per size: many for small messages, a few for large ones.
int auto_iters(size_t bytes);
int auto_warmup(int iters);

}  // namespace quorum_bench
