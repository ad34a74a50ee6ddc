// The bound of the read-staleness histograms (docs/design.md, "The read
// rule"): a table's histogram has exact buckets 0..min(s, kMaxTrackedStaleness)
// and one "more than that" bucket (ReadPolicy::histogram_bound; the client
// keeps the counts, client/worker_stats.h).
#ifndef PACE_CONSISTENCY_STALENESS_HISTOGRAM_H_
#define PACE_CONSISTENCY_STALENESS_HISTOGRAM_H_

#include <cstdint>

namespace pace {

// Staleness bounds above this share their overflow bucket with it (async
// tables have an "infinite" bound).
inline constexpr int64_t kMaxTrackedStaleness = 1024;

}  // namespace pace

#endif  // PACE_CONSISTENCY_STALENESS_HISTOGRAM_H_
