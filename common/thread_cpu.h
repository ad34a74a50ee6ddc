// CPU time by thread, from /proc: what each of a process's threads (named by
// SetThreadName, common/thread_name.h) spent, summed per kind of thread, so
// that a run can say where its CPU went without a profiler. Linux only; on
// other systems, or if /proc cannot be read, the readings are empty.
#ifndef PACE_COMMON_THREAD_CPU_H_
#define PACE_COMMON_THREAD_CPU_H_

#include <map>
#include <string>

namespace pace {

// A thread's kind: its name without a trailing "-N" or "N" (the index of
// one of several alike: "pace-worker-1" -> "pace-worker", "pace-reader-0"
// -> "pace-reader"); other names as they are ("rocksdb:low").
std::string ThreadKind(const std::string& name);

// CPU seconds (user + system) of every live thread of this process, summed
// by ThreadKind, and of the whole process (every thread it ever had, those
// that ended too).
struct CpuReading {
  std::map<std::string, double> by_kind;
  double process = 0;
};
CpuReading ReadThreadCpu();

// CPU seconds (user + system) of the whole process so far (getrusage).
double ProcessCpuSeconds();

// What the process spent between two readings: `after` - `before` per kind
// (a kind whose threads ended between them is left out: their CPU is in
// `process` only), and the process's total.
CpuReading CpuBetween(const CpuReading& before, const CpuReading& after);

}  // namespace pace

#endif  // PACE_COMMON_THREAD_CPU_H_
