// shm_segment_test.cpp: a segment's name leaves /dev/shm on every way out of
// ShmSegment::create, also when creating it fails after shm_open (a size
// posix_fallocate refuses) and when the group's exchange fails after rank 0
// created it.
#include "runtime/shm_segment.hpp"

#include <dirent.h>
#include <gtest/gtest.h>
#include <sys/statvfs.h>
#include <unistd.h>

#include <cstring>
#include <string>

namespace quorum {
namespace {

// /dev/shm entries of segments this process named (rank 0 is this process).
int segments_of_this_process() {
  const std::string prefix = "quorum-" + std::to_string(getpid()) + "-";
  int n = 0;
  DIR *dir = opendir("/dev/shm");
  if (!dir) return -1;
  while (dirent *e = readdir(dir)) {
    if (std::strncmp(e->d_name, prefix.c_str(), prefix.size()) == 0) ++n;
  }
  closedir(dir);
  return n;
}

// One rank; the allgather fails from call `fail_from` on (0: never).
ShmGroup one_rank(int fail_from = 0) {
  ShmGroup g;
  auto calls = std::make_shared<int>(0);
  g.allgather = [calls, fail_from](const void *mine, void *all, size_t bytes) {
    if (fail_from > 0 && ++*calls >= fail_from) {
      return fail(QUORUM_ERR_BOOTSTRAP, "test", "allgather {} fails", *calls);
    }
    std::memcpy(all, mine, bytes);
    return kOk;
  };
  return g;
}

TEST(ShmSegment, CreatedMappedAndUnlinked) {
  ASSERT_EQ(segments_of_this_process(), 0);
  std::unique_ptr<ShmSegment> seg;
  ASSERT_EQ(ShmSegment::create(one_rank(), 1 << 16, &seg), kOk) << last_error();
  ASSERT_NE(seg, nullptr);
  EXPECT_EQ(seg->data()[(1 << 16) - 1], 0);
  EXPECT_EQ(segments_of_this_process(), 0) << "the name goes once every rank mapped it";
}

TEST(ShmSegment, NoNameLeftWhenFallocateRefusesTheSize) {
  struct statvfs fs {};
  ASSERT_EQ(statvfs("/dev/shm", &fs), 0);
  const size_t capacity = static_cast<size_t>(fs.f_blocks) * fs.f_frsize;
  const size_t bytes = size_t{1} << 50;
  if (capacity == 0 || capacity >= bytes / 2) {
    GTEST_SKIP() << "/dev/shm has no size limit below 2^49 B: nothing refuses 2^50 B at once";
  }
  std::unique_ptr<ShmSegment> seg;
  EXPECT_EQ(ShmSegment::create(one_rank(), bytes, &seg), kOk) << "no segment is not an error";
  EXPECT_EQ(seg, nullptr);
  EXPECT_EQ(segments_of_this_process(), 0);
}

TEST(ShmSegment, NoNameLeftWhenTheExchangeFailsAfterCreation) {
  std::unique_ptr<ShmSegment> seg;
  // Call 1 exchanges the name, call 2 (after rank 0 created it) fails.
  EXPECT_EQ(ShmSegment::create(one_rank(2), 1 << 16, &seg), QUORUM_ERR_BOOTSTRAP);
  EXPECT_EQ(seg, nullptr);
  EXPECT_EQ(segments_of_this_process(), 0);
  // Call 3 (all ranks mapped it?) fails.
  EXPECT_EQ(ShmSegment::create(one_rank(3), 1 << 16, &seg), QUORUM_ERR_BOOTSTRAP);
  EXPECT_EQ(seg, nullptr);
  EXPECT_EQ(segments_of_this_process(), 0);
}

TEST(ShmSegment, SizesNoFileCanHaveGiveNoSegment) {
  for (size_t bytes : {size_t{0}, SIZE_MAX, SIZE_MAX / 2 + 1}) {
    std::unique_ptr<ShmSegment> seg;
    EXPECT_EQ(ShmSegment::create(one_rank(), bytes, &seg), kOk) << bytes;
    EXPECT_EQ(seg, nullptr) << bytes;
  }
  EXPECT_EQ(segments_of_this_process(), 0);
}

}  // namespace
}  // namespace quorum
