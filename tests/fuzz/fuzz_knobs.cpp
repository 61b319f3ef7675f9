// fuzz_knobs.cpp: libFuzzer target for the knob parser (integers with units,
// durations, floats, booleans, choices) and the misspelling check of QUORUM_*
// names. Every text is either a value or an error naming the knob; a
// duration that parses stays within its bound.
#include <cstdint>
#include <cstdlib>
#include <string>

#include "runtime/knobs.hpp"

namespace {
quorum::Knob<int64_t> fuzz_int("QUORUM_FUZZ_INT", 7, "an integer for the fuzzer");
quorum::Knob<int64_t> fuzz_ms("QUORUM_FUZZ_MS", 1000, "a duration for the fuzzer");
quorum::Knob<double> fuzz_double("QUORUM_FUZZ_DOUBLE", 0.5, "a float for the fuzzer");
quorum::Knob<bool> fuzz_bool("QUORUM_FUZZ_BOOL", false, "a bool for the fuzzer");
quorum::Knob<std::string> fuzz_choice("QUORUM_FUZZ_CHOICE", "a", "a choice", {"a", "bc"});

template <typename K>
void exercise(K &knob, const std::string &text) {
  knob.set_override(text);
  (void)knob.get();
  const std::string error = knob.error();
  if (!error.empty() && error.find(knob.name()) == std::string::npos) std::abort();
  if (!error.empty() && knob.value_text() != knob.default_text()) std::abort();
}
}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  if (size == 0 || size > 512) return 0;  // knob values are short
  const std::string text(reinterpret_cast<const char *>(data), size);
  exercise(fuzz_int, text);
  exercise(fuzz_ms, text);
  if (fuzz_ms.error().empty() && fuzz_ms.get() > int64_t{1000000000000}) std::abort();
  exercise(fuzz_double, text);
  exercise(fuzz_bool, text);
  exercise(fuzz_choice, text);
  // Inputs "_NAME" (short: the edit distance is quadratic) are also tried as
  // the variable QUORUM_NAME, maybe misspelled.
  if (size > 32 || text[0] != '_') return 0;
  const std::string name = "QUORUM" + text.substr(0, text.find('\0'));
  std::string entry = name + "=1";
  char *environment[] = {entry.data(), nullptr};
  for (const std::string &unknown : quorum::unknown_quorum_variables(environment)) {
    if (quorum::closest_known_variable(unknown).empty()) std::abort();
  }
  return 0;
}
