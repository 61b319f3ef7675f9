// quorum_tune_report.hpp: what quorum-tune prints and writes: the table of
// predictions, the choice, the JSON document and the cost/time plot.
#pragma once

#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "runtime/status.hpp"
#include "trainer/tuner/pilot.hpp"
#include "trainer/tuner/predictor.hpp"

namespace quorum::tune_report {

namespace tu = quorum::trainer::tuner;

// Fixed-width table, one row per configuration, flags P (Pareto), K (knee),
// * (chosen), x (extrapolated).
void print_table(const std::vector<tu::Prediction> &rows, size_t chosen,
                 const std::string &cost_unit);

nlohmann::json row_json(const tu::Prediction &p);

// The pilot's outcome, one line (target in percent): where it reached the
// target, measured or extrapolated (with the fit), and the noise scale.
std::string pilot_summary(const tu::PilotResult &pr, double target);
// The JSON "pilot" object: its batch, steps (measured or extrapolated), fit
// and times.
nlohmann::json pilot_json(const tu::PilotResult &pr, double global_batch, double seconds);

// Checks before any work that `path` can be written (its folder exists and is
// writable, it is not a folder): an error saying why, or "".
std::string unwritable_output(const std::string &path, const char *flag);

// Writes `text` to `path` atomically (a temp file beside it, then rename):
// the file is whole or absent.
Status write_atomically(const std::string &path, const std::string &text);

// Runs the plot script (python3 SCRIPT JSON PNG); the PNG appears whole or not at all.
Status draw_plot(const std::string &script, const std::string &json_path, const std::string &png);

}  // namespace quorum::tune_report
