// RunAndReport's exit status: 1 when a comparison with a target produced no
// ratio (a benchmark failed or reported nothing), 0 otherwise (a missed target
// is not a failure). Each case runs in a child process (a death test): the
// benchmark and Pair registries are process-wide.
#include "tools/bench/ratio.h"

#include <benchmark/benchmark.h>
#include <gtest/gtest.h>

#include <cstdlib>
#include <vector>

namespace pace::bench {
namespace {

void Spin(benchmark::State& state) {
  for (auto _ : state) benchmark::DoNotOptimize(state.iterations());
  state.SetItemsProcessed(state.iterations());
}

void Fail(benchmark::State& state) { state.SkipWithError("set-up failed"); }

// Registers the benchmarks, runs them briefly with `extra` flags, exits with
// RunAndReport's status.
[[noreturn]] void RunAndExit(std::vector<const char*> extra) {
  benchmark::RegisterBenchmark("BM_Base", Spin);
  benchmark::RegisterBenchmark("BM_Subject", Spin);
  benchmark::RegisterBenchmark("BM_Broken", Fail);
  std::vector<char*> argv = {const_cast<char*>("ratio_test"),
                             const_cast<char*>("--benchmark_min_time=0.001"),
                             const_cast<char*>("--benchmark_repetitions=1")};
  for (const char* e : extra) argv.push_back(const_cast<char*>(e));
  std::exit(RunAndReport(static_cast<int>(argv.size()), argv.data()));
}

TEST(RatioDeathTest, ExitsZeroWhenEveryTargetHasARatioEvenIfMissed) {
  EXPECT_EXIT(
      {
        // A target of 1000x is missed: reported, not a failure.
        Pair("fine", "BM_Base", "BM_Subject", kRateRatioAtLeast, 1000.0);
        // No target: a failed benchmark is reported only.
        Pair("report only", "BM_Base", "BM_Broken", kRateRatioAtLeast, 0);
        RunAndExit({});
      },
      ::testing::ExitedWithCode(0), "");
}

TEST(RatioDeathTest, ExitsOneWhenABenchmarkWithATargetFails) {
  EXPECT_EXIT(
      {
        Pair("fine", "BM_Base", "BM_Subject", kRateRatioAtLeast, 0.01);
        Pair("broken", "BM_Base", "BM_Broken", kRateRatioAtLeast, 0.5);
        RunAndExit({});
      },
      ::testing::ExitedWithCode(1), "did not run or produced no ratio");
}

TEST(RatioDeathTest, ExitsOneWhenABenchmarkWithATargetIsMissing) {
  EXPECT_EXIT(
      {
        Pair("misspelt", "BM_Base", "BM_NoSuchBenchmark", kTimeRatioAtMost, 2.0);
        RunAndExit({});
      },
      ::testing::ExitedWithCode(1), "");
}

TEST(RatioDeathTest, ExitsZeroWhenAFilterLeavesAComparisonOut) {
  EXPECT_EXIT(
      {
        Pair("filtered", "BM_Base", "BM_Subject", kRateRatioAtLeast, 0.5);
        RunAndExit({"--benchmark_filter=BM_Base"});
      },
      ::testing::ExitedWithCode(0), "");
}

}  // namespace
}  // namespace pace::bench
