#include "tools/bench/ratio.h"

#include <benchmark/benchmark.h>

#include <algorithm>
#include <cmath>
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
      if (r.error_occurred) errors[r.benchmark_name()] = r.error_message;
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
      samples[r.benchmark_name()].push_back(m);
    }
  }
  // The median over repetitions of each benchmark (robust to a noisy machine).
  std::map<std::string, Measured> Medians() const {
    std::map<std::string, Measured> out;
    for (const auto& [name, v] : samples) {
      std::vector<double> t, r;
      for (const Measured& m : v) {
        t.push_back(m.real_time_ns);
        r.push_back(m.items_per_second);
      }
      std::sort(t.begin(), t.end());
      std::sort(r.begin(), r.end());
      out[name] = Measured{t[t.size() / 2], r[r.size() / 2]};
    }
    return out;
  }
  std::map<std::string, std::vector<Measured>> samples;
  std::map<std::string, std::string> errors;  // benchmark name -> its error message
};

// An exact name, else the first run whose name starts with `name` + "/" (so
// "BM_X" matches "BM_X/min_time:2.000/real_time").
template <typename V>
typename std::map<std::string, V>::const_iterator Find(const std::map<std::string, V>& m,
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
  // Unless told otherwise: 5 repetitions, randomly interleaved, so a subject
  // and its baseline see the same machine; ratios use the medians.
  std::vector<char*> args(argv, argv + argc);
  bool has_reps = false, has_interleave = false, has_filter = false;
  for (int i = 1; i < argc; ++i) {
    std::string a = argv[i];
    has_reps |= a.rfind("--benchmark_repetitions", 0) == 0;
    has_interleave |= a.rfind("--benchmark_enable_random_interleaving", 0) == 0;
    has_filter |= a.rfind("--benchmark_filter", 0) == 0;
  }
  static char reps[] = "--benchmark_repetitions=5";
  static char interleave[] = "--benchmark_enable_random_interleaving=true";
  static char no_aggregates[] = "--benchmark_report_aggregates_only=false";
  if (!has_reps) args.push_back(reps);
  if (!has_interleave) args.push_back(interleave);
  args.push_back(no_aggregates);
  int n = static_cast<int>(args.size());
  args.push_back(nullptr);
  benchmark::Initialize(&n, args.data());
  CollectingReporter reporter;
  benchmark::RunSpecifiedBenchmarks(&reporter);
  const std::map<std::string, Measured> medians = reporter.Medians();
  std::string lines;
  int missing = 0;  // comparisons with a target that produced no ratio
  for (const PairSpec& p : Pairs()) {
    auto b = Find(medians, p.baseline);
    auto s = Find(medians, p.subject);
    char buf[1024];
    if (b == medians.end() || s == medians.end()) {
      // A benchmark that reported an error failed; one that reported nothing
      // was filtered out if a --benchmark_filter was given, else it failed.
      std::string why;
      for (const std::string* name : {&p.baseline, &p.subject}) {
        auto e = Find(reporter.errors, *name);
        if (e != reporter.errors.end()) why += (why.empty() ? "" : "; ") + *name + ": " + e->second;
      }
      const bool failed = !why.empty() || !has_filter;
      if (why.empty()) why = has_filter ? "filtered out" : "no result";
      if (failed && p.target > 0) ++missing;
      std::snprintf(buf, sizeof(buf), "RATIO %s: not run (%s)%s\n", p.label.c_str(), why.c_str(),
                    failed && p.target > 0 ? " FAILED" : "");
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
    if (!(ratio > 0) || !std::isfinite(ratio)) {
      // A zero or missing rate or time: no ratio to compare with the target.
      std::snprintf(buf, sizeof(buf), "RATIO %s: no ratio (%s vs %s measured %g)%s\n",
                    p.label.c_str(), p.subject.c_str(), p.baseline.c_str(), ratio,
                    p.target > 0 ? " FAILED" : "");
      if (p.target > 0) ++missing;
      lines += buf;
      continue;
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
  if (missing > 0) {
    std::fprintf(stderr, "%d comparison(s) with a target did not run or produced no ratio\n",
                 missing);
    return 1;
  }
  return 0;
}

}  // namespace pace::bench
