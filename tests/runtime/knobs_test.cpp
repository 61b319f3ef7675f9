// knobs_test.cpp: knob parsing, errors, overrides and sources, and the logger's
// level filter and de-duplication.
#include "runtime/knobs.hpp"

#include <gtest/gtest.h>
#include <stdlib.h>
#include <sys/wait.h>
#include <unistd.h>

#include "runtime/clock.hpp"

#include "runtime/log.hpp"

namespace quorum {
namespace {

Knob<int64_t> test_int("QUORUM_TEST_INT", 5, "an int for tests");
Knob<bool> test_bool("QUORUM_TEST_BOOL", false, "a bool for tests");
Knob<double> test_double("QUORUM_TEST_DOUBLE", 0.5, "a double for tests");
Knob<std::string> test_choice("QUORUM_TEST_CHOICE", "a", "a choice for tests", {"a", "b"});

class Knobs : public ::testing::Test {
 protected:
  void TearDown() override {
    for (KnobBase *k :
         {static_cast<KnobBase *>(&test_int), static_cast<KnobBase *>(&test_bool),
          static_cast<KnobBase *>(&test_double), static_cast<KnobBase *>(&test_choice)}) {
      unsetenv(k->name());
      k->set_override(std::nullopt);
      k->reload();
    }
  }
};

// A misspelled QUORUM_* variable is named once per process, with the knob
// it was probably meant to be. First in the file: the warning is given by the
// first validate_knobs() of the process (run here in a child, stderr captured).
TEST(KnobSpelling, MisspelledVariableIsWarnedAboutOnce) {
  int out[2];
  ASSERT_EQ(pipe(out), 0);
  pid_t pid = fork();
  ASSERT_GE(pid, 0);
  if (pid == 0) {
    dup2(out[1], 2);
    setenv("QUORUM_TIMOUT_MS", "5000", 1);
    setenv("QUORUM_RANK", "0", 1);  // the launcher's: not a knob, not a typo
    for (int i = 0; i < 3; ++i) (void)validate_knobs();
    _exit(0);
  }
  close(out[1]);
  std::string err;
  char buf[4096];
  ssize_t n;
  while ((n = read(out[0], buf, sizeof buf)) > 0) err.append(buf, size_t(n));
  close(out[0]);
  int status = 0;
  waitpid(pid, &status, 0);
  const std::string warning = "QUORUM_TIMOUT_MS is not a quorum setting";
  const size_t first = err.find(warning);
  ASSERT_NE(first, std::string::npos) << err;
  EXPECT_EQ(err.find(warning, first + 1), std::string::npos) << "warned more than once: " << err;
  EXPECT_NE(err.find("did you mean QUORUM_TIMEOUT_MS?"), std::string::npos) << err;
  EXPECT_EQ(err.find("QUORUM_RANK"), std::string::npos) << err;
}

TEST(KnobSpelling, UnknownVariablesAndClosestKnob) {
  char e1[] = "QUORUM_TIMOUT_MS=5", e2[] = "QUORUM_RANK=0", e3[] = "QUORUM_TEST_ANYTHING=1",
       e4[] = "PATH=/bin", e5[] = "QUORUM_TIMEOUT_MS=1", e6[] = "QUORUM_PROGRES_THREAD=on",
       e7[] = "QUORUM_STORE=127.0.0.1:5";
  char *env[] = {e1, e2, e3, e4, e5, e6, e7, nullptr};
  EXPECT_EQ(unknown_quorum_variables(env),
            (std::vector<std::string>{"QUORUM_TIMOUT_MS", "QUORUM_PROGRES_THREAD"}));
  EXPECT_EQ(closest_known_variable("QUORUM_TIMOUT_MS"), "QUORUM_TIMEOUT_MS");
  EXPECT_EQ(closest_known_variable("QUORUM_PROGRES_THREAD"), "QUORUM_PROGRESS_THREAD");
  EXPECT_EQ(closest_known_variable("QUORUM_TOKN"), "QUORUM_TOKEN");
}

TEST_F(Knobs, DefaultsAndRegistry) {
  EXPECT_EQ(test_int.get(), 5);
  EXPECT_EQ(test_int.source(), KnobSource::Default);
  EXPECT_STREQ(test_int.type(), "int");
  EXPECT_EQ(test_int.default_text(), "5");
  EXPECT_EQ(find_knob("QUORUM_TEST_INT"), &test_int);
  EXPECT_EQ(find_knob("QUORUM_NO_SUCH_KNOB"), nullptr);
  auto all = all_knobs();
  for (size_t i = 1; i < all.size(); ++i)
    EXPECT_LT(std::string(all[i - 1]->name()), all[i]->name());
  EXPECT_NE(find_knob("QUORUM_TIMEOUT_MS"), nullptr);
}

TEST_F(Knobs, EnvironmentValues) {
  setenv("QUORUM_TEST_INT", "0x10", 1);
  setenv("QUORUM_TEST_BOOL", "yes", 1);
  setenv("QUORUM_TEST_DOUBLE", "2.5", 1);
  setenv("QUORUM_TEST_CHOICE", "b", 1);
  reload_knobs();
  EXPECT_EQ(test_int.get(), 16);
  EXPECT_EQ(test_int.source(), KnobSource::Environment);
  EXPECT_TRUE(test_bool.get());
  EXPECT_DOUBLE_EQ(test_double.get(), 2.5);
  EXPECT_EQ(test_choice.get(), "b");
  EXPECT_EQ(validate_knobs(), kOk);
}

TEST_F(Knobs, IntegersTakeBinaryUnits) {
  struct Case {
    const char *text;
    int64_t value;
  };
  for (Case c :
       {Case{"64k", 64 << 10}, Case{"64K", 64 << 10}, Case{"16m", 16 << 20},
        Case{"2G", int64_t{2} << 30}, Case{"0x10k", 16 << 10}, Case{"-1", -1},
        Case{"-2m", -(2 << 20)}, Case{"0k", 0}, Case{"8589934591G", int64_t{8589934591} << 30}}) {
    setenv("QUORUM_TEST_INT", c.text, 1);
    test_int.reload();
    EXPECT_EQ(test_int.error(), "") << c.text;
    EXPECT_EQ(test_int.get(), c.value) << c.text;
    EXPECT_EQ(test_int.source(), KnobSource::Environment);
  }
  unsetenv("QUORUM_TEST_INT");
  test_int.reload();
}

TEST_F(Knobs, ParseErrorsFallBackToDefaultAndAreReported) {
  struct Case {
    KnobBase *knob;
    const char *text;
  };
  for (Case c :
       {Case{&test_int, "12abc"}, Case{&test_int, ""}, Case{&test_int, "k"}, Case{&test_int, "4kb"},
        Case{&test_int, "4t"}, Case{&test_int, "9000000000g"}, Case{&test_int, "-9000000000g"},
        Case{&test_bool, "maybe"}, Case{&test_double, "1.5x"}, Case{&test_choice, "c"}}) {
    setenv(c.knob->name(), c.text, 1);
    c.knob->reload();
    EXPECT_NE(c.knob->error(), "") << c.knob->name() << "=" << c.text;
    EXPECT_NE(c.knob->error().find(c.knob->name()), std::string::npos);
    EXPECT_EQ(c.knob->source(), KnobSource::Default);
    EXPECT_EQ(c.knob->value_text(), c.knob->default_text());
    EXPECT_EQ(validate_knobs(), QUORUM_ERR_INVALID_ARG);
    EXPECT_NE(std::string(last_error()).find(c.knob->name()), std::string::npos);
    unsetenv(c.knob->name());
    c.knob->reload();
  }
  EXPECT_EQ(validate_knobs(), kOk);
}

// Durations take no size unit and stay far from overflowing the clock:
// QUORUM_TIMEOUT_MS=9000g is an error, not a deadline in the past.
TEST_F(Knobs, DurationsAreBoundedAndTakeNoUnit) {
  KnobBase *timeout = find_knob("QUORUM_TIMEOUT_MS");
  ASSERT_NE(timeout, nullptr);
  for (const char *bad : {"9000g", "10k", "99999999999999999999", "1000000000001", "5s"}) {
    setenv("QUORUM_TIMEOUT_MS", bad, 1);
    timeout->reload();
    EXPECT_NE(timeout->error().find("QUORUM_TIMEOUT_MS='" + std::string(bad) + "'"),
              std::string::npos)
        << timeout->error();
    EXPECT_EQ(knob_timeout_ms.get(), 60000) << bad;
    EXPECT_EQ(validate_knobs(), QUORUM_ERR_INVALID_ARG) << bad;
  }
  setenv("QUORUM_TIMEOUT_MS", "9000g", 1);
  timeout->reload();
  EXPECT_NE(timeout->error().find("takes no unit"), std::string::npos) << timeout->error();
  for (const char *good : {"1000000000000", "0", "-1", "1500"}) {
    setenv("QUORUM_TIMEOUT_MS", good, 1);
    timeout->reload();
    EXPECT_EQ(timeout->error(), "") << good;
    EXPECT_EQ(knob_timeout_ms.get(), std::stoll(good));
  }
  unsetenv("QUORUM_TIMEOUT_MS");
  timeout->reload();
  EXPECT_EQ(validate_knobs(), kOk);
  // Whatever reaches a deadline, it does not wrap around into the past.
  EXPECT_FALSE(Deadline::after_ms(INT64_MAX).expired());
  EXPECT_FALSE(Deadline::after_ms(int64_t{1000000000000}).expired());
}

TEST_F(Knobs, OverrideWinsOverEnvironmentAndClears) {
  setenv("QUORUM_TEST_INT", "7", 1);
  test_int.reload();
  EXPECT_EQ(test_int.get(), 7);
  test_int.set_override("9");
  EXPECT_EQ(test_int.get(), 9);
  EXPECT_EQ(test_int.source(), KnobSource::Override);
  EXPECT_STREQ(knob_source_name(test_int.source()), "override");
  test_int.set_override("nine");
  EXPECT_EQ(test_int.get(), 5);
  EXPECT_NE(test_int.error(), "");
  test_int.set_override(std::nullopt);
  EXPECT_EQ(test_int.get(), 7);
  EXPECT_EQ(test_int.source(), KnobSource::Environment);
}

// Hot paths cache knob values keyed on knob_generation(): it must move
// whenever a value may have changed.
TEST_F(Knobs, GenerationMovesOnOverrideAndReload) {
  const uint64_t g0 = knob_generation();
  EXPECT_EQ(test_int.get(), 5);
  EXPECT_EQ(knob_generation(), g0) << "reading does not move it";
  test_int.set_override("6");
  const uint64_t g1 = knob_generation();
  EXPECT_GT(g1, g0);
  EXPECT_EQ(test_int.get(), 6);
  test_int.set_override(std::nullopt);
  EXPECT_GT(knob_generation(), g1);
  const uint64_t g2 = knob_generation();
  test_int.reload();
  EXPECT_GT(knob_generation(), g2);
}

TEST(Log, LevelFilterAndSubsystems) {
  setenv("QUORUM_LOG_LEVEL", "info", 1);
  setenv("QUORUM_LOG_SUBSYS", "store,bootstrap", 1);
  reload_log_config();
  EXPECT_TRUE(log_enabled(LogLevel::Info, "store"));
  EXPECT_FALSE(log_enabled(LogLevel::Info, "transport"));
  EXPECT_TRUE(log_enabled(LogLevel::Warn, "transport"));  // warnings always show
  EXPECT_FALSE(log_enabled(LogLevel::Debug, "store"));
  unsetenv("QUORUM_LOG_LEVEL");
  unsetenv("QUORUM_LOG_SUBSYS");
  reload_log_config();
  EXPECT_FALSE(log_enabled(LogLevel::Info, "store"));
  EXPECT_TRUE(log_enabled(LogLevel::Error, "store"));
}

TEST(Log, RepeatedErrorsArePrintedOnce) {
  set_log_rank(3);
  ::testing::internal::CaptureStderr();
  for (int i = 0; i < 3; ++i) QLOG_ERROR("test", "the same failure {}", 1);
  std::string err = ::testing::internal::GetCapturedStderr();
  set_log_rank(-1);
  size_t first = err.find("the same failure 1");
  ASSERT_NE(first, std::string::npos) << err;
  EXPECT_NE(err.find(":3] quorum ERROR test:"), std::string::npos) << err;
  // Printed once, then again only at power-of-two repeat counts (2 here).
  EXPECT_NE(err.find("repeated 2 times"), std::string::npos) << err;
  EXPECT_EQ(err.find("repeated 3 times"), std::string::npos) << err;
}

TEST(Status, FailRecordsLastError) {
  clear_last_error();
  EXPECT_STREQ(last_error(), "");
  ::testing::internal::CaptureStderr();
  Status s = fail(QUORUM_ERR_TIMEOUT, "test", "waited {} ms", 12);
  std::string err = ::testing::internal::GetCapturedStderr();
  EXPECT_EQ(s, QUORUM_ERR_TIMEOUT);
  EXPECT_STREQ(last_error(), "QUORUM_ERR_TIMEOUT: waited 12 ms");
  EXPECT_NE(err.find("waited 12 ms"), std::string::npos);
  EXPECT_STREQ(status_name(QUORUM_ERR_BOOTSTRAP), "QUORUM_ERR_BOOTSTRAP");
}

}  // namespace
}  // namespace quorum
