// registry.cpp: the table of transports and the choice among them.
#include <algorithm>
#include <cstdint>

#include "runtime/knobs.hpp"
#include "runtime/log.hpp"
#include "transports/inproc/inproc_transport.hpp"
#include "transports/process_key.hpp"
#include "transports/transport.hpp"
#include "transports/ucx/ucx_transport.hpp"

namespace quorum {

Knob<std::string> knob_transport("QUORUM_TRANSPORT", "auto",
                                 "Transport to use: auto (ucx for processes, inproc for ranks "
                                 "that are threads of one process), ucx or inproc");

const std::vector<TransportInfo> &transport_table() {
  static const std::vector<TransportInfo> table = {
      {"inproc", 0, false, make_inproc_transport},
      {"ucx", 10, true, make_ucx_transport},
  };
  return table;
}

namespace {
// True if every rank runs in this process (ranks are threads). Compared by
// ProcessKey: processes in other PID namespaces or on other hosts may have
// this process's pid.
Status all_ranks_in_this_process(Bootstrap &bootstrap, bool *same) {
  const ProcessKey mine = ProcessKey::self();
  std::vector<ProcessKey> all(static_cast<size_t>(bootstrap.size()));
  QUORUM_CHECK(bootstrap.allgather(&mine, all.data(), sizeof(mine)));
  *same = std::all_of(all.begin(), all.end(), [&](const ProcessKey &k) { return k == mine; });
  return kOk;
}
}  // namespace

Status create_transport(const std::string &requested, Bootstrap &bootstrap,
                        std::unique_ptr<Transport> *out) {
  std::string name = requested.empty() ? knob_transport.get() : requested;
  const auto &table = transport_table();
  const TransportInfo *chosen = nullptr;
  if (name == "auto") {
    bool threads = false;
    QUORUM_CHECK(all_ranks_in_this_process(bootstrap, &threads));
    for (const auto &t : table) {
      if (threads ? t.name == "inproc" : t.multi_process) {
        if (!chosen || t.priority > chosen->priority) chosen = &t;
      }
    }
  } else {
    for (const auto &t : table) {
      if (t.name == name) chosen = &t;
    }
  }
  if (!chosen) {
    std::string names;
    for (const auto &t : table) names += " " + t.name;
    return fail(QUORUM_ERR_INVALID_ARG, "transport",
                "no transport '{}' for bootstrap '{}' (available:{})", name, bootstrap.name(),
                names);
  }
  *out = chosen->factory();
  QLOG_INFO("transport", "using transport {} (QUORUM_TRANSPORT={})", chosen->name, name);
  return kOk;
}

}  // namespace quorum
