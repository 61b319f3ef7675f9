// shm_use_test.cpp: the one decision whether shared memory carries a call
// (collectives/shm/shm_use.cpp), on a one-rank channel: which kinds may use
// it, how device buffers, a broken channel and the signature check change
// that, what the knobs choose, and the table's flags that replace the
// algorithm names.
#include <gtest/gtest.h>

#include <cstring>
#include <optional>
#include <string>

#include "collectives/algorithms/algorithm.hpp"
#include "collectives/shm/shm.hpp"
#include "runtime/knobs.hpp"
#include "tests/support/one_rank_channel.hpp"

namespace quorum {
namespace {

using test::one_rank_channel;

CollArgs call(CollKind kind) {
  static float buf[4];
  return CollArgs{kind, buf, buf, 4, QUORUM_FLOAT32, QUORUM_SUM, 0};
}

bool always_device(const void *, const void *) {
  return true;
}
bool never_device(const void *, const void *) {
  return false;
}

TEST(ShmUse, ChannelOnlyOverUcxWithEveryRankOnThisHost) {
  EXPECT_TRUE(shm_channel_wanted("ucx", 4, 4));
  EXPECT_FALSE(shm_channel_wanted("ucx", 2, 4));  // ranks on another host
  EXPECT_FALSE(shm_channel_wanted("inproc", 4, 4));
  KnobBase *knob = find_knob("QUORUM_SHM");
  ASSERT_NE(knob, nullptr);
  knob->set_override(std::string("0"));
  EXPECT_FALSE(shm_channel_wanted("ucx", 4, 4));
  knob->set_override(std::nullopt);
}

TEST(ShmUse, AllreduceAndBarrierOnly) {
  auto ch = one_rank_channel();
  ASSERT_TRUE(ch);
  EXPECT_FALSE(shm_usable(nullptr, call(CollKind::Allreduce)));
  EXPECT_TRUE(shm_usable(ch.get(), call(CollKind::Allreduce)));
  EXPECT_TRUE(shm_usable(ch.get(), call(CollKind::Barrier)));
  for (CollKind kind : {CollKind::Bcast, CollKind::Allgather, CollKind::ReduceScatter,
                        CollKind::Alltoall, CollKind::Reduce}) {
    EXPECT_FALSE(shm_usable(ch.get(), call(kind))) << coll_kind_name(kind);
  }
}

TEST(ShmUse, DeviceBuffersGoOverMessages) {
  auto ch = one_rank_channel();
  ASSERT_TRUE(ch);
  ShmCallFacts facts;
  facts.device_buffers = always_device;
  EXPECT_FALSE(shm_usable(ch.get(), call(CollKind::Allreduce), facts));
  facts.device_buffers = never_device;
  EXPECT_TRUE(shm_usable(ch.get(), call(CollKind::Allreduce), facts));
}

TEST(ShmUse, MismatchEndsAllreducesOnlyWithTheSignatureCheck) {
  auto ch = one_rank_channel();
  ASSERT_TRUE(ch);
  ch->set_broken(QUORUM_ERR_MISMATCH);
  ShmCallFacts checked;
  checked.signature_check = true;
  EXPECT_TRUE(shm_after_mismatch(ch.get(), call(CollKind::Allreduce), true));
  EXPECT_FALSE(shm_after_mismatch(ch.get(), call(CollKind::Allreduce), false));
  EXPECT_FALSE(shm_after_mismatch(ch.get(), call(CollKind::Barrier), true));
  EXPECT_FALSE(shm_usable(ch.get(), call(CollKind::Allreduce), checked));
  // Unchecked (a partial object's rounds): the shm allreduce itself reports
  // the broken channel.
  EXPECT_TRUE(shm_usable(ch.get(), call(CollKind::Allreduce)));
  // A barrier on any broken channel takes messages.
  EXPECT_FALSE(shm_usable(ch.get(), call(CollKind::Barrier), checked));
  EXPECT_FALSE(shm_usable(ch.get(), call(CollKind::Barrier)));
}

TEST(ShmUse, PeerFailureLeavesAllreducesOnTheChannel) {
  auto ch = one_rank_channel();
  ASSERT_TRUE(ch);
  ch->set_broken(QUORUM_ERR_PEER_FAILED, 0);
  ShmCallFacts checked;
  checked.signature_check = true;
  EXPECT_FALSE(shm_after_mismatch(ch.get(), call(CollKind::Allreduce), true));
  EXPECT_TRUE(shm_usable(ch.get(), call(CollKind::Allreduce), checked));
  EXPECT_FALSE(shm_usable(ch.get(), call(CollKind::Barrier), checked));
}

TEST(ShmUse, KnobsChooseSharedMemory) {
  KnobBase *algo = find_knob("QUORUM_ALLREDUCE_ALGO");
  KnobBase *automatic = find_knob("QUORUM_ALLREDUCE_SHM_AUTO");
  ASSERT_NE(algo, nullptr);
  ASSERT_NE(automatic, nullptr);
  const struct {
    const char *algo, *automatic;
    bool uses;
  } cases[] = {{"auto", "1", true}, {"auto", "0", false}, {"hierarchical", "1", true},
               {"shm", "0", true},  {"ring", "1", false}, {"recursive_doubling", "1", false}};
  for (const auto &c : cases) {
    algo->set_override(std::string(c.algo));
    automatic->set_override(std::string(c.automatic));
    EXPECT_EQ(allreduce_uses_shm(), c.uses) << c.algo << " auto " << c.automatic;
  }
  algo->set_override(std::nullopt);
  automatic->set_override(std::nullopt);
}

// The table's flags, which replace comparisons with the algorithms' names.
TEST(ShmUse, TableMarksTheSharedMemoryAllreduce) {
  int shm = 0;
  for (const AlgorithmInfo &a : algorithm_table()) {
    const bool is_shm = a.kind == CollKind::Allreduce && std::strcmp(a.name, "shm") == 0;
    EXPECT_EQ(a.medium == AlgorithmMedium::SharedMemory, is_shm) << a.name;
    shm += is_shm;
  }
  EXPECT_EQ(shm, 1);
  KnobBase *algo = find_knob("QUORUM_ALLREDUCE_ALGO");
  KnobBase *automatic = find_knob("QUORUM_ALLREDUCE_SHM_AUTO");
  ASSERT_NE(algo, nullptr);
  ASSERT_NE(automatic, nullptr);
  algo->set_override(std::string("auto"));
  automatic->set_override(std::string("1"));
  const AlgorithmInfo *chosen = nullptr;
  ASSERT_EQ(select_algorithm(call(CollKind::Allreduce), 2, &chosen, true), kOk);
  EXPECT_EQ(chosen->medium, AlgorithmMedium::SharedMemory);
  ASSERT_EQ(select_algorithm(call(CollKind::Allreduce), 2, &chosen, false), kOk);
  EXPECT_EQ(chosen->medium, AlgorithmMedium::Messages);
  algo->set_override(std::nullopt);
  automatic->set_override(std::nullopt);
}

TEST(ShmUse, WhichAlgorithmsCheckSignaturesThemselves) {
  const AlgorithmInfo *shm = nullptr, *rd = nullptr, *ring = nullptr;
  for (const AlgorithmInfo &a : algorithm_table()) {
    if (a.kind != CollKind::Allreduce) continue;
    if (std::strcmp(a.name, "shm") == 0) shm = &a;
    if (std::strcmp(a.name, "recursive_doubling") == 0) rd = &a;
    if (std::strcmp(a.name, "ring") == 0) ring = &a;
  }
  ASSERT_TRUE(shm && rd && ring);
  CollArgs small = call(CollKind::Allreduce);
  CollArgs large = small;
  large.count = kSignatureInlineBytes / sizeof(float) + 1;
  EXPECT_TRUE(algorithm_checks_signature(small, *shm));
  EXPECT_TRUE(algorithm_checks_signature(large, *shm));
  EXPECT_TRUE(algorithm_checks_signature(small, *rd));
  EXPECT_FALSE(algorithm_checks_signature(large, *rd));
  EXPECT_FALSE(algorithm_checks_signature(small, *ring));
  // Other kinds take the separate check.
  EXPECT_FALSE(algorithm_checks_signature(call(CollKind::Barrier), *shm));
}

}  // namespace
}  // namespace quorum
