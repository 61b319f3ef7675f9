// stop_signal.hpp: SIGINT and SIGTERM (Ctrl-C, a scheduler's end of job) as a
// request to stop training at the next step boundary, where the trainer
// writes its checkpoint, so that the run can be resumed bit-identically. On
// several ranks the request rides in the gradient's reduction, so that all
// ranks stop at the same step even when only one got the signal (trainer.hpp).
// A second such signal ends the process at once (the default action).
#pragma once

#include <string>

#include "trainer/trainer.hpp"

namespace quorum::trainer {

// Installs the handlers; without them (no checkpoint to save) the signals
// keep their default action.
void stop_on_signals();
// Once every rank has agreed to stop: installs the handlers again where they
// were installed, so that one more signal (quorum-run sends SIGTERM to the
// ranks left once the first exits) does not cut the checkpoint or the exit
// status short; yet another still ends the process at once.
void rearm_stop_signals();
// The signal that asked to stop, or 0.
int stop_signal();
// Sets or clears the request as the handler would (tests).
void request_stop(int signal);
// "SIGTERM" for 15.
std::string signal_name(int signal);
// What to tell the user after a run stopped by a signal: where, and how to go on.
std::string stopped_message(const TrainConfig &config, const TrainResult &result);

}  // namespace quorum::trainer
