// communicator_submit.cpp: Communicator::submit, the entry for schedules built
// outside Communicator::start: point-to-point transfers (which take no
// sequence number, so the ranks that do not take part stay in step for the
// next collective) and the collectives of more_collectives.cpp (which take
// theirs themselves).
#include "collectives/communicator.hpp"
#include "runtime/knobs.hpp"

namespace quorum {

Status Communicator::submit(std::unique_ptr<Schedule> schedule, const std::string &what,
                            RequestPtr *req, bool blocking,
                            std::vector<ScratchPool::Lease> leases) {
  if (finalized_)
    return fail(QUORUM_ERR_INVALID_ARG, "comm", "{}: communicator is finalized", what);
  if (!engine_) return fail(QUORUM_ERR_INVALID_ARG, "comm", "{}: no progress engine", what);
  if (!blocking) want_progress_thread();
  auto request = std::make_shared<Request>(std::move(schedule),
                                           Deadline::after_ms(knob_timeout_ms.get()), what);
  if (!leases.empty()) {
    auto held = std::make_shared<std::vector<ScratchPool::Lease>>(std::move(leases));
    request->on_complete = [held](Status) mutable { held->clear(); };
  }
  if (!blocking) live_.add(request);
  engine_->submit(request, blocking);
  *req = std::move(request);
  return kOk;
}

}  // namespace quorum
