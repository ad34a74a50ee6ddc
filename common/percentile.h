// The nearest-rank percentile of a histogram: the one definition of "p99"
// behind every staleness summary (client stats, the apps' per-clock rows).
//
// Header-only, thread-compatible.
#ifndef PACE_COMMON_PERCENTILE_H_
#define PACE_COMMON_PERCENTILE_H_

#include <algorithm>
#include <cmath>
#include <cstddef>

namespace pace {

// The smallest bucket index i such that buckets[0..i] hold at least
// ceil(q * total) observations (and at least one), where total is the sum of
// the `n` buckets and q in [0, 1] (clamped). Returns 0 for an empty histogram.
// T is an integer count, or a double holding one (sums of counts); a rank
// that is an integer up to rounding (0.99 * 100) is not rounded up.
template <typename T>
size_t HistogramPercentile(const T* buckets, size_t n, double q) {
  double total = 0;
  for (size_t i = 0; i < n; ++i) total += static_cast<double>(buckets[i]);
  if (!(total > 0)) return 0;
  const double rank = std::max(1.0, std::ceil(std::clamp(q, 0.0, 1.0) * total - 1e-9));
  double seen = 0;
  for (size_t i = 0; i < n; ++i) {
    seen += static_cast<double>(buckets[i]);
    if (seen >= rank) return i;
  }
  return n - 1;
}

}  // namespace pace

#endif  // PACE_COMMON_PERCENTILE_H_
