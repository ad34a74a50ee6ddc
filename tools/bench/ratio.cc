#include "tools/bench/ratio.h"

#include <benchmark/benchmark.h>

#include <cstdio>
#include <cstdlib>
#include <map>
#include <vector>

namespace pace::bench {
namespace {

struct PairSpec {
  std::string label, baseline, subject;
  RatioKind kind;
  double target;
};

std::vector<PairSpec>& Pairs() {
  static auto* pairs = new std::vector<PairSpec>();
  return *pairs;
}

struct Measured {
  double real_time_ns = 0;  // per iteration
  double items_per_second = 0;
};

// Prints the usual console table and remembers each run's figures.
class CollectingReporter : public benchmark::ConsoleReporter {
 public:
  void ReportRuns(const std::vector<Run>& runs) override {
    ConsoleReporter::ReportRuns(runs);
    for (const Run& r : runs) {
      if (r.error_occurred || r.run_type != Run::RT_Iteration) continue;
      Measured m;
      m.real_time_ns = r.GetAdjustedRealTime();  // in the run's time unit
      switch (r.time_unit) {
        case benchmark::kMicrosecond:
          m.real_time_ns *= 1e3;
          break;
        case benchmark::kMillisecond:
          m.real_time_ns *= 1e6;
          break;
        case benchmark::kSecond:
          m.real_time_ns *= 1e9;
          break;
        default:
          break;
      }
      auto it = r.counters.find("items_per_second");
      if (it != r.counters.end()) m.items_per_second = it->second.value;
      results[r.benchmark_name()] = m;
    }
  }
  std::map<std::string, Measured> results;
};

// An exact name, else the first run whose name starts with `name` + "/" (so
// "BM_X" matches "BM_X/min_time:2.000/real_time").
std::map<std::string, Measured>::const_iterator Find(const std::map<std::string, Measured>& m,
                                                     const std::string& name) {
  auto it = m.find(name);
  if (it != m.end()) return it;
  for (it = m.begin(); it != m.end(); ++it) {
    if (it->first.compare(0, name.size() + 1, name + "/") == 0) return it;
  }
  return m.end();
}

}  // namespace

void Pair(const std::string& label, const std::string& baseline, const std::string& subject,
          RatioKind kind, double target) {
  Pairs().push_back({label, baseline, subject, kind, target});
}

int RunAndReport(int argc, char** argv) {
  benchmark::Initialize(&argc, argv);
  CollectingReporter reporter;
  benchmark::RunSpecifiedBenchmarks(&reporter);
  std::string lines;
  for (const PairSpec& p : Pairs()) {
    auto b = Find(reporter.results, p.baseline);
    auto s = Find(reporter.results, p.subject);
    char buf[512];
    if (b == reporter.results.end() || s == reporter.results.end()) {
      std::snprintf(buf, sizeof(buf), "RATIO %s: not run (filtered out or failed)\n",
                    p.label.c_str());
      lines += buf;
      continue;
    }
    double ratio;
    const char* op;
    bool met;
    if (p.kind == kTimeRatioAtMost) {
      ratio = s->second.real_time_ns / b->second.real_time_ns;
      op = "<=";
      met = ratio <= p.target;
    } else {
      ratio = b->second.items_per_second > 0
                  ? s->second.items_per_second / b->second.items_per_second
                  : 0;
      op = ">=";
      met = ratio >= p.target;
    }
    if (p.target <= 0) {
      std::snprintf(buf, sizeof(buf), "RATIO %s: %.3f (%s vs %s; no target)\n", p.label.c_str(),
                    ratio, p.subject.c_str(), p.baseline.c_str());
    } else {
      std::snprintf(buf, sizeof(buf), "RATIO %s: %.3f (target %s %.2f) %s\n", p.label.c_str(),
                    ratio, op, p.target, met ? "MET" : "MISSED");
    }
    lines += buf;
  }
  std::fputs(lines.c_str(), stdout);
  if (const char* out = std::getenv("PACE_BENCH_OUT")) {
    if (FILE* f = std::fopen(out, "a")) {
      std::fputs(lines.c_str(), f);
      std::fclose(f);
    }
  }
  return 0;
}

}  // namespace pace::bench
