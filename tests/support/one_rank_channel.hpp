// one_rank_channel.hpp: a shared-memory channel of a single rank (its
// allgather is a copy), for tests of the channel's code paths without peers.
#pragma once

#include <gtest/gtest.h>

#include <cstring>
#include <memory>

#include "collectives/shm/shm.hpp"

namespace quorum::test {

inline std::unique_ptr<ShmChannel> one_rank_channel() {
  ShmGroup g;
  g.allgather = [](const void *mine, void *all, size_t bytes) {
    std::memcpy(all, mine, bytes);
    return kOk;
  };
  std::unique_ptr<ShmChannel> ch;
  EXPECT_EQ(ShmChannel::create(g, &ch), kOk) << last_error();
  return ch;
}

}  // namespace quorum::test
