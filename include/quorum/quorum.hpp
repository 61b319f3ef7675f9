// quorum.hpp: C++ RAII wrapper over the C API (quorum.h).
//
//   quorum::Comm comm;                       // quorum_init (throws quorum::Error)
//   comm.allreduce(grad.data(), grad.size()); // in place, float32 sum by default
//   auto req = comm.iallreduce(in, out, n);   req.wait();
//   quorum::SharedBuffer<float> g(comm, n);   // zero-copy allreduce on one host
//
// Errors are thrown as quorum::Error carrying the status and quorum_last_error().
#pragma once

#include <cstddef>
#include <cstdint>
#include <stdexcept>
#include <string>
#include <utility>
#include <vector>

#include "quorum/quorum.h"

namespace quorum {

class Error : public std::runtime_error {
 public:
  explicit Error(quorum_status_t status) : Error(status, quorum_last_error()) {}
  // An error the wrapper finds itself (the C API was not called).
  Error(quorum_status_t status, const std::string &detail)
      : std::runtime_error(std::string(quorum_strerror(status)) + ": " + detail), status_(status) {}
  quorum_status_t status() const { return status_; }

 private:
  quorum_status_t status_;
};

inline void check(quorum_status_t s) {
  if (s != QUORUM_OK) throw Error(s);
}

template <typename T>
struct dtype_of;
template <>
struct dtype_of<float> {
  static constexpr quorum_dtype_t value = QUORUM_FLOAT32;
};
template <>
struct dtype_of<double> {
  static constexpr quorum_dtype_t value = QUORUM_FLOAT64;
};
template <>
struct dtype_of<int32_t> {
  static constexpr quorum_dtype_t value = QUORUM_INT32;
};
template <>
struct dtype_of<int64_t> {
  static constexpr quorum_dtype_t value = QUORUM_INT64;
};

// A pending non-blocking operation; waits in its destructor if not waited.
class Request {
 public:
  Request() = default;
  explicit Request(quorum_request_t r) : r_(r) {}
  Request(Request &&o) noexcept : r_(std::exchange(o.r_, nullptr)) {}
  Request &operator=(Request &&o) noexcept {
    if (this != &o) {
      finish_quietly();
      r_ = std::exchange(o.r_, nullptr);
    }
    return *this;
  }
  ~Request() { finish_quietly(); }
  void wait() {
    if (r_) check(quorum_wait(std::exchange(r_, nullptr)));
  }
  bool test() {
    if (!r_) return true;
    int done = 0;
    quorum_status_t s = quorum_test(r_, &done);
    if (done) r_ = nullptr;
    check(s);
    return done != 0;
  }

 private:
  void finish_quietly() {
    if (r_) quorum_wait(std::exchange(r_, nullptr));
  }
  quorum_request_t r_ = nullptr;
};

class Comm;

// Options of a k-of-P quorum allreduce (QUORUM_PARTIAL_QUORUM): each round
// starts once k ranks are ready (1: solo; P: every rank, as a synchronous
// allreduce). Carries late contributions; set other fields on the result.
inline quorum_partial_opts_t partial_quorum_options(unsigned k, unsigned max_staleness = 32) {
  quorum_partial_opts_t opts{};
  opts.mode = QUORUM_PARTIAL_QUORUM;
  opts.k = k;
  opts.max_staleness = max_staleness;
  opts.carry = 1;
  return opts;
}

// A partial allreduce (solo, majority or k-of-P quorum) over `count`
// elements of T: each step post() this rank's contribution, then wait() for
// the round's result (the same on every rank). Created and destroyed
// collectively; flush() drains every carried contribution at the end.
template <typename T>
class Partial {
 public:
  Partial(const Comm &comm, size_t count, const quorum_partial_opts_t &opts,
          quorum_op_t op = QUORUM_SUM);
  Partial(Partial &&o) noexcept : p_(std::exchange(o.p_, nullptr)) {}
  Partial &operator=(Partial &&) = delete;
  Partial(const Partial &) = delete;
  ~Partial() {
    if (p_) quorum_partial_destroy(p_);
  }
  void post(const T *contribution) { check(quorum_partial_post(p_, contribution)); }
  // post() without the copy: contribution must stay unchanged until the
  // matching wait returns (see quorum_partial_post_ref).
  void post_ref(const T *contribution) { check(quorum_partial_post_ref(p_, contribution)); }
  quorum_round_info_t wait(T *result) {
    quorum_round_info_t info{};
    check(quorum_partial_wait(p_, result, &info));
    return info;
  }
  // wait() without the copy: the round's result inside the object, valid
  // until the next post, wait, wait_ref, flush or destroy.
  const T *wait_ref(quorum_round_info_t *info = nullptr) {
    const void *result = nullptr;
    quorum_round_info_t local{};
    check(quorum_partial_wait_ref(p_, &result, info ? info : &local));
    return static_cast<const T *>(result);
  }
  // Timing and staleness of the round the last wait() returned.
  quorum_round_stats_t last_round_stats() const {
    quorum_round_stats_t stats{};
    check(quorum_partial_last_round_stats(p_, &stats));
    return stats;
  }
  void flush(T *result) { check(quorum_partial_flush(p_, result)); }
  // Rounds others already ran that this rank has not waited for (between a
  // wait and the next post); see quorum_partial_rounds_behind.
  unsigned long long rounds_behind() const {
    unsigned long long n = 0;
    check(quorum_partial_rounds_behind(p_, &n));
    return n;
  }
  void destroy() {
    if (p_) check(quorum_partial_destroy(std::exchange(p_, nullptr)));
  }

 private:
  quorum_partial_t p_ = nullptr;
};

class Comm {
 public:
  // Bootstraps from the environment (PMIx, quorum-run, or a single process).
  Comm() { check(quorum_init(&c_)); }
  explicit Comm(const quorum_oob_t &oob) { check(quorum_init_oob(&oob, &c_)); }
  Comm(Comm &&o) noexcept : c_(std::exchange(o.c_, nullptr)) {}
  Comm &operator=(Comm &&) = delete;
  Comm(const Comm &) = delete;
  // Destroyed while Requests it started are still alive (moved out of its
  // scope), the communicator stays open for them (never finalized, its
  // memory not freed): call finalize() after waiting them instead.
  ~Comm() {
    if (c_) quorum_finalize(c_);
  }
  // Throws INVALID_ARG, and keeps the communicator usable, while Requests
  // from it are in flight: wait them, then finalize again.
  void finalize() {
    if (!c_) return;
    quorum_status_t s = quorum_finalize(c_);
    if (s != QUORUM_ERR_INVALID_ARG) c_ = nullptr;  // INVALID_ARG: refused, handle still valid
    check(s);
  }

  int rank() const { return quorum_comm_rank(c_); }
  int size() const { return quorum_comm_size(c_); }
  std::string transport() const { return quorum_comm_transport(c_); }
  quorum_comm_t handle() const { return c_; }

  template <typename T>
  void allreduce(T *buf, size_t count, quorum_op_t op = QUORUM_SUM) {
    check(quorum_allreduce(c_, QUORUM_IN_PLACE, buf, count, dtype_of<T>::value, op));
  }
  template <typename T>
  void allreduce(const T *send, T *recv, size_t count, quorum_op_t op = QUORUM_SUM) {
    check(quorum_allreduce(c_, send, recv, count, dtype_of<T>::value, op));
  }
  template <typename T>
  Request iallreduce(const T *send, T *recv, size_t count, quorum_op_t op = QUORUM_SUM) {
    quorum_request_t r = nullptr;
    check(quorum_iallreduce(c_, send, recv, count, dtype_of<T>::value, op, &r));
    return Request(r);
  }
  void bcast(void *buf, size_t bytes, int root) { check(quorum_bcast(c_, buf, bytes, root)); }
  void barrier() { check(quorum_barrier(c_)); }
  void allgather(const void *send, void *recv, size_t bytes_per_rank) {
    check(quorum_allgather(c_, send, recv, bytes_per_rank));
  }
  template <typename T>
  void reduce_scatter(const T *send, T *recv, size_t count_per_rank, quorum_op_t op = QUORUM_SUM) {
    check(quorum_reduce_scatter(c_, send, recv, count_per_rank, dtype_of<T>::value, op));
  }

  // Rooted and personalised collectives (quorum_reduce, quorum_gather, ...).
  template <typename T>
  void reduce(const T *send, T *recv, size_t count, int root, quorum_op_t op = QUORUM_SUM) {
    check(quorum_reduce(c_, send, recv, count, dtype_of<T>::value, op, root));
  }
  void gather(const void *send, void *recv, size_t bytes_per_rank, int root) {
    check(quorum_gather(c_, send, recv, bytes_per_rank, root));
  }
  void scatter(const void *send, void *recv, size_t bytes_per_rank, int root) {
    check(quorum_scatter(c_, send, recv, bytes_per_rank, root));
  }
  void alltoall(const void *send, void *recv, size_t bytes_per_rank) {
    check(quorum_alltoall(c_, send, recv, bytes_per_rank));
  }
  // Their non-blocking forms (quorum_ireduce, ...): the buffers stay untouched
  // until the Request is waited for.
  template <typename T>
  Request ireduce(const T *send, T *recv, size_t count, int root, quorum_op_t op = QUORUM_SUM) {
    quorum_request_t r = nullptr;
    check(quorum_ireduce(c_, send, recv, count, dtype_of<T>::value, op, root, &r));
    return Request(r);
  }
  Request igather(const void *send, void *recv, size_t bytes_per_rank, int root) {
    quorum_request_t r = nullptr;
    check(quorum_igather(c_, send, recv, bytes_per_rank, root, &r));
    return Request(r);
  }
  Request iscatter(const void *send, void *recv, size_t bytes_per_rank, int root) {
    quorum_request_t r = nullptr;
    check(quorum_iscatter(c_, send, recv, bytes_per_rank, root, &r));
    return Request(r);
  }
  Request ialltoall(const void *send, void *recv, size_t bytes_per_rank) {
    quorum_request_t r = nullptr;
    check(quorum_ialltoall(c_, send, recv, bytes_per_rank, &r));
    return Request(r);
  }

  // Sub-communicators (collective over this one). On a rank that passes
  // QUORUM_UNDEFINED as its color, split returns an empty Comm (!valid()).
  Comm split(int color, int key) const {
    quorum_comm_t c = nullptr;
    check(quorum_comm_split(c_, color, key, &c));
    return Comm(c, Adopt{});
  }
  Comm dup() const {
    quorum_comm_t c = nullptr;
    check(quorum_comm_dup(c_, &c));
    return Comm(c, Adopt{});
  }
  bool valid() const { return c_ != nullptr; }

  // Point-to-point (quorum_send / quorum_recv): bytes to or from rank peer.
  void send(const void *buf, size_t bytes, int peer, int tag = 0) {
    check(quorum_send(c_, buf, bytes, peer, tag));
  }
  void recv(void *buf, size_t bytes, int peer, int tag = 0) {
    check(quorum_recv(c_, buf, bytes, peer, tag));
  }
  Request isend(const void *buf, size_t bytes, int peer, int tag = 0) {
    quorum_request_t r = nullptr;
    check(quorum_isend(c_, buf, bytes, peer, tag, &r));
    return Request(r);
  }
  Request irecv(void *buf, size_t bytes, int peer, int tag = 0) {
    quorum_request_t r = nullptr;
    check(quorum_irecv(c_, buf, bytes, peer, tag, &r));
    return Request(r);
  }

 private:
  struct Adopt {};
  Comm(quorum_comm_t c, Adopt) : c_(c) {}
  quorum_comm_t c_ = nullptr;
};

// `count` elements of T from quorum_mem_alloc (collective: symmetric shared
// memory when every rank is on this host, so allreduces on it copy nothing in
// or out), freed when destroyed. Destroy it before its Comm.
template <typename T>
class SharedBuffer {
 public:
  SharedBuffer(const Comm &comm, size_t count) : c_(comm.handle()), count_(count) {
    if (count > SIZE_MAX / sizeof(T)) {
      throw Error(QUORUM_ERR_INVALID_ARG, "SharedBuffer of " + std::to_string(count) +
                                              " elements of " + std::to_string(sizeof(T)) +
                                              " B: the size overflows size_t");
    }
    void *p = nullptr;
    check(quorum_mem_alloc(c_, count * sizeof(T), &p));
    p_ = static_cast<T *>(p);
  }
  SharedBuffer(SharedBuffer &&o) noexcept
      : c_(o.c_), p_(std::exchange(o.p_, nullptr)), count_(std::exchange(o.count_, 0)) {}
  SharedBuffer &operator=(SharedBuffer &&) = delete;
  SharedBuffer(const SharedBuffer &) = delete;
  ~SharedBuffer() {
    if (p_) quorum_mem_free(c_, p_);
  }
  T *data() const { return p_; }
  size_t size() const { return count_; }
  T &operator[](size_t i) const { return p_[i]; }

 private:
  quorum_comm_t c_;
  T *p_ = nullptr;
  size_t count_ = 0;
};

template <typename T>
Partial<T>::Partial(const Comm &comm, size_t count, const quorum_partial_opts_t &opts,
                    quorum_op_t op) {
  check(quorum_partial_create(comm.handle(), count, dtype_of<T>::value, op, &opts, &p_));
}

}  // namespace quorum
