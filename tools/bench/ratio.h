// Ratio reporting for PaceDB benchmarks: every subject benchmark is paired with
// a baseline run in the same binary and the same run, and reported as a ratio
// (never as an absolute time) next to its target.
//
//   int main(int argc, char** argv) {
//     pace::bench::Pair("cache_hit_get/1thread", "BM_MapGet/threads:1", "BM_PaceGet/threads:1",
//                       pace::bench::kTimeRatioAtMost, 2.0);
//     return pace::bench::RunAndReport(argc, argv);
//   }
#ifndef PACE_TOOLS_BENCH_RATIO_H_
#define PACE_TOOLS_BENCH_RATIO_H_

#include <string>

namespace pace::bench {

enum RatioKind {
  // subject time / baseline time, target: ratio <= target (e.g. "<= 2x the baseline's time").
  kTimeRatioAtMost,
  // subject rate / baseline rate (items_per_second), target: ratio >= target.
  kRateRatioAtLeast,
};

// Registers a comparison between two benchmark runs, named as Google Benchmark
// prints them. A target <= 0 means "no target, report only".
void Pair(const std::string& label, const std::string& baseline, const std::string& subject,
          RatioKind kind, double target);

// Runs the registered benchmarks (honouring --benchmark_* flags), prints the
// usual table, then one line per Pair:
//   RATIO <label>: <ratio> (target <op> <target>) MET|MISSED
// (medians over repetitions, randomly interleaved unless --benchmark_* flags
// say otherwise) and appends the same lines to the file named by $PACE_BENCH_OUT if set.
// A Pair that produced no ratio prints "RATIO <label>: not run (<why>)" or
// "RATIO <label>: no ratio (...)", with " FAILED" at the end if it has a target.
// Returns 0 if every Pair with a target produced a ratio (a missed target is
// reported, not a failure), else 1: one of its benchmarks failed (SkipWithError),
// reported nothing without a --benchmark_filter that excluded it, or measured
// a zero rate or time.
int RunAndReport(int argc, char** argv);

}  // namespace pace::bench

#endif  // PACE_TOOLS_BENCH_RATIO_H_
