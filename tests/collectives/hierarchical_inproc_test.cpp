// hierarchical_inproc_test.cpp: the hierarchical allgather and reduce-scatter
// (and the other hierarchical collectives) as threads over inproc on
// simulated hosts (CommOptions::host_id per rank), P = 2..8: every uniform
// layout, blocked and interleaved, takes them (forced and by the default
// rule) with exact results (every dtype; AVG within the cases' tolerance);
// uneven layouts and one rank per host fall back to the ring.
#include <gtest/gtest.h>

#include <string>
#include <thread>
#include <vector>

#include "collectives/algorithms/algorithm.hpp"
#include "collectives/communicator.hpp"
#include "collectives/patterns/hierarchy.hpp"
#include "runtime/bootstrap/thread_group_bootstrap.hpp"
#include "tests/collectives/collective_cases.hpp"
#include "tests/support/knob_override.hpp"

namespace quorum {
namespace {

namespace hier = patterns::hierarchy;

// A layout: the host id of every rank.
struct Layout {
  std::string name;
  std::vector<std::string> host_of;
};

std::vector<Layout> layouts(int p) {
  std::vector<Layout> out;
  for (int l = 2; l < p; ++l) {
    if (p % l != 0) continue;
    const int h = p / l;
    Layout blocked{std::to_string(h) + "x" + std::to_string(l) + " blocked", {}};
    Layout interleaved{std::to_string(h) + "x" + std::to_string(l) + " interleaved", {}};
    for (int r = 0; r < p; ++r) {
      blocked.host_of.push_back("h" + std::to_string(r / l));
      interleaved.host_of.push_back("h" + std::to_string(r % h));
    }
    out.push_back(blocked);
    out.push_back(interleaved);
  }
  Layout uneven{"uneven", {}}, single{"one rank per host", {}};
  for (int r = 0; r < p; ++r) {
    uneven.host_of.push_back(r == 0 ? "h0" : "h1");
    single.host_of.push_back("h" + std::to_string(r));
  }
  if (p > 2) out.push_back(uneven);
  out.push_back(single);
  return out;
}

// Runs body on P threads, rank r on host layout.host_of[r].
void run_on_hosts(const Layout &layout, const std::function<void(Communicator &)> &body) {
  const int p = static_cast<int>(layout.host_of.size());
  auto group = ThreadGroup::create(p);
  std::vector<std::thread> threads;
  for (int r = 0; r < p; ++r) {
    threads.emplace_back([&, r] {
      CommOptions options;
      options.transport = "inproc";
      options.host_id = layout.host_of[r];
      std::unique_ptr<Communicator> comm;
      ASSERT_EQ(Communicator::create(group->bootstrap(r), &comm, options), QUORUM_OK)
          << "rank " << r << ": " << last_error();
      body(*comm);
      EXPECT_EQ(comm->finalize(), QUORUM_OK) << "rank " << r << ": " << last_error();
    });
  }
  for (auto &t : threads) t.join();
}

// The algorithm the table picks for `kind` on this communicator.
std::string chosen(Communicator &c, CollKind kind) {
  CollArgs args;
  args.kind = kind;
  args.count = 1 << 20;
  const AlgorithmInfo *algo = nullptr;
  EXPECT_EQ(select_algorithm(args, c.size(), &algo, false, &c.layout()), QUORUM_OK);
  return algo ? algo->name : "";
}

class Hierarchical : public ::testing::TestWithParam<int> {};

// full: every dtype and op of the reduce-scatter (else the table's choice
// and the allgather only).
void check_layouts(int p, const char *mode, bool full) {
  for (const Layout &layout : layouts(p)) {
    SCOPED_TRACE(layout.name);
    run_on_hosts(layout, [&](Communicator &c) {
      const bool fits = hier::fit(c.layout().hosts, c.size()) == hier::Fit::kFits;
      const std::string want = fits ? "hierarchical" : "ring";
      EXPECT_EQ(chosen(c, CollKind::Allgather), want) << "rank " << c.rank() << " " << mode;
      EXPECT_EQ(chosen(c, CollKind::ReduceScatter), want) << "rank " << c.rank() << " " << mode;
      test::AllgatherInAndOutOfPlace(c);
      if (!full) return;
      test::ReduceScatterEveryDtype(c);
      // Mixed with the other hierarchical collectives in one sequence.
      test::BarrierAndMixedSequence(c);
    });
  }
}

TEST_P(Hierarchical, AllgatherAndReduceScatterForced) {
  test::KnobOverride ag("QUORUM_ALLGATHER_ALGO", "hierarchical");
  test::KnobOverride rs("QUORUM_REDUCE_SCATTER_ALGO", "hierarchical");
  check_layouts(GetParam(), "forced", true);
}

TEST_P(Hierarchical, AllgatherAndReduceScatterByDefault) {
  check_layouts(GetParam(), "auto", false);
}

// The hierarchical allreduce, broadcast and barrier on the layouts that fit.
TEST_P(Hierarchical, OtherCollectivesForced) {
  test::KnobOverride ar("QUORUM_ALLREDUCE_ALGO", "hierarchical");
  test::KnobOverride bc("QUORUM_BCAST_ALGO", "hierarchical");
  test::KnobOverride ba("QUORUM_BARRIER_ALGO", "hierarchical");
  for (const Layout &layout : layouts(GetParam())) {
    if (layout.name == "uneven" || layout.name == "one rank per host") continue;
    SCOPED_TRACE(layout.name);
    run_on_hosts(layout, [](Communicator &c) {
      test::AllreduceEveryDtypeAndOp(c);
      test::BcastFromEveryRoot(c);
      test::BarrierAndMixedSequence(c);
    });
  }
}

INSTANTIATE_TEST_SUITE_P(P, Hierarchical, ::testing::Range(2, 9),
                         [](const auto &info) { return "P" + std::to_string(info.param); });

}  // namespace
}  // namespace quorum
