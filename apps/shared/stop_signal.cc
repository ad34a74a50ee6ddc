#include "apps/shared/stop_signal.h"

#include <pthread.h>
#include <signal.h>
#include <time.h>
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <thread>

namespace pace {
namespace apps {
namespace {

constexpr ClockT kNoStop = INT64_MAX;

// Never destroyed: the watcher thread is detached and may print while the
// process exits, after static destructors would have freed the strings.
StopSignalOptions& g_options = *new StopSignalOptions;
std::atomic<int> g_signal{0};
std::atomic<ClockT> g_stop_clock{kNoStop};
std::atomic<ClockT> g_max_started{-1};
std::atomic<ClockT> g_complete{0};

sigset_t StopSet() {
  sigset_t set;
  sigemptyset(&set);
  sigaddset(&set, SIGINT);
  sigaddset(&set, SIGTERM);
  return set;
}

void WatchSignals() {
  sigset_t set = StopSet();
  int signo = 0;
  if (sigwait(&set, &signo) != 0) return;
  // One past the highest clock started: a worker that publishes a later clock
  // after the first read makes the loop take it into account (seq_cst), and
  // one that publishes after the store sees the stop when it checks.
  for (;;) {
    const ClockT m = g_max_started.load();
    g_stop_clock.store(m + 1);
    if (g_max_started.load() == m) break;
  }
  g_signal.store(signo);
  timespec grace;
  grace.tv_sec = static_cast<time_t>(g_options.grace_seconds);
  grace.tv_nsec =
      static_cast<long>((g_options.grace_seconds - static_cast<double>(grace.tv_sec)) * 1e9);
  sigtimedwait(&set, nullptr, &grace);  // a second signal, or the grace period
  PrintStopped(g_complete.load());
  std::fflush(stdout);
  _exit(128 + signo);
}

}  // namespace

void InstallStopSignal(const StopSignalOptions& options) {
  g_options = options;
  sigset_t set = StopSet();
  pthread_sigmask(SIG_BLOCK, &set, nullptr);
  std::thread(WatchSignals).detach();
}

bool StopRequested() { return g_signal.load() != 0; }
int StopSignalNumber() { return g_signal.load(); }
ClockT StopClock() { return g_stop_clock.load(); }

bool StopBefore(ClockT c) {
  ClockT m = g_max_started.load();
  while (c > m && !g_max_started.compare_exchange_weak(m, c)) {
  }
  return c >= g_stop_clock.load();
}

void NoteClocksComplete(ClockT c) {
  ClockT m = g_complete.load();
  while (c > m && !g_complete.compare_exchange_weak(m, c)) {
  }
}

void PrintStopped(ClockT n) {
  std::fprintf(stderr, "%s: stopped at clock %lld%s\n", g_options.program.c_str(),
               static_cast<long long>(n), g_options.advice.c_str());
}

int ExitStopped(ClockT start_clock) {
  const ClockT at = std::max(StopClock(), start_clock);
  if (at == 0) {
    std::fprintf(stderr, "%s: stopped before clock 0; nothing was trained\n",
                 g_options.program.c_str());
  } else {
    PrintStopped(at);
  }
  return 128 + StopSignalNumber();
}

}  // namespace apps
}  // namespace pace
