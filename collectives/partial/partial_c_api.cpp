// partial_c_api.cpp: the partial-collective functions of the C API
// (quorum_partial_*) over PartialAllreduce.
#include <cstring>
#include <new>

#include "collectives/c_api_handles.hpp"
#include "collectives/partial/partial_allreduce.hpp"

using quorum::fail;
using quorum::kOk;
using quorum::PartialAllreduce;
using quorum::Status;

// Released handles stay allocated, marked (c_api_handles.hpp); `busy` keeps
// calls on one object from overlapping (quorum.h: threads).
struct quorum_partial {
  std::atomic<quorum::HandleState> state{quorum::HandleState::Live};
  std::atomic<bool> busy{false};
  std::unique_ptr<PartialAllreduce> obj;
};

namespace {
class PartialCall {
 public:
  PartialCall(quorum_partial *p, const char *what) : p_(p) {
    if (p_ == nullptr) {
      status_ = fail(QUORUM_ERR_INVALID_ARG, "api", "{}: NULL partial collective", what);
    } else if (p_->state.load(std::memory_order_acquire) != quorum::HandleState::Live || !p_->obj) {
      status_ =
          fail(QUORUM_ERR_INVALID_ARG, "api",
               "{}: the partial collective was destroyed or freed (its handle is released)", what);
    } else if (p_->busy.exchange(true, std::memory_order_acquire)) {
      status_ = fail(QUORUM_ERR_INVALID_ARG, "api",
                     "{}: another thread is inside a call on this partial collective; calls on "
                     "one object must not overlap (quorum.h: threads)",
                     what);
    } else {
      held_ = true;
    }
  }
  ~PartialCall() {
    if (held_) p_->busy.store(false, std::memory_order_release);
  }
  PartialCall(const PartialCall &) = delete;
  PartialCall &operator=(const PartialCall &) = delete;
  bool ok() const { return held_; }
  Status status() const { return status_; }
  // Releases the object; the handle stays, marked released.
  void release() {
    p_->state.store(quorum::HandleState::Released, std::memory_order_release);
    p_->obj.reset();
    quorum::keep_released_handle(p_);
  }

 private:
  quorum_partial *p_;
  bool held_ = false;
  Status status_ = kOk;
};
}  // namespace

#define CHECK_PARTIAL(p)                  \
  PartialCall partial_call_(p, __func__); \
  if (!partial_call_.ok()) return partial_call_.status()

namespace {
// The public view of a waited round (when the wait succeeded and info is wanted).
quorum_status_t with_info(Status s, const quorum::PartialRoundInfo &ri, quorum_round_info_t *info) {
  if (s == QUORUM_OK && info) {
    info->round = ri.round;
    info->fresh = ri.fresh;
    info->own_fresh = ri.own_fresh ? 1 : 0;
    info->initiator = ri.initiator;
  }
  return s;
}
}  // namespace

extern "C" {

quorum_status_t quorum_partial_create(quorum_comm_t comm, size_t count, quorum_dtype_t dtype,
                                      quorum_op_t op, const quorum_partial_opts_t *opts,
                                      quorum_partial_t *partial) {
  if (!partial) return fail(QUORUM_ERR_INVALID_ARG, "api", "quorum_partial_create: NULL output");
  *partial = nullptr;
  quorum::CommCall comm_call(comm, "quorum_partial_create");
  if (!comm_call.ok()) return comm_call.status();
  quorum::PartialOptions o;
  if (opts) {
    // Read the mode as an integer: a C caller may pass any value.
    int mode = 0;
    static_assert(sizeof(opts->mode) == sizeof(int), "enum of int size");
    std::memcpy(&mode, &opts->mode, sizeof(int));
    if (mode != QUORUM_PARTIAL_SOLO && mode != QUORUM_PARTIAL_MAJORITY &&
        mode != QUORUM_PARTIAL_QUORUM) {
      return fail(QUORUM_ERR_INVALID_ARG, "api", "quorum_partial_create: unknown mode {}", mode);
    }
    o.mode = static_cast<quorum_partial_mode_t>(mode);
    o.max_staleness = opts->max_staleness;
    o.carry = opts->carry != 0;
    o.seed = opts->seed;
    o.activation_delay_us = opts->activation_delay_us;
    o.carry_weight = opts->carry_weight == 0 ? 1.0 : opts->carry_weight;
    o.k = opts->k;
  }
  std::unique_ptr<PartialAllreduce> obj;
  QUORUM_CHECK(PartialAllreduce::create(*comm->comm, count, dtype, op, o, &obj));
  auto *h = new (std::nothrow) quorum_partial;  // never freed: see c_api_handles.hpp
  if (!h) return fail(QUORUM_ERR_NO_MEMORY, "api", "partial collective handle");
  h->obj = std::move(obj);
  *partial = h;
  return QUORUM_OK;
}

quorum_status_t quorum_partial_post(quorum_partial_t partial, const void *contribution) {
  CHECK_PARTIAL(partial);
  return partial->obj->post(contribution);
}

quorum_status_t quorum_partial_post_ref(quorum_partial_t partial, const void *contribution) {
  CHECK_PARTIAL(partial);
  return partial->obj->post_ref(contribution);
}

quorum_status_t quorum_partial_wait(quorum_partial_t partial, void *result,
                                    quorum_round_info_t *info) {
  CHECK_PARTIAL(partial);
  quorum::PartialRoundInfo ri;
  return with_info(partial->obj->wait(result, &ri), ri, info);
}

quorum_status_t quorum_partial_wait_ref(quorum_partial_t partial, const void **result,
                                        quorum_round_info_t *info) {
  CHECK_PARTIAL(partial);
  quorum::PartialRoundInfo ri;
  return with_info(partial->obj->wait_ref(result, &ri), ri, info);
}

quorum_status_t quorum_partial_rounds_behind(quorum_partial_t partial, unsigned long long *rounds) {
  CHECK_PARTIAL(partial);
  if (!rounds) {
    return fail(QUORUM_ERR_INVALID_ARG, "api", "quorum_partial_rounds_behind: NULL output");
  }
  *rounds = partial->obj->rounds_behind();
  return QUORUM_OK;
}

quorum_status_t quorum_partial_last_round_stats(quorum_partial_t partial,
                                                quorum_round_stats_t *stats) {
  CHECK_PARTIAL(partial);
  if (!stats) {
    return fail(QUORUM_ERR_INVALID_ARG, "api", "quorum_partial_last_round_stats: NULL output");
  }
  const quorum::PartialRoundInfo &ri = partial->obj->last_info();
  stats->post_ns = ri.post_ns;
  stats->join_ns = ri.join_ns;
  stats->complete_ns = ri.complete_ns;
  stats->own_carried = ri.own_carried;
  stats->own_staleness = ri.own_staleness;
  stats->carried = ri.carried;
  stats->staleness = ri.staleness;
  return QUORUM_OK;
}

quorum_status_t quorum_partial_flush(quorum_partial_t partial, void *result) {
  CHECK_PARTIAL(partial);
  return partial->obj->flush(result);
}

/* Local: the object's destructor releases it (or finalize already did). */
quorum_status_t quorum_partial_free(quorum_partial_t partial) {
  CHECK_PARTIAL(partial);
  partial_call_.release();
  return QUORUM_OK;
}

/* Collective; the handle is released whatever the outcome. */
quorum_status_t quorum_partial_destroy(quorum_partial_t partial) {
  CHECK_PARTIAL(partial);
  Status s = partial->obj->destroy();
  partial_call_.release();
  return s;
}

}  // extern "C"
