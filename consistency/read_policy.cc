#include "consistency/read_policy.h"

#include <algorithm>

#include "consistency/staleness_histogram.h"

namespace pace {

ReadPolicy::ReadPolicy(Consistency consistency, int64_t staleness)
    : consistency_(consistency), staleness_(BoundFor(consistency, staleness)) {}

int64_t ReadPolicy::histogram_bound() const {
  return std::min<int64_t>(staleness_, kMaxTrackedStaleness);
}

}  // namespace pace
