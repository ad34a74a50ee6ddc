// Clocks and versions (docs/design.md, "Workers and clocks", "Shard clock and versions").
//
// A worker's clock counts its Clock() calls, starting at 0. A shard's applied
// clock for a client is the number of that client's clocks it has applied; the
// shard clock is the minimum over the job's clients. A value stamped with
// version v contains every update of every clock < v.
#ifndef PACE_COMMON_CLOCK_H_
#define PACE_COMMON_CLOCK_H_

#include <cstddef>
#include <cstdint>

namespace pace {

using ClockT = int64_t;     // a worker, process or applied clock
using Version = int64_t;    // a shard clock stamped on a value
using ClientId = uint32_t;  // index of a client process in [0, num_clients)

// The read rule: a worker at clock `c` reading with staleness bound `s` may use
// a value of version `v` iff v >= c - s.
inline bool IsFreshEnough(Version v, ClockT c, int64_t s) { return v >= c - s; }

// Identifies a row across tables.
struct RowKey {
  uint32_t table = 0;
  uint64_t row = 0;
  friend bool operator==(const RowKey& a, const RowKey& b) {
    return a.table == b.table && a.row == b.row;
  }
  friend bool operator<(const RowKey& a, const RowKey& b) {
    return a.table != b.table ? a.table < b.table : a.row < b.row;
  }
};

struct RowKeyHash {
  size_t operator()(const RowKey& k) const {
    uint64_t x = (static_cast<uint64_t>(k.table) << 32) ^ k.row ^ (k.row >> 29);
    x = (x ^ (x >> 30)) * 0xBF58476D1CE4E5B9ull;
    x = (x ^ (x >> 27)) * 0x94D049BB133111EBull;
    return static_cast<size_t>(x ^ (x >> 31));
  }
};

}  // namespace pace

#endif  // PACE_COMMON_CLOCK_H_
