// Monotonic time as integers: std::chrono::steady_clock, which on Linux is
// CLOCK_MONOTONIC and so is shared by the processes of one host (the push
// latency traces of shard and clients are joined on it). For intervals and
// deadlines; never for wall-clock dates.
#ifndef PACE_COMMON_STEADY_TIME_H_
#define PACE_COMMON_STEADY_TIME_H_

#include <chrono>
#include <cstdint>

namespace pace {

template <typename Unit>
int64_t SteadyNow() {
  return std::chrono::duration_cast<Unit>(std::chrono::steady_clock::now().time_since_epoch())
      .count();
}
inline int64_t SteadyNowMs() { return SteadyNow<std::chrono::milliseconds>(); }
inline int64_t SteadyNowUs() { return SteadyNow<std::chrono::microseconds>(); }
inline int64_t SteadyNowNs() { return SteadyNow<std::chrono::nanoseconds>(); }

}  // namespace pace

#endif  // PACE_COMMON_STEADY_TIME_H_
