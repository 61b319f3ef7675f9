// pmix_bootstrap.cpp: allgather by PMIx_Put / PMIx_Commit / PMIx_Fence (with
// data collection) / PMIx_Get from every rank. Each allgather uses a fresh key
// "quorum.ag.<seq>" (seq counted per process), so rounds never read each
// other's values. The fence is waited for with our own deadline: the PMIx
// servers do not always honour PMIX_TIMEOUT (a fence across a host whose link
// went down blocks for good), and finalize after a failure must stay short.
#include "runtime/bootstrap/pmix_bootstrap.hpp"

#include <pmix.h>

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstring>
#include <memory>
#include <mutex>
#include <string>

#include "runtime/knobs.hpp"
#include "runtime/log.hpp"

namespace quorum {

namespace {

std::atomic<uint64_t> g_sequence{0};

// One PMIx_Fence_nb in flight. Shared by the waiter and the callback, so a
// fence the waiter gave up on can still complete later without harm.
struct FenceWait {
  std::mutex mutex;
  std::condition_variable done_cv;
  bool done = false;
  pmix_status_t rc = PMIX_SUCCESS;
  pmix_info_t info[2];
  size_t ninfo = 0;
  ~FenceWait() {
    for (size_t i = 0; i < ninfo; ++i) PMIX_INFO_DESTRUCT(&info[i]);
  }
};

void fence_done(pmix_status_t rc, void *cbdata) {
  auto *holder = static_cast<std::shared_ptr<FenceWait> *>(cbdata);
  {
    std::lock_guard<std::mutex> lock((*holder)->mutex);
    (*holder)->rc = rc;
    (*holder)->done = true;
  }
  (*holder)->done_cv.notify_all();
  delete holder;
}

// PMIx_Fence (collecting data) bounded by timeout_ms (<= 0: none). A fence
// still running at the deadline is left to PMIx and reported as a timeout.
pmix_status_t bounded_fence(const pmix_proc_t &all, int64_t timeout_ms) {
  auto wait = std::make_shared<FenceWait>();
  bool collect = true;
  PMIX_INFO_LOAD(&wait->info[wait->ninfo++], PMIX_COLLECT_DATA, &collect, PMIX_BOOL);
  if (timeout_ms > 0) {
    int timeout_s = static_cast<int>((timeout_ms + 999) / 1000);
    PMIX_INFO_LOAD(&wait->info[wait->ninfo++], PMIX_TIMEOUT, &timeout_s, PMIX_INT);
  }
  auto *holder = new std::shared_ptr<FenceWait>(wait);
  pmix_status_t rc = PMIx_Fence_nb(&all, 1, wait->info, wait->ninfo, &fence_done, holder);
  if (rc != PMIX_SUCCESS) {
    delete holder;
    return rc;
  }
  std::unique_lock<std::mutex> lock(wait->mutex);
  if (timeout_ms <= 0) {
    wait->done_cv.wait(lock, [&] { return wait->done; });
  } else if (!wait->done_cv.wait_for(lock, std::chrono::milliseconds(timeout_ms),
                                     [&] { return wait->done; })) {
    return PMIX_ERR_TIMEOUT;
  }
  return wait->rc;
}

class PmixBootstrap : public Bootstrap {
 public:
  PmixBootstrap(const pmix_proc_t &me, int size) : me_(me), size_(size) {}
  ~PmixBootstrap() override {
    pmix_status_t rc = PMIx_Finalize(nullptr, 0);
    if (rc != PMIX_SUCCESS) {
      QLOG_WARN("bootstrap", "PMIx_Finalize: {}", PMIx_Error_string(rc));
    }
  }
  const char *name() const override { return "pmix"; }
  int rank() const override { return static_cast<int>(me_.rank); }
  int size() const override { return size_; }

  Status allgather(const void *in, void *out, size_t bytes) override {
    // One counter for the whole process: two bootstraps (two communicators)
    // must not reuse each other's keys. PMIx fences are job-wide anyway, so
    // every rank already calls allgathers in the same order.
    const uint64_t seq = g_sequence.fetch_add(1);
    std::string key = fmt::format("quorum.ag.{}", seq);
    pmix_value_t value;
    PMIX_VALUE_CONSTRUCT(&value);
    value.type = PMIX_BYTE_OBJECT;
    // PMIx copies the value inside PMIx_Put; the cast only satisfies its type.
    value.data.bo.bytes = const_cast<char *>(static_cast<const char *>(in));
    value.data.bo.size = bytes;
    pmix_status_t rc = PMIx_Put(PMIX_GLOBAL, key.c_str(), &value);
    if (rc != PMIX_SUCCESS) return pmix_fail("PMIx_Put", seq, rc);
    rc = PMIx_Commit();
    if (rc != PMIX_SUCCESS) return pmix_fail("PMIx_Commit", seq, rc);

    pmix_proc_t all;
    PMIX_PROC_LOAD(&all, me_.nspace, PMIX_RANK_WILDCARD);
    rc = bounded_fence(all, wait_ms());
    if (rc != PMIX_SUCCESS) return pmix_fail("PMIx_Fence", seq, rc);

    for (int r = 0; r < size_; ++r) {
      pmix_proc_t peer;
      PMIX_PROC_LOAD(&peer, me_.nspace, static_cast<pmix_rank_t>(r));
      pmix_value_t *got = nullptr;
      rc = PMIx_Get(&peer, key.c_str(), nullptr, 0, &got);
      if (rc != PMIX_SUCCESS || got == nullptr) {
        return fail(QUORUM_ERR_BOOTSTRAP, "bootstrap",
                    "pmix allgather #{}: PMIx_Get of rank {}'s value on rank {}: {}", seq, r,
                    rank(), PMIx_Error_string(rc));
      }
      Status s = kOk;
      if (got->type != PMIX_BYTE_OBJECT || got->data.bo.size != bytes) {
        s = fail(QUORUM_ERR_MISMATCH, "bootstrap",
                 "pmix allgather #{}: rank {} passed {} bytes, rank {} passed {}", seq, rank(),
                 bytes, r, got->type == PMIX_BYTE_OBJECT ? got->data.bo.size : 0);
      } else if (bytes > 0) {
        std::memcpy(static_cast<uint8_t *>(out) + r * bytes, got->data.bo.bytes, bytes);
      }
      PMIX_VALUE_RELEASE(got);
      if (s != kOk) return s;
    }
    return kOk;
  }

 private:
  Status pmix_fail(const char *what, uint64_t seq, pmix_status_t rc) {
    return fail(rc == PMIX_ERR_TIMEOUT ? QUORUM_ERR_TIMEOUT : QUORUM_ERR_BOOTSTRAP, "bootstrap",
                "pmix allgather #{} on rank {} of {}: {}: {}", seq, rank(), size_, what,
                PMIx_Error_string(rc));
  }

  pmix_proc_t me_;
  int size_;
};

}  // namespace

Status make_pmix_bootstrap(bool required, std::unique_ptr<Bootstrap> *out) {
  pmix_proc_t me;
  pmix_status_t rc = PMIx_Init(&me, nullptr, 0);
  if (rc != PMIX_SUCCESS) {
    if (required) {
      return fail(QUORUM_ERR_BOOTSTRAP, "bootstrap",
                  "QUORUM_BOOTSTRAP=pmix but PMIx_Init failed ({}): not started by a PMIx "
                  "launcher?",
                  PMIx_Error_string(rc));
    }
    QLOG_DEBUG("bootstrap", "PMIx_Init: {}; trying the next bootstrap", PMIx_Error_string(rc));
    return kOk;
  }
  pmix_proc_t job;
  PMIX_PROC_LOAD(&job, me.nspace, PMIX_RANK_WILDCARD);
  pmix_value_t *value = nullptr;
  rc = PMIx_Get(&job, PMIX_JOB_SIZE, nullptr, 0, &value);
  if (rc != PMIX_SUCCESS || value == nullptr || value->type != PMIX_UINT32) {
    if (value) PMIX_VALUE_RELEASE(value);
    PMIx_Finalize(nullptr, 0);
    return fail(QUORUM_ERR_BOOTSTRAP, "bootstrap", "PMIx_Get(PMIX_JOB_SIZE) of job {}: {}",
                me.nspace, PMIx_Error_string(rc));
  }
  int size = static_cast<int>(value->data.uint32);
  PMIX_VALUE_RELEASE(value);
  if (size < 1 || me.rank >= static_cast<pmix_rank_t>(size)) {
    PMIx_Finalize(nullptr, 0);
    return fail(QUORUM_ERR_BOOTSTRAP, "bootstrap", "PMIx gives rank {} of job size {}", me.rank,
                size);
  }
  *out = std::make_unique<PmixBootstrap>(me, size);
  return kOk;
}

}  // namespace quorum
