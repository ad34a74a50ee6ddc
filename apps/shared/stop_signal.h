// Ctrl-C (SIGINT) and SIGTERM for the apps: stop at a clock boundary, make
// every finished clock durable, and tell the user how to continue.
//
// InstallStopSignal() blocks both signals in every thread and waits for them
// on a thread of its own. The first one sets a stop clock S, the same for
// every worker of the process: one past the highest clock any worker has
// started. Workers ask StopBefore(c) at the start of each clock and stop at
// S, so the process's clocks 0..S-1 are complete and Client::Flush() makes
// them durable; the app then prints "stopped at clock S; rerun the same
// command with --resume". If the workers do not get there within
// grace_seconds (one blocked on a peer that never answers) or a second signal
// comes, the thread prints the same line with the last clock known to be
// complete and exits at once (what was acknowledged is durable either way).
#ifndef PACE_APPS_SHARED_STOP_SIGNAL_H_
#define PACE_APPS_SHARED_STOP_SIGNAL_H_

#include <atomic>
#include <string>

#include "common/clock.h"

namespace pace {
namespace apps {

struct StopSignalOptions {
  std::string program;  // "pace_mf"
  // Appended to "stopped at clock N": e.g. "; rerun the same command with --resume".
  std::string advice;
  // How long the workers get to reach the stop clock. Default: 10.
  double grace_seconds = 10;
};

// Call at the start of main, before any thread starts.
void InstallStopSignal(const StopSignalOptions& options);

// True once SIGINT or SIGTERM arrived; the signal number, 0 before.
bool StopRequested();
int StopSignalNumber();

// For a worker at the start of clock c: true if it must not do clock c. Also
// records that clock c was started. Never true without a signal.
bool StopBefore(ClockT c);

// The stop clock S (meaningful once StopRequested()).
ClockT StopClock();

// Records that clocks < c are complete in this process (for the message of
// the immediate exit).
void NoteClocksComplete(ClockT c);

// Prints "<program>: stopped at clock N<advice>" on stderr.
void PrintStopped(ClockT n);

// For a run whose workers stopped on the signal, once every clock before the
// stop clock is acknowledged: prints where the job stopped (at
// max(StopClock(), start_clock), or that nothing was trained if that is
// clock 0) and returns the exit code, 128 + the signal number.
int ExitStopped(ClockT start_clock);

}  // namespace apps
}  // namespace pace

#endif  // PACE_APPS_SHARED_STOP_SIGNAL_H_
