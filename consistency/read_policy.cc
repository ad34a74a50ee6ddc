#include "consistency/read_policy.h"

#include <algorithm>

#include "consistency/staleness_histogram.h"

namespace pace {

ReadPolicy::ReadPolicy(Consistency consistency, int64_t staleness, double value_bound)
    : consistency_(consistency),
      staleness_(BoundFor(consistency, staleness)),
      value_bound_(consistency == Consistency::kVap ? value_bound : 0) {}

int64_t ReadPolicy::histogram_bound() const {
  return std::min<int64_t>(staleness_, kMaxTrackedStaleness);
}

}  // namespace pace
