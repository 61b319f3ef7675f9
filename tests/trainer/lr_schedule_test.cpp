// lr_schedule_test.cpp: the learning-rate schedule (lr_schedule.hpp): linear
// scaling by the global batch, linear warmup, cosine decay to 0.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>

#include "trainer/lr_schedule.hpp"

namespace quorum::trainer {
namespace {

TEST(LrSchedule, LinearScalingAndWarmup) {
  LrSchedule s{0.1, 64, 256, 10};
  EXPECT_DOUBLE_EQ(s.peak(), 0.4);
  EXPECT_NEAR(s.at(0), 0.1 + 0.3 * 0.1, 1e-12);
  EXPECT_NEAR(s.at(4), 0.1 + 0.3 * 0.5, 1e-12);
  EXPECT_DOUBLE_EQ(s.at(9), 0.4);
  EXPECT_DOUBLE_EQ(s.at(1000), 0.4);
  LrSchedule flat{0.05, 64, 64, 0};
  EXPECT_DOUBLE_EQ(flat.at(0), 0.05);
}

TEST(LrSchedule, CosineDecayAfterWarmup) {
  LrSchedule s{0.1, 64, 256, 10, true, 110};
  EXPECT_NEAR(s.at(4), 0.1 + 0.3 * 0.5, 1e-12);  // warmup unchanged
  EXPECT_DOUBLE_EQ(s.at(10), 0.4);               // peak where the warmup ends
  EXPECT_NEAR(s.at(60), 0.2, 1e-12);             // half way down
  EXPECT_NEAR(s.at(85), 0.4 * 0.5 * (1 + std::cos(M_PI * 0.75)), 1e-12);
  EXPECT_NEAR(s.at(110), 0.0, 1e-12);
  EXPECT_NEAR(s.at(500), 0.0, 1e-12);  // past the plan: stays at 0
  for (int64_t k = 11; k < 110; ++k) EXPECT_LT(s.at(k), s.at(k - 1));
  LrSchedule no_warmup{0.05, 64, 64, 0, true, 100};
  EXPECT_DOUBLE_EQ(no_warmup.at(0), 0.05);
  EXPECT_NEAR(no_warmup.at(50), 0.025, 1e-12);
}

}  // namespace
}  // namespace quorum::trainer
