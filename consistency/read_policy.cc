#include "consistency/read_policy.h"

#include <algorithm>

namespace pace {

ReadPolicy::ReadPolicy(Consistency consistency, int64_t staleness)
    : consistency_(consistency),
      staleness_(consistency == Consistency::kBsp ? 0 : std::max<int64_t>(staleness, 0)) {}

}  // namespace pace
