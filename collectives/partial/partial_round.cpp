// partial_round.cpp: one round of a partial allreduce (see partial_round.hpp):
// its schedule, an ordinary allreduce of the data picked as for a plain
// allreduce plus a recursive-doubling sum of the int64 header, and the
// checks of the reduced header.
#include "collectives/partial/partial_round.hpp"

#include <cstring>
#include <utility>

#include "collectives/algorithms/algorithms.hpp"
#include "collectives/reduce/reduce_kernels.hpp"
#include "runtime/clock.hpp"

namespace quorum::partial {

Status build_round(PartialContext &ctx, uint64_t round, const RoundInput &in, JoinKind kind,
                   std::unique_ptr<Round> *out) {
  auto r = std::make_unique<Round>();
  r->id = round;
  r->buf = in.buf;
  r->synchronous = kind.synchronous;
  r->flush = kind.flush;
  r->own_fresh = in.own_fresh;
  r->info.round = round;
  r->info.own_fresh = in.own_fresh;
  r->info.post_ns = in.post_ns;
  r->info.join_ns = now_ns();
  r->info.own_carried = in.own_carried;
  r->info.own_staleness = in.own_staleness;

  r->header.assign(ctx.header_words, 0);
  r->header[kHdrRound] = static_cast<int64_t>(round & 0xffffffffu);
  r->header[kHdrSync] = kind.synchronous ? 1 : 0;
  r->header[kHdrFlush] = kind.flush ? 1 : 0;
  r->header[kHdrCarried] = r->info.own_carried;
  r->header[kHdrStaleness] = static_cast<int64_t>(r->info.own_staleness);
  const size_t word = static_cast<size_t>(ctx.rank) / 32;
  const int64_t bit = int64_t{1} << (ctx.rank % 32);
  if (r->own_fresh) r->header[kHdrBitmaps + word] |= bit;
  if (kind.self_activated) r->header[kHdrBitmaps + ctx.bitmap_words + word] |= bit;

  r->sched = std::make_unique<Schedule>(fmt::format("partial #{} round {}", ctx.object_id, round));
  CollArgs data{CollKind::Allreduce, in.send, r->buf, ctx.count, ctx.dtype, ctx.op, 0};
  const AlgorithmInfo *algo = nullptr;
  Status s = kOk;
  TaskId last = -1;
  Builder bd(*r->sched, ctx.transport, ctx.rank, ctx.size, CollKind::PartialData,
             round_seq(ctx.object_id, round), ctx.comm.scratch());
  if (ctx.size == 1) {
    if (in.empty) fill_identity(r->buf, ctx.count, ctx.dtype, ctx.op);
    s = build_allreduce_recursive_doubling(bd, data, &last);
  } else {
    // The same rule as a plain allreduce, so that rounds where every rank is
    // fresh give the plain allreduce's bits.
    if (ctx.shm) bd.set_shm(ctx.shm.get());
    bd.set_layout(&ctx.comm.layout());
    s = select_algorithm(data, ctx.size, &algo, shm_usable(ctx.shm.get(), data),
                         &ctx.comm.layout());
    // An empty accumulator: the shm allreduce puts the identity in its slots
    // itself (or skips this rank when zero-copy); the others need it written.
    if (s == kOk && in.empty) {
      if (algo->medium == AlgorithmMedium::SharedMemory) {
        data.send_identity = true;
      } else {
        fill_identity(r->buf, ctx.count, ctx.dtype, ctx.op);
      }
    }
    if (s == kOk) s = algo->build(bd, data, &last);
  }
  CollArgs hdr{CollKind::Allreduce,
               r->header.data(),
               r->header.data(),
               ctx.header_words,
               QUORUM_INT64,
               QUORUM_SUM,
               0};
  Builder bh(*r->sched, ctx.transport, ctx.rank, ctx.size, CollKind::PartialControl,
             round_seq(ctx.object_id, round), ctx.comm.scratch());
  if (s == kOk) s = build_allreduce_recursive_doubling(bh, hdr, &last);
  if (s != kOk) return s;
  r->leases = bd.take_leases();
  for (auto &l : bh.take_leases()) r->leases.push_back(std::move(l));
  *out = std::move(r);
  return kOk;
}

Status read_round_header(const PartialContext &ctx, Round &r) {
  const auto &h = r.header;
  const int64_t p = ctx.size;
  if (h[kHdrRound] != p * static_cast<int64_t>(r.id & 0xffffffffu) ||
      (h[kHdrSync] != 0 && h[kHdrSync] != p) || (h[kHdrFlush] != 0 && h[kHdrFlush] != p)) {
    return fail(QUORUM_ERR_MISMATCH, "partial",
                "partial #{} rank {}: round {} header disagrees across ranks (round sum {}, {} of "
                "{} ranks synchronous, {} flushing): the ranks called post/wait/flush in "
                "different orders",
                ctx.object_id, ctx.rank, r.id, h[kHdrRound], h[kHdrSync], p, h[kHdrFlush]);
  }
  PartialRoundInfo &info = r.info;
  info.synchronous = h[kHdrSync] == p;
  info.flush = h[kHdrFlush] == p;
  info.carried = h[kHdrCarried];
  info.staleness = static_cast<uint64_t>(h[kHdrStaleness]);
  info.complete_ns = now_ns();
  info.fresh = 0;
  info.initiator = -1;
  info.fresh_ranks.clear();
  for (int q = 0; q < ctx.size; ++q) {
    const size_t w = static_cast<size_t>(q) / 32;
    const int64_t bit = int64_t{1} << (q % 32);
    if (h[kHdrBitmaps + w] & bit) {
      ++info.fresh;
      info.fresh_ranks.push_back(q);
    }
    if (!info.synchronous && info.initiator < 0 && (h[kHdrBitmaps + ctx.bitmap_words + w] & bit)) {
      info.initiator = q;
    }
  }
  return kOk;
}

}  // namespace quorum::partial
