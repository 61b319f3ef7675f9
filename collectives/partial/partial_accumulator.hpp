// partial_accumulator.hpp: what this rank contributes to a partial allreduce's
// rounds, and the buffers that hold it. The accumulator gathers this rank's
// input to the next round it joins: its fresh post, or late posts carried
// (times the carry weight) with their staleness, or nothing (the op's
// identity); late posts in drop mode are only counted. Joining a round takes
// the accumulator as the round's buffer and puts an empty one in its place.
// Also the buffer pool (symmetric buffers in shared memory first, then plain
// ones, at most max_staleness + 2), the lent post and result (post_ref,
// wait_ref), and the statistics (dropped, carried, fresh histogram).
//
// Everything runs with the engine mutex held except the copy of a post into
// the accumulator, which runs between begin_copy() and end_copy(): meanwhile
// the activation tree defers joins (see partial_allreduce.hpp, "Snapshot").
// Not installed.
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

#include "collectives/partial/partial_context.hpp"
#include "runtime/memory.hpp"
#include "runtime/status.hpp"

namespace quorum::partial {

// This rank's input to a round it joins, taken from the accumulator.
struct RoundInput {
  uint8_t *buf = nullptr;         // the round's buffer: its input here, then its result
  const uint8_t *send = nullptr;  // where the round reads this rank's input (buf or a lent post)
  bool empty = false;             // nothing posted: the round needs the op's identity
  bool own_fresh = false;         // this rank's post for the round is in it
  uint64_t post_ns = 0;           // when that post happened (0: none)
  int own_carried = 0;            // late posts of this rank that ride in the round
  uint64_t own_staleness = 0;     // their summed lateness, in rounds
};

class PartialAccumulator {
 public:
  explicit PartialAccumulator(PartialContext &ctx) : ctx_(ctx) {}
  ~PartialAccumulator();
  PartialAccumulator(const PartialAccumulator &) = delete;
  PartialAccumulator &operator=(const PartialAccumulator &) = delete;

  // Creation. Collective: symmetric round buffers in shared memory, all or none.
  Status reserve_symmetric_buffers();
  Status make_accumulator();

  // A device-memory contribution is staged through host memory; *contribution
  // then points at the staging buffer.
  Status stage_device_post(const void **contribution);

  // The copy of a post, without the engine mutex (begin/end with it held).
  void begin_copy() { copying_ = true; }
  void end_copy() { copying_ = false; }
  bool copying() const { return copying_; }
  // Adds a post to the accumulator (a late one times the carry weight).
  Status add_post(const void *contribution, bool late);

  // Mutex held, after the copy: the accumulator holds a post for the next
  // round to join (fresh), or one for round `posted_for` already joined (late).
  void note_fresh_post();
  void note_late_post(uint64_t posted_for);
  void note_dropped_post() { ++dropped_; }
  // post_ref: whether `contribution` can be lent to the next round as all of
  // this rank's input; lend_post() lends it (fresh).
  bool can_lend(const void *contribution) const;
  void lend_post(const void *contribution);
  bool empty() const { return accumulator_empty_; }

  // Joining round `round`: takes the accumulator as its input and puts an
  // empty buffer in its place. False when no buffer is left (nothing changed).
  bool take_round_input(uint64_t round, RoundInput *in);

  // A consumed round's buffer: back to the pool, or lent (wait_ref) until
  // return_lent() at the next call.
  void recycle(uint8_t *buf) { free_.push_back(buf); }
  void lend_result(uint8_t *buf) { lent_ = buf; }
  void return_lent();
  void count_round(int fresh) { ++histogram_[static_cast<size_t>(fresh)]; }

  // Statistics (mutex held).
  uint64_t dropped() const { return dropped_; }
  uint64_t carried() const { return carried_; }
  const std::vector<uint64_t> &fresh_histogram() const { return histogram_; }
  size_t allocated() const { return allocated_; }
  size_t plain_buffers() const { return buffers_.size(); }
  size_t symmetric_unused() const { return symmetric_.size(); }
  bool has_symmetric() const { return symmetric_begin_ != nullptr; }

 private:
  // The first kSymmetricBuffers are symmetric (in the shm channel's regions,
  // made at creation) so that rounds whose buffers every rank has there
  // reduce zero-copy; the rest are plain and allocated on demand. A free
  // symmetric buffer is always taken before a free plain one.
  static constexpr size_t kSymmetricBuffers = 4;
  uint8_t *new_buffer();  // nullptr when out of memory
  uint8_t *take_free_buffer();
  bool is_symmetric(const uint8_t *b) const { return b >= symmetric_begin_ && b < symmetric_end_; }
  // A late post times carry_weight, in staging_; *contribution then points there.
  Status weigh_late_post(const void **contribution);
  Status accumulate(const void *contribution);

  PartialContext &ctx_;
  std::vector<uint8_t *> symmetric_;  // symmetric, not yet handed out
  const uint8_t *symmetric_begin_ = nullptr, *symmetric_end_ = nullptr;
  std::vector<AlignedBuffer> buffers_;  // plain ones
  size_t allocated_ = 0;                // handed out, symmetric or plain
  std::vector<uint8_t *> free_;
  uint8_t *accumulator_ = nullptr;
  // Nothing was posted into the accumulator since it was taken: its bytes are
  // stale (buffers are never cleared). The first post copies into it; a join
  // with it empty contributes the identity (the shm allreduce fills its slot
  // with it or, zero-copy, skips this rank; otherwise the buffer is filled).
  bool accumulator_empty_ = true;
  bool copying_ = false;
  uint8_t *lent_ = nullptr;  // the result wait_ref handed out (one more buffer while lent)
  const uint8_t *lent_post_ = nullptr;  // post_ref's buffer until its round is joined
  AlignedBuffer staging_;  // host copy of a device-memory contribution, or a weighted late one

  bool fresh_pending_ = false;  // the accumulator holds a post for the next round to join
  uint64_t pending_post_ns_ = 0;
  // Late posts in the accumulator since the last join, and the sum of the
  // rounds they were posted for (their staleness is known when they ride).
  int carried_pending_ = 0;
  uint64_t carried_pending_rounds_ = 0;
  uint64_t dropped_ = 0;
  uint64_t carried_ = 0;
  std::vector<uint64_t> histogram_;
};

}  // namespace quorum::partial
