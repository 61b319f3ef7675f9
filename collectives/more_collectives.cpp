// more_collectives.cpp: alltoall(v), gather, scatter and rooted reduce as
// schedules (see more_collectives.hpp; costs in docs/algorithms.md).
#include "collectives/more_collectives.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <functional>
#include <string>
#include <vector>

#include "collectives/reduce/reduce_kernels.hpp"
#include "collectives/signature.hpp"
#include "runtime/memory.hpp"

namespace quorum {
namespace {

using BuildBody = std::function<Status(Builder &, TaskId *last)>;

// Takes the collective's sequence number, adds the signature check (whose
// record is `sig`), lets `body` add the tasks, and runs the schedule: to
// completion when req is null, else started with *req to wait on (the
// schedule keeps nothing of the caller's but its buffers).
Status run_collective(Communicator &comm, const CollArgs &sig, const BuildBody &body,
                      RequestPtr *req) {
  if (comm.finalized()) {
    return fail(QUORUM_ERR_INVALID_ARG, "comm", "{}: communicator is finalized",
                coll_kind_name(sig.kind));
  }
  const uint64_t seq = comm.next_sequence();
  std::string what =
      fmt::format("{} #{} (count {}, root {})", coll_kind_name(sig.kind), seq, sig.count, sig.root);
  auto schedule = std::make_unique<Schedule>(what);
  Builder b(*schedule, comm.transport(), comm.rank(), comm.size(), sig.kind, seq, comm.scratch());
  if (comm.signature_check() && comm.size() > 1) {
    comm.note_message_call(seq);
    TaskId checked = -1;
    QUORUM_CHECK(add_signature_check(b, sig, seq, &checked));
    b.set_entry({checked});
  }
  TaskId last = -1;
  QUORUM_CHECK(body(b, &last));
  const bool blocking = req == nullptr;
  RequestPtr started;
  QUORUM_CHECK(comm.submit(std::move(schedule), what, &started, blocking, b.take_leases()));
  if (blocking) return comm.wait(started);
  *req = std::move(started);
  return kOk;
}

Status check_root(const char *what, int root, int size) {
  if (root < 0 || root >= size) {
    return fail(QUORUM_ERR_INVALID_ARG, "api", "{}: root {} outside [0, {})", what, root, size);
  }
  return kOk;
}

Status check_host(const char *what, const void *a, const void *b) {
  for (const void *p : {a, b}) {
    if (p && p != QUORUM_IN_PLACE && buffer_kind(p) == BufferKind::Device) {
      return fail(QUORUM_ERR_UNSUPPORTED, "api", "{}: device buffers are not supported (host only)",
                  what);
    }
  }
  return kOk;
}

Status check_buffer(const char *what, const char *which, const void *p, size_t bytes) {
  if (bytes > 0 && (p == nullptr || p == QUORUM_IN_PLACE)) {
    return fail(QUORUM_ERR_INVALID_ARG, "api", "{}: no {} buffer for {} B", what, which, bytes);
  }
  if (bytes > (size_t{1} << 56)) {
    return fail(QUORUM_ERR_INVALID_ARG, "api", "{}: {} B is too large", what, bytes);
  }
  return kOk;
}

// n x p without overflow (bytes_per_rank as large as no process could map).
Status blocks_bytes(const char *what, size_t n, int p, size_t *out) {
  if (n > (size_t{1} << 56) / static_cast<size_t>(p)) {
    return fail(QUORUM_ERR_INVALID_ARG, "api", "{}: {} B per rank x {} ranks is too large", what, n,
                p);
  }
  *out = n * static_cast<size_t>(p);
  return kOk;
}

const uint8_t *at(const void *base, size_t offset) {
  return static_cast<const uint8_t *>(base) + offset;
}
uint8_t *at(void *base, size_t offset) {
  return static_cast<uint8_t *>(base) + offset;
}

// Pairwise exchange: every send and receive posted at once, own block copied.
Status build_alltoall(Builder &b, const void *send, const size_t *send_bytes,
                      const size_t *send_offsets, void *recv, const size_t *recv_bytes,
                      const size_t *recv_offsets, TaskId *last) {
  const int p = b.size(), r = b.rank();
  std::vector<TaskId> all;
  if (send_bytes[r] != recv_bytes[r]) {
    return fail(QUORUM_ERR_MISMATCH, "alltoall", "rank {} sends itself {} B but expects {} B", r,
                send_bytes[r], recv_bytes[r]);
  }
  all.push_back(send_bytes[r] == 0
                    ? b.nop()
                    : b.copy(at(recv, recv_offsets[r]), at(send, send_offsets[r]), send_bytes[r]));
  for (int s = 1; s < p; ++s) {
    const int to = (r + s) % p, from = (r + p - s) % p;
    all.push_back(b.recv(from, 0, at(recv, recv_offsets[from]), recv_bytes[from]));
    all.push_back(b.send(to, 0, at(send, send_offsets[to]), send_bytes[to]));
  }
  *last = b.nop(all);
  return kOk;
}

}  // namespace

Status alltoall(Communicator &comm, const void *send, void *recv, size_t bytes_per_rank,
                RequestPtr *req) {
  const int p = comm.size();
  size_t total = 0;
  QUORUM_CHECK(blocks_bytes("alltoall", bytes_per_rank, p, &total));
  QUORUM_CHECK(check_buffer("alltoall", "send", send, total));
  QUORUM_CHECK(check_buffer("alltoall", "receive", recv, total));
  QUORUM_CHECK(check_host("alltoall", send, recv));
  if (total > 0 && ranges_overlap(send, total, recv, total)) {
    return fail(QUORUM_ERR_INVALID_ARG, "api", "alltoall: the send and receive buffers overlap");
  }
  std::vector<size_t> bytes(static_cast<size_t>(p), bytes_per_rank),
      offsets(static_cast<size_t>(p));
  for (int j = 0; j < p; ++j)
    offsets[static_cast<size_t>(j)] = bytes_per_rank * static_cast<size_t>(j);
  CollArgs sig{CollKind::Alltoall, send, recv, bytes_per_rank, QUORUM_FLOAT32, QUORUM_SUM, 0};
  return run_collective(
      comm, sig,
      [&](Builder &b, TaskId *last) {
        return build_alltoall(b, send, bytes.data(), offsets.data(), recv, bytes.data(),
                              offsets.data(), last);
      },
      req);
}

Status alltoallv(Communicator &comm, const void *send, const size_t *send_bytes,
                 const size_t *send_offsets, void *recv, const size_t *recv_bytes,
                 const size_t *recv_offsets, RequestPtr *req) {
  if (!send_bytes || !send_offsets || !recv_bytes || !recv_offsets) {
    return fail(QUORUM_ERR_INVALID_ARG, "api", "alltoallv: NULL size or offset array");
  }
  const int p = comm.size();
  size_t send_end = 0, recv_end = 0;
  for (int j = 0; j < p; ++j) {
    const size_t k = static_cast<size_t>(j);
    for (size_t v : {send_bytes[k], send_offsets[k], recv_bytes[k], recv_offsets[k]}) {
      if (v > (size_t{1} << 56)) {
        return fail(QUORUM_ERR_INVALID_ARG, "api",
                    "alltoallv: size or offset {} for rank {} is too large", v, j);
      }
    }
    send_end = std::max(send_end, send_offsets[k] + send_bytes[k]);
    recv_end = std::max(recv_end, recv_offsets[k] + recv_bytes[k]);
  }
  QUORUM_CHECK(check_buffer("alltoallv", "send", send, send_end));
  QUORUM_CHECK(check_buffer("alltoallv", "receive", recv, recv_end));
  QUORUM_CHECK(check_host("alltoallv", send, recv));
  if (send_end > 0 && recv_end > 0 && ranges_overlap(send, send_end, recv, recv_end)) {
    return fail(QUORUM_ERR_INVALID_ARG, "api", "alltoallv: the send and receive buffers overlap");
  }
  // Sizes differ between ranks legitimately: the signature checks the call only.
  CollArgs sig{CollKind::Alltoall, send, recv, 0, QUORUM_FLOAT32, QUORUM_SUM, 0};
  return run_collective(
      comm, sig,
      [&](Builder &b, TaskId *last) {
        return build_alltoall(b, send, send_bytes, send_offsets, recv, recv_bytes, recv_offsets,
                              last);
      },
      req);
}

Status gather(Communicator &comm, const void *send, void *recv, size_t bytes_per_rank, int root,
              RequestPtr *req) {
  const int p = comm.size(), r = comm.rank();
  QUORUM_CHECK(check_root("gather", root, p));
  size_t total = 0;
  QUORUM_CHECK(blocks_bytes("gather", bytes_per_rank, p, &total));
  const bool in_place = send == QUORUM_IN_PLACE;
  if (in_place && r != root) {
    return fail(QUORUM_ERR_INVALID_ARG, "api",
                "gather: QUORUM_IN_PLACE on rank {}, not the root {}", r, root);
  }
  if (!in_place) QUORUM_CHECK(check_buffer("gather", "send", send, bytes_per_rank));
  if (r == root) QUORUM_CHECK(check_buffer("gather", "receive", recv, total));
  QUORUM_CHECK(check_host("gather", send, r == root ? recv : nullptr));
  CollArgs sig{CollKind::Gather, send, recv, bytes_per_rank, QUORUM_FLOAT32, QUORUM_SUM, root};
  return run_collective(
      comm, sig,
      [&](Builder &b, TaskId *last) {
        if (r != root) {
          *last = b.send(root, 0, send, bytes_per_rank);
          return kOk;
        }
        std::vector<TaskId> all;
        const size_t own = bytes_per_rank * static_cast<size_t>(r);
        all.push_back(in_place || bytes_per_rank == 0
                          ? b.nop()
                          : b.copy(at(recv, own), send, bytes_per_rank));
        for (int j = 0; j < p; ++j) {
          if (j != r)
            all.push_back(
                b.recv(j, 0, at(recv, bytes_per_rank * static_cast<size_t>(j)), bytes_per_rank));
        }
        *last = b.nop(all);
        return kOk;
      },
      req);
}

Status scatter(Communicator &comm, const void *send, void *recv, size_t bytes_per_rank, int root,
               RequestPtr *req) {
  const int p = comm.size(), r = comm.rank();
  QUORUM_CHECK(check_root("scatter", root, p));
  size_t total = 0;
  QUORUM_CHECK(blocks_bytes("scatter", bytes_per_rank, p, &total));
  if (r == root) QUORUM_CHECK(check_buffer("scatter", "send", send, total));
  QUORUM_CHECK(check_buffer("scatter", "receive", recv, bytes_per_rank));
  QUORUM_CHECK(check_host("scatter", r == root ? send : nullptr, recv));
  const size_t own = bytes_per_rank * static_cast<size_t>(r);
  if (r == root && bytes_per_rank > 0 && recv != at(const_cast<void *>(send), own) &&
      ranges_overlap(send, total, recv, bytes_per_rank)) {
    return fail(QUORUM_ERR_INVALID_ARG, "api",
                "scatter: the root's receive buffer overlaps its send buffer other than as its "
                "own block");
  }
  CollArgs sig{CollKind::Scatter, send, recv, bytes_per_rank, QUORUM_FLOAT32, QUORUM_SUM, root};
  return run_collective(
      comm, sig,
      [&](Builder &b, TaskId *last) {
        if (r != root) {
          *last = b.recv(root, 0, recv, bytes_per_rank);
          return kOk;
        }
        std::vector<TaskId> all;
        all.push_back(bytes_per_rank == 0 ? b.nop() : b.copy(recv, at(send, own), bytes_per_rank));
        for (int j = 0; j < p; ++j) {
          if (j != r)
            all.push_back(
                b.send(j, 0, at(send, bytes_per_rank * static_cast<size_t>(j)), bytes_per_rank));
        }
        *last = b.nop(all);
        return kOk;
      },
      req);
}

Status reduce(Communicator &comm, const void *send, void *recv, size_t count, quorum_dtype_t dtype,
              quorum_op_t op, int root, RequestPtr *req) {
  const int p = comm.size(), r = comm.rank();
  QUORUM_CHECK(check_root("reduce", root, p));
  if (send == QUORUM_IN_PLACE) {
    if (r != root) {
      return fail(QUORUM_ERR_INVALID_ARG, "api",
                  "reduce: QUORUM_IN_PLACE on rank {}, not the root {}", r, root);
    }
    send = recv;
  }
  // Off the root recv is not used: check send alone there.
  QUORUM_CHECK(validate_reduction("reduce", send, r == root ? recv : send, count, dtype, op));
  QUORUM_CHECK(check_host("reduce", send, r == root ? recv : nullptr));
  const size_t bytes = count * dtype_size(dtype);
  CollArgs sig{CollKind::Reduce, send, recv, count, dtype, op, root};
  // Binomial tree towards the root over relative ranks v = (rank - root) mod
  // P: a rank receives from v + 2^k for each 2^k below its lowest set bit,
  // adds each in, then sends to v - (its lowest set bit).
  return run_collective(
      comm, sig,
      [&](Builder &b, TaskId *last) {
        const int v = (r - root + p) % p;
        std::vector<int> children;
        int parent = -1;
        for (int mask = 1; mask < p; mask <<= 1) {
          if (v & mask) {
            parent = (v - mask + root) % p;
            break;
          }
          if (v + mask < p) children.push_back((v + mask + root) % p);
        }
        if (parent >= 0 && children.empty()) {  // a leaf sends its own input
          *last = b.send(parent, 0, send, bytes);
          return kOk;
        }
        void *acc = recv;
        TaskId prev = -1;
        if (r != root) {
          acc = b.scratch(bytes + 1);
          if (!acc) return fail(QUORUM_ERR_NO_MEMORY, "reduce", "scratch of {} B", bytes);
        }
        prev = acc != send && bytes > 0 ? b.copy(acc, send, bytes) : b.nop();
        uint8_t *in = children.empty() ? nullptr : b.scratch(bytes * children.size() + 1);
        if (!children.empty() && !in) {
          return fail(QUORUM_ERR_NO_MEMORY, "reduce", "scratch of {} B", bytes * children.size());
        }
        for (size_t k = 0; k < children.size(); ++k) {
          TaskId got = b.recv(children[k], 0, in + bytes * k, bytes);
          prev = b.reduce(acc, acc, in + bytes * k, count, dtype, op, {prev, got});
        }
        if (parent >= 0) {
          *last = b.send(parent, 0, acc, bytes, {prev});
        } else {
          *last = op == QUORUM_AVG ? b.scale(acc, count, dtype, p, {prev}) : prev;
        }
        return kOk;
      },
      req);
}

}  // namespace quorum
