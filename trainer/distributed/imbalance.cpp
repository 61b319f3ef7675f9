// imbalance.cpp: the injected-delay models of imbalance.hpp.
#include "trainer/distributed/imbalance.hpp"

#include <cmath>
#include <cstdlib>
#include <sstream>
#include <vector>

namespace quorum::trainer {

uint64_t mix64(uint64_t seed, uint64_t a, uint64_t b) {
  // splitmix64 over the combined inputs.
  uint64_t z = seed ^ (a * 0x9e3779b97f4a7c15ULL) ^ (b * 0xc2b2ae3d27d4eb4fULL);
  z += 0x9e3779b97f4a7c15ULL;
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
  return z ^ (z >> 31);
}

namespace {
std::vector<std::string> split(const std::string &s, char sep) {
  std::vector<std::string> out;
  std::stringstream ss(s);
  std::string item;
  while (std::getline(ss, item, sep)) out.push_back(item);
  return out;
}

bool to_double(const std::string &s, double *v) {
  char *end = nullptr;
  *v = std::strtod(s.c_str(), &end);
  return !s.empty() && end && *end == '\0' && *v >= 0 && std::isfinite(*v);
}

bool to_int(const std::string &s, int *v) {
  char *end = nullptr;
  long x = std::strtol(s.c_str(), &end, 10);
  *v = static_cast<int>(x);
  return !s.empty() && end && *end == '\0' && x >= 0 && x < (1 << 20);
}
}  // namespace

Status ImbalanceModel::parse(const std::string &spec, uint64_t seed, ImbalanceModel *out) {
  ImbalanceModel m;
  m.spec_ = spec.empty() ? "none" : spec;
  m.seed_ = seed;
  auto parts = split(m.spec_, ':');
  auto bad = [&](const char *why) {
    return fail(QUORUM_ERR_INVALID_ARG, "imbalance",
                "--imbalance '{}': {} (expected none, paper:D[:K|:1-2], slow:R:D or exp:M, "
                "times in ms)",
                spec, why);
  };
  if (parts.empty() || parts[0] == "none") {
    if (parts.size() > 1) return bad("'none' takes no parameters");
  } else if (parts[0] == "paper") {
    if (parts.size() < 2 || parts.size() > 3) return bad("paper takes D and optionally K");
    if (!to_double(parts[1], &m.ms_)) return bad("D is not a non-negative number");
    m.min_ranks_ = m.max_ranks_ = 2;
    if (parts.size() == 3) {
      auto range = split(parts[2], '-');
      if (range.size() == 1 && to_int(range[0], &m.min_ranks_)) {
        m.max_ranks_ = m.min_ranks_;
      } else if (range.size() != 2 || !to_int(range[0], &m.min_ranks_) ||
                 !to_int(range[1], &m.max_ranks_) || m.min_ranks_ > m.max_ranks_) {
        return bad("K is not a count or a range like 1-2");
      }
      if (m.max_ranks_ == 0) return bad("K = 0 delays no rank");
    }
    m.kind_ = Kind::Paper;
  } else if (parts[0] == "slow") {
    if (parts.size() != 3 || !to_int(parts[1], &m.slow_rank_) || !to_double(parts[2], &m.ms_)) {
      return bad("slow takes a rank and D");
    }
    m.kind_ = Kind::Slow;
  } else if (parts[0] == "exp") {
    if (parts.size() != 2 || !to_double(parts[1], &m.ms_)) return bad("exp takes the mean M");
    m.kind_ = Kind::Exponential;
  } else {
    return bad("unknown model");
  }
  *out = m;
  return kOk;
}

Status ImbalanceModel::check_world(int size) const {
  auto bad = [&](const std::string &why) {
    return fail(QUORUM_ERR_INVALID_ARG, "imbalance", "--imbalance '{}' on {} rank{}: {}", spec_,
                size, size == 1 ? "" : "s", why);
  };
  if (kind_ == Kind::Slow && size < 2)
    return bad("one process has no other rank to be slower than");
  if (kind_ == Kind::Slow && slow_rank_ >= size)
    return bad(fmt::format("there is no rank {} (ranks are 0 to {})", slow_rank_, size - 1));
  if (kind_ == Kind::Paper && max_ranks_ > size)
    return bad(fmt::format("cannot draw {} ranks to delay", max_ranks_));
  return kOk;
}

double ImbalanceModel::delay_ms(int rank, int size, int64_t step) const {
  switch (kind_) {
    case Kind::None:
      return 0;
    case Kind::Slow:
      return rank == slow_rank_ ? ms_ : 0;
    case Kind::Exponential: {
      uint64_t h = mix64(seed_, static_cast<uint64_t>(step), static_cast<uint64_t>(rank) + 1);
      double u = (static_cast<double>(h >> 11) + 0.5) / 9007199254740992.0;  // (0, 1)
      return -ms_ * std::log(u);
    }
    case Kind::Paper: {
      // Draw k distinct ranks for this step (partial Fisher-Yates on 0..size-1).
      int span = max_ranks_ - min_ranks_ + 1;
      int k = min_ranks_ + static_cast<int>(mix64(seed_, static_cast<uint64_t>(step), 0) % span);
      if (k > size) k = size;
      std::vector<int> ranks(static_cast<size_t>(size));
      for (int i = 0; i < size; ++i) ranks[i] = i;
      for (int i = 0; i < k; ++i) {
        uint64_t h = mix64(seed_, static_cast<uint64_t>(step), static_cast<uint64_t>(i) + 1);
        int j = i + static_cast<int>(h % static_cast<uint64_t>(size - i));
        std::swap(ranks[i], ranks[j]);
        if (ranks[i] == rank) return ms_;
      }
      return 0;
    }
  }
  return 0;
}

double ImbalanceModel::expected_max_delay_ms(int size) const {
  switch (kind_) {
    case Kind::None:
      return 0;
    case Kind::Slow:
      return slow_rank_ < size ? ms_ : 0;
    case Kind::Paper:
      return min_ranks_ > 0 || max_ranks_ > 0 ? ms_ : 0;
    case Kind::Exponential: {
      double h = 0;  // E[max of n exponentials] = mean * H_n
      for (int i = 1; i <= size; ++i) h += 1.0 / i;
      return ms_ * h;
    }
  }
  return 0;
}

}  // namespace quorum::trainer
