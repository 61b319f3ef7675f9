// shm_segment.cpp: shm_open + fallocate + mmap, agreed on by every rank.
#include "runtime/shm_segment.hpp"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <limits>
#include <random>
#include <vector>

#include "runtime/log.hpp"

namespace quorum {

namespace {

// Maps the named object; creates (and sizes) it first when `create`. A
// failure after creating it removes the name again.
Status map_segment(const std::string &name, size_t bytes, bool create, uint8_t **base) {
  int flags = create ? (O_RDWR | O_CREAT | O_EXCL) : O_RDWR;
  int fd = shm_open(name.c_str(), flags, 0600);
  if (fd < 0) {
    return fail(QUORUM_ERR_INTERNAL, "shm", "shm_open {}: {}", name, std::strerror(errno));
  }
  if (create) {
    // Reserve the pages now: a full /dev/shm fails here, not with SIGBUS later.
    int rc = posix_fallocate(fd, 0, static_cast<off_t>(bytes));
    if (rc != 0) {
      close(fd);
      shm_unlink(name.c_str());
      return fail(QUORUM_ERR_NO_MEMORY, "shm", "posix_fallocate {} ({} B): {}", name, bytes,
                  std::strerror(rc));
    }
  } else {
    struct stat st {};
    if (fstat(fd, &st) != 0 || static_cast<size_t>(st.st_size) < bytes) {
      close(fd);
      return fail(QUORUM_ERR_NO_MEMORY, "shm", "{} is smaller than {} B", name, bytes);
    }
  }
  void *p = mmap(nullptr, bytes, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
  const int mmap_errno = errno;
  close(fd);
  if (p == MAP_FAILED) {
    if (create) shm_unlink(name.c_str());
    return fail(QUORUM_ERR_NO_MEMORY, "shm", "mmap {} ({} B): {}", name, bytes,
                std::strerror(mmap_errno));
  }
  *base = static_cast<uint8_t *>(p);
  return kOk;
}

}  // namespace

Status agree(const ShmGroup &group, bool ok, bool *all_ok) {
  std::vector<int32_t> flags(static_cast<size_t>(group.size));
  int32_t mine = ok ? 1 : 0;
  QUORUM_CHECK(group.allgather(&mine, flags.data(), sizeof(mine)));
  *all_ok = true;
  for (int32_t f : flags) *all_ok = *all_ok && f == 1;
  return kOk;
}

ShmGroup ShmGroup::of(Bootstrap &bootstrap) {
  ShmGroup g;
  g.rank = bootstrap.rank();
  g.size = bootstrap.size();
  g.allgather = [&bootstrap](const void *mine, void *all, size_t bytes) {
    return bootstrap.allgather(mine, all, bytes);
  };
  return g;
}

Status ShmSegment::create(const ShmGroup &group, size_t bytes, std::unique_ptr<ShmSegment> *out) {
  out->reset();
  const int rank = group.rank;
  // Rank 0's pid and a random value name the object (unique per job and group).
  struct NameSeed {
    uint64_t random;
    int64_t pid;
  } mine{0, static_cast<int64_t>(getpid())};
  std::random_device rd;
  mine.random = (uint64_t{rd()} << 32) ^ uint64_t { rd() };
  std::vector<NameSeed> seeds(static_cast<size_t>(group.size));
  QUORUM_CHECK(group.allgather(&mine, seeds.data(), sizeof(NameSeed)));
  std::unique_ptr<ShmSegment> seg(new ShmSegment());
  seg->name_ = fmt::format("/quorum-{}-{:016x}", seeds[0].pid, seeds[0].random);
  seg->bytes_ = bytes;
  if (bytes == 0 || bytes > static_cast<size_t>(std::numeric_limits<off_t>::max())) {
    // The same on every rank (bytes is): no segment anywhere.
    QLOG_INFO("shm", "no shared-memory segment of {} B (not a size a file can have)", bytes);
    return kOk;
  }

  bool created = rank == 0 && map_segment(seg->name_, bytes, true, &seg->base_) == kOk;
  // From here on rank 0 removes the name on every way out (the mapping stays).
  struct Unlink {
    const std::string *name;
    ~Unlink() {
      if (name) shm_unlink(name->c_str());
    }
  } unlink_at_exit{created ? &seg->name_ : nullptr};
  bool all_ok = false;
  std::vector<int32_t> flags(static_cast<size_t>(group.size));
  int32_t root_ok = created ? 1 : 0;
  QUORUM_CHECK(group.allgather(&root_ok, flags.data(), sizeof(root_ok)));
  if (flags[0] != 1) {
    QLOG_INFO("shm", "no shared-memory segment: rank 0 could not create {}", seg->name_);
    return kOk;
  }
  bool mapped = rank == 0 || map_segment(seg->name_, bytes, false, &seg->base_) == kOk;
  Status s = agree(group, mapped, &all_ok);
  if (s != kOk) return s;
  if (!all_ok) {
    QLOG_INFO("shm", "no shared-memory segment: a rank could not map {}", seg->name_);
    return kOk;
  }
  *out = std::move(seg);
  return kOk;
}

ShmSegment::~ShmSegment() {
  if (base_ != nullptr) munmap(base_, bytes_);
}

}  // namespace quorum
