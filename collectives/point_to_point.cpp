// point_to_point.cpp: quorum_send/recv as one-task schedules (see the header).
#include "collectives/point_to_point.hpp"

#include <fmt/format.h>

#include "collectives/algorithms/algorithm.hpp"
#include "collectives/tasks.hpp"
#include "runtime/memory.hpp"

namespace quorum {
namespace {

Status check_args(Communicator &comm, const char *what, const void *buf, size_t bytes, int peer,
                  int tag) {
  if (peer < 0 || peer >= comm.size()) {
    return fail(QUORUM_ERR_INVALID_ARG, "api", "{}: peer {} outside [0, {})", what, peer,
                comm.size());
  }
  if (peer == comm.rank()) {
    return fail(QUORUM_ERR_INVALID_ARG, "api", "{}: rank {} names itself as the peer", what, peer);
  }
  if (tag < 0 || tag > kMaxUserTag) {
    return fail(QUORUM_ERR_INVALID_ARG, "api", "{}: tag {} outside [0, {}]", what, tag,
                kMaxUserTag);
  }
  if (bytes > 0 && buf == nullptr)
    return fail(QUORUM_ERR_INVALID_ARG, "api", "{}: NULL buffer", what);
  if (bytes > (size_t{1} << 56)) {
    return fail(QUORUM_ERR_INVALID_ARG, "api", "{}: {} bytes is too large", what, bytes);
  }
  if (bytes > 0 && buffer_kind(buf) == BufferKind::Device) {
    return fail(QUORUM_ERR_UNSUPPORTED, "api", "{}: device buffers are not supported (host only)",
                what);
  }
  return kOk;
}

uint64_t user_tag(int tag) {
  return make_tag(CollKind::PointToPoint, static_cast<uint64_t>(tag), 0);
}

}  // namespace

Status point_to_point_send(Communicator &comm, const void *buf, size_t bytes, int peer, int tag,
                           RequestPtr *req, bool blocking) {
  QUORUM_CHECK(check_args(comm, "send", buf, bytes, peer, tag));
  std::string what = fmt::format("send of {} B to rank {} (tag {})", bytes, peer, tag);
  auto schedule = std::make_unique<Schedule>(what);
  schedule->add(std::make_unique<SendTask>(comm.transport(), peer, user_tag(tag), buf, bytes));
  return comm.submit(std::move(schedule), what, req, blocking);
}

Status point_to_point_recv(Communicator &comm, void *buf, size_t bytes, int peer, int tag,
                           RequestPtr *req, bool blocking) {
  QUORUM_CHECK(check_args(comm, "recv", buf, bytes, peer, tag));
  std::string what = fmt::format("recv of {} B from rank {} (tag {})", bytes, peer, tag);
  auto schedule = std::make_unique<Schedule>(what);
  schedule->add(std::make_unique<RecvTask>(comm.transport(), peer, user_tag(tag), buf, bytes));
  return comm.submit(std::move(schedule), what, req, blocking);
}

}  // namespace quorum
