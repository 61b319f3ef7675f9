// sanitizers.hpp: whether this test binary runs under ThreadSanitizer, for
// stress loops that only need a few rounds there (TSan looks for races in
// every round it sees; the many rounds are for timing windows, and TSan runs
// them 5-15x slower).
#pragma once

namespace quorum::test {

#if defined(__SANITIZE_THREAD__)
inline constexpr bool kThreadSanitizer = true;
#elif defined(__has_feature)
#if __has_feature(thread_sanitizer)
inline constexpr bool kThreadSanitizer = true;
#else
inline constexpr bool kThreadSanitizer = false;
#endif
#else
inline constexpr bool kThreadSanitizer = false;
#endif

// `rounds` normally, `tsan_rounds` under ThreadSanitizer.
inline constexpr int stress_rounds(int rounds, int tsan_rounds) {
  return kThreadSanitizer ? tsan_rounds : rounds;
}

}  // namespace quorum::test
