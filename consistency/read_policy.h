// ReadPolicy: the client side of the protocol for one table (docs/design.md,
// "The read rule"), in one place: the bound s in effect ("bsp means s = 0" lives here and
// nowhere else), whether the table's rows are kept fresh by shard pushes or
// pulled by Reads, which min_version to request, whether a cached version may
// serve a worker at clock c, and how far the staleness histogram tracks
// staleness exactly.
//
// Pull or push: essp, async and vap tables subscribe on their first read and
// are refreshed by pushes (async never blocks once a row is cached, and
// without pushes a cached async row would never change:
// docs/client-example.md); bsp and ssp tables are pulled: a miss or a
// too-stale row sends a Read. vap reads as async (no clock bound); its bound
// is on values, kept by the writer (value_bound(); consistency/value_bound.h).
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
  // bsp forces s = 0; a negative s is treated as 0. For async, s bounds no
  // read; it only sets how far the histogram tracks staleness exactly.
  ReadPolicy(Consistency consistency, int64_t staleness, double value_bound = 0);
  static ReadPolicy For(const TableSchema& schema) {
    return ReadPolicy(schema.consistency, schema.staleness, schema.value_bound);
  }
  // The staleness a table of this consistency records: 0 for bsp, else
  // max(s, 0). The one definition of "bsp means s = 0".
  static int64_t BoundFor(Consistency consistency, int64_t staleness) {
    return consistency == Consistency::kBsp ? 0 : (staleness > 0 ? staleness : 0);
  }

  Consistency consistency() const { return consistency_; }
  // The bound s in effect (0 for bsp; bounds no read for async).
  int64_t staleness() const { return staleness_; }
  bool is_async() const { return consistency_ == Consistency::kAsync; }
  // False for async and vap: no read waits for a clock once its row is cached.
  bool clock_bounded() const {
    return consistency_ != Consistency::kAsync && consistency_ != Consistency::kVap;
  }
  // True for essp, async and vap: reads subscribe and the shard pushes the
  // rows; a subscribed row is never pulled again. False: every refresh is a
  // Read.
  bool uses_push() const {
    return consistency_ == Consistency::kEssp || consistency_ == Consistency::kAsync ||
           consistency_ == Consistency::kVap;
  }
  // vap: the value bound v (> 0); 0 for the other models.
  double value_bound() const { return value_bound_; }
  bool value_bounded() const { return consistency_ == Consistency::kVap; }
  // The staleness histogram's exact buckets 0..histogram_bound() (plus one
  // "> bound" bucket): s, capped at kMaxTrackedStaleness.
  int64_t histogram_bound() const;

  // The min_version a worker at clock `c` requests on a miss or a too-stale
  // row: max(0, c - s); 0 for async and vap (any value will do).
  Version MinVersion(ClockT c) const {
    if (!clock_bounded()) return 0;
    return c - staleness_ > 0 ? c - staleness_ : 0;
  }
  // Whether a cached value of version `v` may serve a worker at clock `c`:
  // IsFreshEnough(v, c, s); always true for async and vap (a cached value
  // exists). Inline: it runs on every cache hit.
  bool IsFresh(Version v, ClockT c) const {
    return !clock_bounded() || IsFreshEnough(v, c, staleness_);
  }

 private:
  Consistency consistency_;
  int64_t staleness_;
  double value_bound_;
};

}  // namespace pace

#endif  // PACE_CONSISTENCY_READ_POLICY_H_
