// ValueBoundLedger: the client side of VAP's value bound (value-bounded
// asynchronous parallel, the model Dai et al. use as the ideal ESSP
// approximates) for one process, as plain bookkeeping the client drives.
//
// Under vap with bound v a worker may not start its next clock while, for some
// row, the sum of the absolute values of this process's updates to it that
// are in flight exceeds v. "In flight" here is approximate: an update is in
// flight from the moment its clock's batch is sealed for a shard until that
// shard acknowledges the batch (it is then applied, and the shard's next push
// carries it to every subscriber; reads are pushed as under essp). The
// updates of the clock a worker is still in are not counted: they are sealed,
// and counted, by the Clock() that would run ahead. The bound is kept per row
// and waited for per shard: a worker waits only for the acknowledgements of
// the shards that hold a row over the bound, and only up to the clock that
// brings every such row back within v.
//
// The magnitude of one row's update is AbsSum of its coalesced delta: the L1
// norm over its elements (integer tables too), so v is in the table's units.
//
// Thread-safety: not thread-safe; the caller serialises (the client holds it
// under the lock it seals batches and handles Acks with).
#ifndef PACE_CONSISTENCY_VALUE_BOUND_H_
#define PACE_CONSISTENCY_VALUE_BOUND_H_

#include <cstdint>
#include <map>
#include <string_view>
#include <unordered_map>
#include <utility>
#include <vector>

#include "common/clock.h"
#include "common/row.h"

namespace pace {

// The L1 norm of a delta of format `f` (dense: all elements; sparse: its
// entries). 0 for a delta that is not well formed (the caller validated it).
double AbsSum(const RowFormat& f, std::string_view delta);

class ValueBoundLedger {
 public:
  ValueBoundLedger() = default;

  // Records the update of `key` (held by `shard`) sealed into part `part` of
  // the batch of clock `c` (0 for a clock sent whole), of magnitude
  // `abs_sum` >= 0, against the table's bound `v` (> 0). Updates of one row in
  // several clocks or parts add up.
  void Add(uint32_t shard, ClockT c, uint32_t part, const RowKey& key, double abs_sum, double v);

  // `shard` acknowledged every batch of clocks < `through` and the parts <
  // `parts` of clock `through` (a clock sent in parts: docs/wire-protocol.md
  // "Apply parts"): their updates are no longer in flight. A part must count
  // as acknowledged on its own: the clock it belongs to may only be finished
  // by a worker that waits for it.
  void Acked(uint32_t shard, ClockT through, uint32_t parts = 0);

  // True if no row's in-flight magnitude exceeds its table's bound.
  bool WithinBound() const { return over_.empty(); }

  // For each shard holding a row over its bound: the clock through which it
  // must acknowledge (Acked's `through`, whole clocks) for every such row of
  // it to be within its bound again. Sorted by shard. Empty when
  // WithinBound().
  std::vector<std::pair<uint32_t, ClockT>> WaitFor() const;

  // The largest in-flight magnitude over the rows, and the number of rows in
  // flight (for stats and tests).
  double MaxInFlight() const;
  size_t rows_in_flight() const { return rows_.size(); }

 private:
  using Stamp = std::pair<ClockT, uint32_t>;  // (clock, part)
  struct RowState {
    uint32_t shard = 0;
    double bound = 0;
    double total = 0;                  // sum over `by_stamp`
    std::map<Stamp, double> by_stamp;  // in-flight magnitude per sealed part
  };
  void Refresh(const RowKey& key, const RowState& r);

  std::unordered_map<RowKey, RowState, RowKeyHash> rows_;
  // Per shard, the rows with updates in flight there, by (clock, part).
  std::vector<std::map<Stamp, std::vector<RowKey>>> pending_;
  // Rows over their bound.
  std::unordered_map<RowKey, bool, RowKeyHash> over_;
};

}  // namespace pace

#endif  // PACE_CONSISTENCY_VALUE_BOUND_H_
