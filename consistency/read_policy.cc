#include "consistency/read_policy.h"

#include <algorithm>

namespace pace {

ReadPolicy::ReadPolicy(Consistency consistency, int64_t staleness)
    : consistency_(consistency),
      staleness_(consistency == Consistency::kBsp ? 0 : std::max<int64_t>(staleness, 0)) {}

Version ReadPolicy::MinVersion(ClockT c) const {
  if (is_async()) return 0;
  return std::max<Version>(0, c - staleness_);
}

bool ReadPolicy::IsFresh(Version v, ClockT c) const {
  return is_async() || IsFreshEnough(v, c, staleness_);
}

}  // namespace pace
