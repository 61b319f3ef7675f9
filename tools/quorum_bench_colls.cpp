// quorum_bench_colls.cpp: the size sweep of quorum-bench for the ordinary
// collectives. Per size and placement: check passes (fill with integer-valued
// data, one call, compare every element), then warm-up and timed calls with an
// untimed barrier before each. Each rank's mean time is allgathered, so the
// table shows avg/min/max over ranks. The two buffers are allocated and touched
// once, at the largest size, and reused for every size: page faults would
// otherwise dominate large messages.
#include "tools/quorum_bench_colls.hpp"

#include <fmt/format.h>

#include <chrono>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <vector>

#include "tools/quorum_bench_report.hpp"
#include "tools/quorum_bench_values.hpp"

namespace quorum_bench {

void die(quorum_comm_t comm, const char *what, quorum_status_t status) {
  fmt::print(stderr, "quorum-bench: rank {}: {} failed: {}: {}\n", quorum_comm_rank(comm), what,
             quorum_strerror(status), quorum_last_error());
  std::fflush(stdout);
  std::exit(1);
}

namespace {

enum class Placement { OutOfPlace, InPlace };

constexpr uint8_t kStale = 0xA5;  // what result buffers hold before a checked call

// What every rank sends to rank 0 after each size.
struct RankRecord {
  double mean_us[2];
  int64_t wrong[2];
};

void *alloc_touched(size_t bytes) {
  void *p = nullptr;
  if (posix_memalign(&p, 4096, bytes ? bytes : 64) != 0) return nullptr;
  std::memset(p, 0, bytes ? bytes : 64);  // fault every page in now, not while timing
  return p;
}

class CollBench {
 public:
  CollBench(quorum_comm_t comm, const CollOptions &o)
      : comm_(comm),
        o_(o),
        rank_(quorum_comm_rank(comm)),
        n_(quorum_comm_size(comm)),
        esize_(dtype_bytes(o.dtype)) {}
  ~CollBench() {
    if (o_.shared_buffers) {
      quorum_mem_free(comm_, send_);
      quorum_mem_free(comm_, recv_);
    } else {
      std::free(send_);
      std::free(recv_);
    }
  }

  // Collective with --shared-buffers (every rank calls it with the same size).
  bool allocate(size_t max_bytes) {
    if (o_.shared_buffers) {
      void *s = nullptr, *r = nullptr;
      const size_t bytes = max_bytes ? max_bytes : 64;
      bool ok = quorum_mem_alloc(comm_, bytes, &s) == QUORUM_OK;
      ok = quorum_mem_alloc(comm_, bytes, &r) == QUORUM_OK && ok;
      send_ = static_cast<uint8_t *>(s);
      recv_ = static_cast<uint8_t *>(r);
      if (!ok) fmt::print(stderr, "quorum-bench: quorum_mem_alloc: {}\n", quorum_last_error());
      return ok;
    }
    send_ = static_cast<uint8_t *>(alloc_touched(max_bytes));
    recv_ = static_cast<uint8_t *>(alloc_touched(max_bytes));
    return send_ && recv_;
  }

  // The element count of the full buffer for a requested size (0: skip it).
  size_t count_for(size_t bytes) const {
    if (o_.coll == Coll::Barrier) return 0;
    size_t count = bytes / esize_;
    if (o_.coll == Coll::Allgather || o_.coll == Coll::ReduceScatter) {
      count -= count % static_cast<size_t>(n_);
    }
    return count;
  }
  size_t esize() const { return esize_; }

  bool supports(Placement p) const {
    if (o_.coll == Coll::Bcast) return p == Placement::InPlace;  // one buffer only
    if (o_.coll == Coll::Barrier) return p == Placement::OutOfPlace;
    return true;
  }

  quorum_status_t call(Placement p, size_t count) {
    bool oop = p == Placement::OutOfPlace;
    switch (o_.coll) {
      case Coll::Allreduce:
        return quorum_allreduce(comm_, oop ? send_ : QUORUM_IN_PLACE, recv_, count, o_.dtype,
                                o_.op);
      case Coll::Bcast:
        return quorum_bcast(comm_, recv_, count * esize_, o_.root);
      case Coll::Allgather:
        return quorum_allgather(comm_, oop ? send_ : QUORUM_IN_PLACE, recv_,
                                count * esize_ / static_cast<size_t>(n_));
      case Coll::ReduceScatter:
        return quorum_reduce_scatter(comm_, oop ? send_ : QUORUM_IN_PLACE, recv_,
                                     count / static_cast<size_t>(n_), o_.dtype, o_.op);
      case Coll::Barrier:
        return quorum_barrier(comm_);
    }
    return QUORUM_ERR_INVALID_ARG;
  }

  void must(quorum_status_t s, const char *what) {
    if (s != QUORUM_OK) die(comm_, what, s);
  }

  // Check passes: returns the wrong elements on this rank (-1: nothing to check).
  int64_t check(Placement p, size_t count) {
    if (o_.coll == Coll::Barrier || o_.check <= 0) return -1;
    int64_t wrong = 0;
    for (int pass = 0; pass < o_.check; ++pass) {
      fill_for_check(p, count);
      must(call(p, count), coll_name(o_.coll));
      wrong += verify(p, count);
    }
    return wrong;
  }

  // Mean time per call on this rank, in microseconds.
  double time_calls(Placement p, size_t count, int warmup, int iters) {
    fill_for_timing(p, count);
    using Clock = std::chrono::steady_clock;
    for (int i = 0; i < warmup; ++i) {
      must(quorum_barrier(comm_), "barrier");
      must(call(p, count), coll_name(o_.coll));
    }
    double total_s = 0;
    for (int i = 0; i < iters; ++i) {
      must(quorum_barrier(comm_), "barrier");
      auto t0 = Clock::now();
      quorum_status_t s = call(p, count);
      auto t1 = Clock::now();
      must(s, coll_name(o_.coll));
      total_s += std::chrono::duration<double>(t1 - t0).count();
    }
    return iters ? total_s / iters * 1e6 : 0.0;
  }

 private:
  void fill_contributions(void *buf, size_t count) {
    for (size_t i = 0; i < count; ++i) {
      store_value(buf, i, o_.dtype, contribution(rank_, i, o_.op));
    }
  }

  void fill_constant(void *buf, size_t count, double v) {
    if (count == 0) return;
    auto *b = static_cast<uint8_t *>(buf);
    store_value(b, 0, o_.dtype, v);
    size_t done = 1;
    while (done < count) {  // doubling copies: fast, and no per-element switch
      size_t n = std::min(done, count - done);
      std::memcpy(b + done * esize_, b, n * esize_);
      done += n;
    }
  }

  void fill_for_check(Placement p, size_t count) {
    bool oop = p == Placement::OutOfPlace;
    size_t bytes = count * esize_;
    size_t block = bytes / static_cast<size_t>(n_);
    switch (o_.coll) {
      case Coll::Allreduce:
      case Coll::ReduceScatter:
        fill_contributions(oop ? send_ : recv_, count);
        if (oop) std::memset(recv_, kStale, o_.coll == Coll::Allreduce ? bytes : block);
        break;
      case Coll::Allgather: {
        std::memset(recv_, kStale, bytes);
        uint8_t *mine = oop ? send_ : recv_ + static_cast<size_t>(rank_) * block;
        for (size_t j = 0; j < block; ++j) mine[j] = pattern_byte(rank_, j);
        break;
      }
      case Coll::Bcast:
        if (rank_ == o_.root) {
          for (size_t j = 0; j < bytes; ++j) recv_[j] = pattern_byte(o_.root, j);
        } else {
          std::memset(recv_, kStale, bytes);
        }
        break;
      case Coll::Barrier:
        break;
    }
  }

  void fill_for_timing(Placement p, size_t count) {
    // Reductions repeated in place must not drift into inf/NaN (slow paths).
    if (o_.coll == Coll::Allreduce || o_.coll == Coll::ReduceScatter) {
      fill_constant(p == Placement::OutOfPlace ? send_ : recv_, count, neutral_value(o_.op));
    }
  }

  void report_first_wrong(Placement p, size_t index, const std::string &got,
                          const std::string &want) {
    fmt::print(stderr,
               "quorum-bench: rank {}: {} {} count {}: first wrong element {}: got {}, want {}\n",
               rank_, coll_name(o_.coll), p == Placement::OutOfPlace ? "out-of-place" : "in-place",
               count_shown_, index, got, want);
  }

  int64_t verify(Placement p, size_t count) {
    count_shown_ = count;
    int64_t wrong = 0;
    size_t bytes = count * esize_;
    size_t block = bytes / static_cast<size_t>(n_);
    switch (o_.coll) {
      case Coll::Allreduce:
      case Coll::ReduceScatter: {
        bool rs = o_.coll == Coll::ReduceScatter;
        size_t n = rs ? count / static_cast<size_t>(n_) : count;
        size_t first = rs ? static_cast<size_t>(rank_) * n : 0;
        for (size_t j = 0; j < n; ++j) {
          double got = load_value(recv_, j, o_.dtype);
          double want = expected_reduction(n_, first + j, o_.op, o_.dtype);
          if (!value_matches(got, want, o_.dtype, o_.op)) {
            if (wrong == 0)
              report_first_wrong(p, j, fmt::format("{}", got), fmt::format("{}", want));
            ++wrong;
          }
        }
        break;
      }
      case Coll::Allgather:
      case Coll::Bcast: {
        for (size_t e = 0; e < count; ++e) {
          bool bad = false;
          for (size_t b = e * esize_; b < (e + 1) * esize_; ++b) {
            int owner = o_.coll == Coll::Bcast ? o_.root : static_cast<int>(b / block);
            size_t j = o_.coll == Coll::Bcast ? b : b % block;
            if (recv_[b] != pattern_byte(owner, j)) bad = true;
          }
          if (bad) {
            if (wrong == 0) report_first_wrong(p, e, "other bytes", "the sender's pattern");
            ++wrong;
          }
        }
        break;
      }
      case Coll::Barrier:
        break;
    }
    return wrong;
  }

  quorum_comm_t comm_;
  const CollOptions &o_;
  int rank_;
  int n_;
  size_t esize_;
  uint8_t *send_ = nullptr;
  uint8_t *recv_ = nullptr;
  size_t count_shown_ = 0;
};

// Every rank says whether its setup worked; all stop together if one failed.
bool all_ranks_ok(quorum_comm_t comm, bool ok) {
  int n = quorum_comm_size(comm);
  int32_t mine = ok ? 1 : 0;
  std::vector<int32_t> all(static_cast<size_t>(n));
  quorum_status_t s = quorum_allgather(comm, &mine, all.data(), sizeof mine);
  if (s != QUORUM_OK) die(comm, "allgather (setup)", s);
  for (int32_t v : all) {
    if (!v) return false;
  }
  return true;
}

PlacementResult summarize(const std::vector<RankRecord> &records, int which, size_t bytes,
                          double factor) {
  PlacementResult r;
  r.ran = true;
  r.min_us = records[0].mean_us[which];
  r.max_us = r.min_us;
  double sum = 0;
  r.wrong = 0;
  for (const auto &rec : records) {
    double t = rec.mean_us[which];
    sum += t;
    r.min_us = std::min(r.min_us, t);
    r.max_us = std::max(r.max_us, t);
    if (rec.wrong[which] < 0) {
      r.wrong = -1;
    } else if (r.wrong >= 0) {
      r.wrong += rec.wrong[which];
    }
  }
  r.time_us = sum / static_cast<double>(records.size());
  r.algbw = r.time_us > 0 ? static_cast<double>(bytes) / r.time_us / 1e3 : 0.0;
  r.busbw = r.algbw * factor;
  return r;
}

}  // namespace

int run_collective_bench(quorum_comm_t comm, const CollOptions &o) {
  int rank = quorum_comm_rank(comm);
  int n = quorum_comm_size(comm);
  CollBench bench(comm, o);

  // The sizes on the element/rank grid, without repeats.
  std::vector<std::pair<size_t, size_t>> sizes;  // (bytes, count)
  for (size_t s : size_sweep(o)) {
    size_t count = bench.count_for(s);
    if (o.coll != Coll::Barrier && count == 0) continue;
    if (!sizes.empty() && sizes.back().second == count) continue;
    sizes.emplace_back(count * bench.esize(), count);
  }
  size_t max_bytes = 0;
  for (const auto &s : sizes) max_bytes = std::max(max_bytes, s.first);

  bool ok = true;
  if (o.coll == Coll::Bcast && (o.root < 0 || o.root >= n)) {
    if (rank == 0) fmt::print(stderr, "quorum-bench: --root {} is outside [0, {})\n", o.root, n);
    ok = false;
  }
  if (sizes.empty()) {
    if (rank == 0) {
      fmt::print(stderr,
                 "quorum-bench: no message size in [{}, {}] holds a whole {} element per rank\n",
                 o.min_bytes, o.max_bytes, dtype_name(o.dtype));
    }
    ok = false;
  }
  // Collective with --shared-buffers: every rank allocates, even after a bad option.
  if (!bench.allocate(max_bytes) && ok) {
    fmt::print(stderr, "quorum-bench: rank {}: cannot allocate 2 x {} bytes\n", rank, max_bytes);
    ok = false;
  }
  RunInfo info{coll_name(o.coll),
               dtype_name(o.dtype),
               op_name(o.op),
               std::string(quorum_comm_transport(comm)) +
                   (o.shared_buffers ? " (buffers from quorum_mem_alloc)" : ""),
               quorum_version(),
               n,
               o.root,
               o.check};
  Reporter reporter(o, info);
  if (rank == 0 && ok) ok = reporter.open();
  if (!all_ranks_ok(comm, ok)) return 1;

  if (rank == 0) reporter.header();
  double factor = busbw_factor(o.coll, n);
  std::vector<RankRecord> records(static_cast<size_t>(n));
  for (const auto &[bytes, count] : sizes) {
    int iters = o.iters > 0 ? o.iters : auto_iters(bytes);
    int warmup = o.warmup >= 0 ? o.warmup : auto_warmup(iters);
    RankRecord mine{{0, 0}, {-1, -1}};
    for (Placement p : {Placement::OutOfPlace, Placement::InPlace}) {
      if (!bench.supports(p)) continue;
      int which = p == Placement::OutOfPlace ? 0 : 1;
      mine.wrong[which] = bench.check(p, count);
      mine.mean_us[which] = bench.time_calls(p, count, warmup, iters);
    }
    quorum_status_t s = quorum_allgather(comm, &mine, records.data(), sizeof mine);
    if (s != QUORUM_OK) die(comm, "allgather (results)", s);
    if (rank != 0) continue;
    SizeResult r;
    r.bytes = bytes;
    r.count = count;
    r.iters = iters;
    r.warmup = warmup;
    if (bench.supports(Placement::OutOfPlace))
      r.out_of_place = summarize(records, 0, bytes, factor);
    if (bench.supports(Placement::InPlace)) r.in_place = summarize(records, 1, bytes, factor);
    reporter.row(r);
  }

  // Rank 0 knows the verdict; everyone exits with it.
  int32_t wrong_any = rank == 0 ? (reporter.footer() > 0 ? 1 : 0) : 0;
  std::vector<int32_t> verdicts(static_cast<size_t>(n));
  quorum_status_t s = quorum_allgather(comm, &wrong_any, verdicts.data(), sizeof wrong_any);
  if (s != QUORUM_OK) die(comm, "allgather (verdict)", s);
  if (verdicts[0]) {
    if (rank == 0) fmt::print(stderr, "quorum-bench: some results were wrong (see #wrong)\n");
    return 3;
  }
  return rank == 0 && !reporter.json_written() ? 1 : 0;
}

}  // namespace quorum_bench
