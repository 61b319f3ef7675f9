// partial_object_ids_test.cpp: live partial objects never share message tags.
// Tags keep the low 8 bits of an object's id, so at most 256 objects live on
// a communicator at once (the 257th create is refused, clearly) and an id is
// chosen that no live object's tags use, the same on every rank.
#include <gtest/gtest.h>

#include <memory>
#include <string>
#include <vector>

#include "collectives/object_ids.hpp"
#include "collectives/partial/partial_allreduce.hpp"
#include "tests/support/thread_ranks.hpp"

namespace quorum {
namespace {

using test::run_ranks;

bool mentions(const std::string &text, const std::string &what) {
  return text.find(what) != std::string::npos;
}

TEST(ObjectIds, SkipsLiveLowBitsAndRefusesA257th) {
  ObjectIds ids;
  uint64_t id = 0;
  for (uint64_t i = 0; i < 256; ++i) {
    ASSERT_EQ(ids.acquire(&id), kOk);
    EXPECT_EQ(id, i);
  }
  EXPECT_EQ(ids.acquire(&id), QUORUM_ERR_NO_MEMORY);
  EXPECT_TRUE(mentions(last_error(), "at most 256 live partial objects per communicator"))
      << last_error();
  ids.release(7);
  ASSERT_EQ(ids.acquire(&id), kOk);
  EXPECT_EQ(id, 256u + 7) << "the first id after the last one whose low bits are free";
  EXPECT_EQ(ids.live(), 256u);
  for (uint64_t i = 0; i < 256; ++i) ids.release(i == 7 ? 263 : i);
  EXPECT_EQ(ids.live(), 0u);
  ASSERT_EQ(ids.acquire(&id), kOk);
  EXPECT_EQ(id, 264u);
}

std::unique_ptr<PartialAllreduce> make(Communicator &c, size_t count, Status *s) {
  PartialOptions o;
  o.max_staleness = 0;  // every round synchronous: its result is the sum of all posts
  std::unique_ptr<PartialAllreduce> p;
  *s = PartialAllreduce::create(c, count, QUORUM_INT64, QUORUM_SUM, o, &p);
  return p;
}

TEST(PartialObjectIds, At256LiveObjectsCreateIsRefusedUntilOneIsDestroyed) {
  run_ranks(2, [](Communicator &c) {
    std::vector<std::unique_ptr<PartialAllreduce>> objects;
    Status s = kOk;
    for (int i = 0; i < 256; ++i) {
      objects.push_back(make(c, 1, &s));
      ASSERT_EQ(s, kOk) << "object " << i << ": " << last_error();
    }
    EXPECT_EQ(make(c, 1, &s), nullptr);
    EXPECT_EQ(s, QUORUM_ERR_NO_MEMORY);
    EXPECT_TRUE(mentions(last_error(), "at most 256 live partial objects per communicator"))
        << last_error();
    ASSERT_EQ(objects[5]->destroy(), kOk) << last_error();
    const uint64_t freed = objects[5]->object_id();
    objects[5].reset();
    objects[5] = make(c, 1, &s);
    ASSERT_EQ(s, kOk) << last_error();
    EXPECT_EQ(objects[5]->object_id() % 256, freed % 256);
    int64_t mine = c.rank() + 1, sum = 0;
    ASSERT_EQ(objects[5]->post(&mine), kOk) << last_error();
    ASSERT_EQ(objects[5]->wait(&sum), kOk) << last_error();
    EXPECT_EQ(sum, 3);
    for (auto &o : objects) EXPECT_EQ(o->destroy(), kOk) << last_error();
  });
}

// A created, then 255 objects made and destroyed, then B: B is A's id + 256
// by creation count. Both live, posted in opposite orders on the two ranks,
// each round's result is still its own sum.
TEST(PartialObjectIds, ObjectsCreated256ApartWorkSideBySide) {
  run_ranks(2, [](Communicator &c) {
    Status s = kOk;
    auto a = make(c, 3, &s);
    ASSERT_EQ(s, kOk) << last_error();
    for (int i = 0; i < 255; ++i) {
      auto tmp = make(c, 1, &s);
      ASSERT_EQ(s, kOk) << last_error();
      ASSERT_EQ(tmp->destroy(), kOk) << last_error();
    }
    auto b = make(c, 4096, &s);
    ASSERT_EQ(s, kOk) << last_error();
    EXPECT_NE(a->object_id() % 256, b->object_id() % 256);
    const int r = c.rank();
    for (int64_t k = 0; k < 5; ++k) {
      std::vector<int64_t> in_a(3, (r + 1) * 10 + k), in_b(4096, (r + 1) * 1000 + k);
      std::vector<int64_t> out_a(3), out_b(4096);
      PartialAllreduce *first = r == 0 ? a.get() : b.get();
      PartialAllreduce *second = r == 0 ? b.get() : a.get();
      ASSERT_EQ(first->post(r == 0 ? in_a.data() : in_b.data()), kOk) << last_error();
      ASSERT_EQ(second->post(r == 0 ? in_b.data() : in_a.data()), kOk) << last_error();
      ASSERT_EQ(first->wait(r == 0 ? out_a.data() : out_b.data()), kOk) << last_error();
      ASSERT_EQ(second->wait(r == 0 ? out_b.data() : out_a.data()), kOk) << last_error();
      EXPECT_EQ(out_a[2], 30 + 2 * k) << "round " << k;
      EXPECT_EQ(out_b[4095], 3000 + 2 * k) << "round " << k;
    }
    EXPECT_EQ(a->destroy(), kOk) << last_error();
    EXPECT_EQ(b->destroy(), kOk) << last_error();
  });
}

}  // namespace
}  // namespace quorum
