// hierarchy_pattern_test.cpp: the layout rules of the hierarchical
// algorithms (patterns/hierarchy.hpp): which host layouts fit, the columns of
// ranks with one local index, and where a rank sits.
#include <gtest/gtest.h>

#include <algorithm>
#include <string>
#include <utility>
#include <vector>

#include "collectives/patterns/hierarchy.hpp"

namespace quorum {
namespace patterns {
namespace {

TEST(Hierarchy, FitsOnlyUniformLayoutsOfSeveralHostsAndRanks) {
  namespace h = hierarchy;
  EXPECT_EQ(h::fit({{0, 1}, {2, 3}}, 4), h::Fit::kFits);
  EXPECT_EQ(h::fit({{0, 2, 4}, {1, 3, 5}}, 6), h::Fit::kFits);  // interleaved ranks
  EXPECT_EQ(h::fit({{0, 1}, {2, 3}, {4, 5}}, 6), h::Fit::kFits);
  EXPECT_EQ(h::fit({{0, 1, 2}, {3}}, 4), h::Fit::kUnevenHosts);
  EXPECT_EQ(h::fit({{0}, {1, 2, 3}}, 4), h::Fit::kUnevenHosts);
  EXPECT_EQ(h::fit({{0}, {1}}, 2), h::Fit::kOneRankPerHost);
  EXPECT_EQ(h::fit({{0, 1, 2, 3}}, 4), h::Fit::kOneHost);
  EXPECT_EQ(h::fit({}, 4), h::Fit::kOneHost);
  EXPECT_EQ(h::fit({{0, 1}, {2, 3}}, 5), h::Fit::kUnevenHosts);  // a rank on no host
  EXPECT_STREQ(h::fit_reason(h::Fit::kUnevenHosts), "hosts with unequal numbers of ranks");
}

TEST(Hierarchy, ColumnsPartitionTheRanks) {
  const std::vector<std::vector<int>> hosts = {{0, 2, 4}, {1, 3, 5}};
  EXPECT_EQ(hierarchy::column(hosts, 0), (std::vector<int>{0, 1}));
  EXPECT_EQ(hierarchy::column(hosts, 2), (std::vector<int>{4, 5}));
  EXPECT_TRUE(hierarchy::column(hosts, 3).empty());
  EXPECT_TRUE(hierarchy::column(hosts, -1).empty());
  std::vector<int> seen;
  for (int l = 0; l < 3; ++l) {
    for (int r : hierarchy::column(hosts, l)) seen.push_back(r);
  }
  std::sort(seen.begin(), seen.end());
  EXPECT_EQ(seen, (std::vector<int>{0, 1, 2, 3, 4, 5}));
}

TEST(Hierarchy, LocateFindsHostAndLocalIndex) {
  const std::vector<std::vector<int>> hosts = {{0, 2, 4}, {1, 3, 5}};
  for (int r = 0; r < 6; ++r) {
    const hierarchy::Place p = hierarchy::locate(hosts, r);
    ASSERT_GE(p.host, 0) << "rank " << r;
    EXPECT_EQ(hosts[p.host][p.local], r);
    // The rank heads its column's entry for its host.
    EXPECT_EQ(hierarchy::column(hosts, p.local)[p.host], r);
  }
  EXPECT_EQ(hierarchy::locate(hosts, 4).host, 0);
  EXPECT_EQ(hierarchy::locate(hosts, 4).local, 2);
  EXPECT_EQ(hierarchy::locate(hosts, 6).host, -1);
  EXPECT_EQ(hierarchy::locate(hosts, -1).local, -1);
}

// On 2 hosts of L ranks (blocked and interleaved): every rank sends to one
// rank of the other host and receives from one, the two ends agree, and no
// connection between the hosts carries data both ways.
TEST(Hierarchy, OneWayPairingLinksEachConnectionOneWay) {
  for (int l = 2; l <= 6; ++l) {
    for (bool interleaved : {false, true}) {
      SCOPED_TRACE("L " + std::to_string(l) + (interleaved ? " interleaved" : " blocked"));
      std::vector<std::vector<int>> hosts(2);
      for (int r = 0; r < 2 * l; ++r) hosts[interleaved ? r % 2 : r / l].push_back(r);
      std::vector<std::pair<int, int>> links;  // (from, to)
      for (int h = 0; h < 2; ++h) {
        for (int i = 0; i < l; ++i) {
          const int me = hosts[h][i];
          const hierarchy::OneWayPair p = hierarchy::one_way_pair(hosts, h, i);
          EXPECT_EQ(hierarchy::locate(hosts, p.send_to).host, 1 - h);
          EXPECT_EQ(hierarchy::locate(hosts, p.recv_from).host, 1 - h);
          const hierarchy::Place to = hierarchy::locate(hosts, p.send_to);
          EXPECT_EQ(hierarchy::one_way_pair(hosts, to.host, to.local).recv_from, me);
          links.push_back({me, p.send_to});
        }
      }
      for (const auto &[from, to] : links) {
        EXPECT_EQ(std::count(links.begin(), links.end(), std::make_pair(to, from)), 0)
            << from << " <-> " << to << " both ways";
      }
    }
  }
}

}  // namespace
}  // namespace patterns
}  // namespace quorum
