// pmix_bootstrap.cpp: allgather by PMIx_Put / PMIx_Commit / PMIx_Fence (with
// data collection) / PMIx_Get from every rank. Each allgather uses a fresh key
// "quorum.ag.<seq>" (seq counted per process), so rounds never read each
// other's values. The fence and the gets are waited for with our own
// deadline: the PMIx servers do not always honour PMIX_TIMEOUT (a fence across
// a host whose link went down blocks for good, and so does a get of a dead
// rank's value), and finalize after a failure must stay short.
#include "runtime/bootstrap/pmix_bootstrap.hpp"

#include <pmix.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstring>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "runtime/knobs.hpp"
#include "runtime/log.hpp"

namespace quorum {

namespace {

std::atomic<uint64_t> g_sequence{0};

// One non-blocking PMIx call in flight. Shared by the waiter and the
// callback, so a call the waiter gave up on can still complete later without
// harm.
struct PmixWait {
  std::mutex mutex;
  std::condition_variable done_cv;
  bool done = false;
  pmix_status_t rc = PMIX_SUCCESS;
  pmix_info_t info[2];
  size_t ninfo = 0;
  std::vector<uint8_t> bytes;  // a PMIx_Get's byte object, copied
  bool got_bytes = false;
  ~PmixWait() {
    for (size_t i = 0; i < ninfo; ++i) PMIX_INFO_DESTRUCT(&info[i]);
  }
  void add_timeout(int64_t timeout_ms) {
    if (timeout_ms <= 0) return;
    int timeout_s = static_cast<int>((timeout_ms + 999) / 1000);
    PMIX_INFO_LOAD(&info[ninfo++], PMIX_TIMEOUT, &timeout_s, PMIX_INT);
  }
  // Waits for the callback until timeout_ms (<= 0: for ever); PMIX_ERR_TIMEOUT
  // if it has not come by then.
  pmix_status_t wait(int64_t timeout_ms) {
    std::unique_lock<std::mutex> lock(mutex);
    if (timeout_ms <= 0) {
      done_cv.wait(lock, [&] { return done; });
    } else if (!done_cv.wait_for(lock, std::chrono::milliseconds(timeout_ms),
                                 [&] { return done; })) {
      return PMIX_ERR_TIMEOUT;
    }
    return rc;
  }
  void finish(pmix_status_t status) {
    {
      std::lock_guard<std::mutex> lock(mutex);
      rc = status;
      done = true;
    }
    done_cv.notify_all();
  }
};

void fence_done(pmix_status_t rc, void *cbdata) {
  auto *holder = static_cast<std::shared_ptr<PmixWait> *>(cbdata);
  (*holder)->finish(rc);
  delete holder;
}

void get_done(pmix_status_t rc, pmix_value_t *kv, void *cbdata) {
  auto *holder = static_cast<std::shared_ptr<PmixWait> *>(cbdata);
  PmixWait &w = **holder;
  if (rc == PMIX_SUCCESS && kv != nullptr && kv->type == PMIX_BYTE_OBJECT) {
    std::lock_guard<std::mutex> lock(w.mutex);
    const auto *data = reinterpret_cast<const uint8_t *>(kv->data.bo.bytes);
    w.bytes.assign(data, data + kv->data.bo.size);
    w.got_bytes = true;
  }
  w.finish(rc);
  delete holder;
}

// PMIx_Fence (collecting data) bounded by timeout_ms (<= 0: none). A fence
// still running at the deadline is left to PMIx and reported as a timeout.
pmix_status_t bounded_fence(const pmix_proc_t &all, int64_t timeout_ms) {
  auto wait = std::make_shared<PmixWait>();
  bool collect = true;
  PMIX_INFO_LOAD(&wait->info[wait->ninfo++], PMIX_COLLECT_DATA, &collect, PMIX_BOOL);
  wait->add_timeout(timeout_ms);
  auto *holder = new std::shared_ptr<PmixWait>(wait);
  pmix_status_t rc = PMIx_Fence_nb(&all, 1, wait->info, wait->ninfo, &fence_done, holder);
  if (rc != PMIX_SUCCESS) {
    delete holder;
    return rc;
  }
  return wait->wait(timeout_ms);
}

// PMIx_Get of a byte object, bounded likewise: after a fence a rank's value is
// normally local, but a launcher that keeps the job running past a dead rank
// (mpirun with orte_enable_recovery) lets the fence end without the dead
// rank's value, and a plain PMIx_Get then asks the server for it for ever.
pmix_status_t bounded_get(const pmix_proc_t &peer, const std::string &key, int64_t timeout_ms,
                          std::vector<uint8_t> *bytes, bool *is_bytes) {
  auto wait = std::make_shared<PmixWait>();
  wait->add_timeout(timeout_ms);
  auto *holder = new std::shared_ptr<PmixWait>(wait);
  pmix_status_t rc = PMIx_Get_nb(&peer, key.c_str(), wait->info, wait->ninfo, &get_done, holder);
  if (rc != PMIX_SUCCESS) {
    delete holder;
    return rc;
  }
  rc = wait->wait(timeout_ms);
  if (rc == PMIX_SUCCESS) {
    std::lock_guard<std::mutex> lock(wait->mutex);
    *is_bytes = wait->got_bytes;
    *bytes = std::move(wait->bytes);
  }
  return rc;
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

    // One deadline for every rank's value, as for the fence.
    const int64_t budget_ms = wait_ms();
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::milliseconds(budget_ms);
    std::vector<uint8_t> got;
    for (int r = 0; r < size_; ++r) {
      pmix_proc_t peer;
      PMIX_PROC_LOAD(&peer, me_.nspace, static_cast<pmix_rank_t>(r));
      int64_t left_ms = 0;
      if (budget_ms > 0) {
        left_ms = std::max<int64_t>(1, std::chrono::duration_cast<std::chrono::milliseconds>(
                                           deadline - std::chrono::steady_clock::now())
                                           .count());
      }
      bool is_bytes = false;
      rc = bounded_get(peer, key, left_ms, &got, &is_bytes);
      if (rc != PMIX_SUCCESS) {
        return fail(rc == PMIX_ERR_TIMEOUT ? QUORUM_ERR_TIMEOUT : QUORUM_ERR_BOOTSTRAP, "bootstrap",
                    "pmix allgather #{}: PMIx_Get of rank {}'s value on rank {}: {}", seq, r,
                    rank(), PMIx_Error_string(rc));
      }
      if (!is_bytes || got.size() != bytes) {
        return fail(QUORUM_ERR_MISMATCH, "bootstrap",
                    "pmix allgather #{}: rank {} passed {} bytes, rank {} passed {}", seq, rank(),
                    bytes, r, is_bytes ? got.size() : 0);
      }
      if (bytes > 0) std::memcpy(static_cast<uint8_t *>(out) + r * bytes, got.data(), bytes);
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
