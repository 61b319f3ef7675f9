// fuzz_checkpoint.cpp: libFuzzer target for the checkpoint loader's decoding
// (parse_checkpoint: what load_checkpoint runs on a file's bytes). Any input
// must be accepted or refused with an error, never crash or over-read; an
// accepted one must hold a position a run can reach and consistent sizes.
#include <cstdint>
#include <cstdlib>
#include <vector>

#include "runtime/log.hpp"
#include "trainer/checkpoint.hpp"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  static const bool quiet = [] {
    setenv("QUORUM_LOG_LEVEL", "error", 1);
    return true;
  }();
  (void)quiet;
  std::vector<uint8_t> bytes(data, data + size);
  quorum::trainer::TrainingState s;
  if (quorum::trainer::parse_checkpoint(bytes, "fuzz", &s) == quorum::kOk) {
    if (s.params.size() != s.momentum.size()) std::abort();
    if (!s.ema.empty() && s.ema.size() != s.params.size()) std::abort();
    if (s.step_in_epoch < 0 || s.step_in_epoch >= s.steps_per_epoch) std::abort();
  }
  return 0;
}
