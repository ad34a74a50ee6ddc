// ReadPolicy: the read rule of one table (DESIGN.md section 1) as the client
// applies it: which min_version to request and whether a cached version may be
// used by a worker at clock c.
//
// A plain value; thread-compatible (and safe to share read-only).
#ifndef PACE_CONSISTENCY_READ_POLICY_H_
#define PACE_CONSISTENCY_READ_POLICY_H_

#include <cstdint>

#include "common/clock.h"
#include "common/schema.h"

namespace pace {

class ReadPolicy {
 public:
  // bsp forces s = 0; async ignores s; a negative s is treated as 0.
  ReadPolicy(Consistency consistency, int64_t staleness);
  static ReadPolicy For(const TableSchema& schema) {
    return ReadPolicy(schema.consistency, schema.staleness);
  }

  Consistency consistency() const { return consistency_; }
  // The bound s in effect (0 for bsp; meaningless for async).
  int64_t staleness() const { return staleness_; }
  bool is_async() const { return consistency_ == Consistency::kAsync; }
  // True for essp: the shard pushes subscribed rows, reads subscribe.
  bool uses_push() const { return consistency_ == Consistency::kEssp; }

  // The min_version a worker at clock `c` requests on a miss or a too-stale
  // row: max(0, c - s); 0 for async (any value will do).
  Version MinVersion(ClockT c) const {
    if (is_async()) return 0;
    return c - staleness_ > 0 ? c - staleness_ : 0;
  }
  // Whether a cached value of version `v` may serve a worker at clock `c`:
  // IsFreshEnough(v, c, s); always true for async (a cached value exists).
  // Inline: it runs on every cache hit.
  bool IsFresh(Version v, ClockT c) const { return is_async() || IsFreshEnough(v, c, staleness_); }
  // The staleness of such a read, as recorded in the histogram: c - v.
  static int64_t Staleness(ClockT c, Version v) { return c - v; }

 private:
  Consistency consistency_;
  int64_t staleness_;
};

}  // namespace pace

#endif  // PACE_CONSISTENCY_READ_POLICY_H_
