// quorum_bench_options.cpp: name tables, size parsing and the size sweep of
// quorum-bench.
#include "tools/quorum_bench_options.hpp"

#include <algorithm>
#include <cctype>
#include <cerrno>
#include <cstdlib>

namespace quorum_bench {

namespace {

struct CollEntry {
  Coll coll;
  const char *name;
};
const CollEntry kColls[] = {{Coll::Allreduce, "allreduce"},
                            {Coll::Bcast, "bcast"},
                            {Coll::Allgather, "allgather"},
                            {Coll::ReduceScatter, "reduce_scatter"},
                            {Coll::Barrier, "barrier"}};

struct DtypeEntry {
  quorum_dtype_t dtype;
  const char *name;  // the first name of a dtype is the one printed
};
const DtypeEntry kDtypes[] = {
    {QUORUM_FLOAT32, "float32"},   {QUORUM_FLOAT32, "float"},   {QUORUM_FLOAT64, "float64"},
    {QUORUM_FLOAT64, "double"},    {QUORUM_FLOAT16, "float16"}, {QUORUM_FLOAT16, "half"},
    {QUORUM_BFLOAT16, "bfloat16"}, {QUORUM_BFLOAT16, "bf16"},   {QUORUM_INT32, "int32"},
    {QUORUM_INT32, "int"},         {QUORUM_INT64, "int64"}};

struct OpEntry {
  quorum_op_t op;
  const char *name;
};
const OpEntry kOps[] = {{QUORUM_SUM, "sum"},
                        {QUORUM_PROD, "prod"},
                        {QUORUM_MIN, "min"},
                        {QUORUM_MAX, "max"},
                        {QUORUM_AVG, "avg"}};

std::string lower(std::string s) {
  for (auto &c : s) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return s;
}

}  // namespace

const char *coll_name(Coll c) {
  for (const auto &e : kColls) {
    if (e.coll == c) return e.name;
  }
  return "unknown";
}

std::optional<Coll> coll_from_name(const std::string &name) {
  std::string n = lower(name);
  if (n == "reducescatter" || n == "reduce-scatter") n = "reduce_scatter";
  for (const auto &e : kColls) {
    if (n == e.name) return e.coll;
  }
  return std::nullopt;
}

std::vector<std::string> coll_names() {
  std::vector<std::string> v;
  for (const auto &e : kColls) v.emplace_back(e.name);
  return v;
}

const char *dtype_name(quorum_dtype_t d) {
  for (const auto &e : kDtypes) {
    if (e.dtype == d) return e.name;
  }
  return "unknown";
}

std::optional<quorum_dtype_t> dtype_from_name(const std::string &name) {
  std::string n = lower(name);
  for (const auto &e : kDtypes) {
    if (n == e.name) return e.dtype;
  }
  return std::nullopt;
}

std::vector<std::string> dtype_names() {
  std::vector<std::string> v;
  for (const auto &e : kDtypes) v.emplace_back(e.name);
  return v;
}

size_t dtype_bytes(quorum_dtype_t d) {
  switch (d) {
    case QUORUM_FLOAT32:
    case QUORUM_INT32:
      return 4;
    case QUORUM_FLOAT64:
    case QUORUM_INT64:
      return 8;
    case QUORUM_FLOAT16:
    case QUORUM_BFLOAT16:
      return 2;
  }
  return 0;
}

const char *op_name(quorum_op_t o) {
  for (const auto &e : kOps) {
    if (e.op == o) return e.name;
  }
  return "unknown";
}

std::optional<quorum_op_t> op_from_name(const std::string &name) {
  std::string n = lower(name);
  for (const auto &e : kOps) {
    if (n == e.name) return e.op;
  }
  return std::nullopt;
}

std::vector<std::string> op_names() {
  std::vector<std::string> v;
  for (const auto &e : kOps) v.emplace_back(e.name);
  return v;
}

std::optional<size_t> parse_bytes(const std::string &text) {
  if (text.empty() || !std::isdigit(static_cast<unsigned char>(text[0]))) return std::nullopt;
  char *end = nullptr;
  errno = 0;
  unsigned long long v = std::strtoull(text.c_str(), &end, 10);
  if (errno != 0) return std::nullopt;
  std::string suffix = lower(end);
  unsigned shift = 0;
  if (suffix.empty() || suffix == "b") {
    shift = 0;
  } else if (suffix == "k" || suffix == "kb" || suffix == "kib") {
    shift = 10;
  } else if (suffix == "m" || suffix == "mb" || suffix == "mib") {
    shift = 20;
  } else if (suffix == "g" || suffix == "gb" || suffix == "gib") {
    shift = 30;
  } else {
    return std::nullopt;
  }
  if (shift && v > (~0ull >> shift)) return std::nullopt;
  return static_cast<size_t>(v << shift);
}

std::vector<size_t> size_sweep(const CollOptions &o) {
  std::vector<size_t> sizes;
  if (o.coll == Coll::Barrier) return {0};
  for (size_t s = o.min_bytes; s <= o.max_bytes;) {
    sizes.push_back(s);
    size_t next = o.step_bytes ? s + o.step_bytes : s * static_cast<size_t>(o.step_factor);
    if (next <= s) break;  // overflow, or a zero minimum with a factor
    s = next;
  }
  return sizes;
}

int auto_iters(size_t bytes) {
  // About 256 MiB of payload per size and placement, between 5 and 1000 calls.
  constexpr size_t kBudget = size_t{256} << 20;
  size_t n = bytes ? kBudget / bytes : 1000;
  return static_cast<int>(std::clamp<size_t>(n, 5, 1000));
}

int auto_warmup(int iters) {
  return std::clamp(iters / 10, 2, 50);
}

}  // namespace quorum_bench
