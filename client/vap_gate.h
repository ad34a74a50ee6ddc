// VapGate: where a client process keeps VAP's value bound (the vap tables of
// docs/design.md, "VAP: the value bound"). It wraps a
// consistency::ValueBoundLedger with a lock and the client's three events:
//   Register   a vap table is opened (other tables are ignored throughout);
//   Sealed     a clock's batch is sealed for the shards: each row's coalesced
//              delta of a vap table counts, by its L1 norm, as in flight;
//   Acked      a shard acknowledged the batches of clocks < through.
// A worker's Clock() waits while !WithinBound(): some row's in-flight updates
// exceed its table's v, until the Acks of the shards holding such rows bring
// them back within it. Reads are pushed as under essp.
//
// Thread-safe (one internal lock, taken last: callers may hold their own).
#ifndef PACE_CLIENT_VAP_GATE_H_
#define PACE_CLIENT_VAP_GATE_H_

#include <atomic>
#include <cstdint>
#include <unordered_map>
#include <vector>

#include "common/clock.h"
#include "common/mutex.h"
#include "common/row.h"
#include "common/schema.h"
#include "common/thread_annotations.h"
#include "consistency/value_bound.h"
#include "net/messages.h"

namespace pace {
namespace client {

class VapGate {
 public:
  // Notes a table; only vap tables are kept.
  void Register(const TableSchema& schema);
  // True once a vap table is registered: until then the other calls are
  // no-ops and cost one atomic load.
  bool active() const { return active_.load(std::memory_order_acquire); }

  // The batch of clock `c`, per shard: parts[k] are shard k's Apply messages,
  // numbered up to last_part[k].
  void Sealed(ClockT c, const std::vector<std::vector<net::Apply>>& parts,
              const std::vector<uint32_t>& last_part);
  // Shard `shard` acknowledged the clocks < through and the parts < parts of
  // clock `through`.
  void Acked(uint32_t shard, ClockT through, uint32_t parts);

  // True if no vap row has more than its table's v in flight (always true
  // without vap tables).
  bool WithinBound() const;
  // The largest in-flight L1 norm of a vap row now (0 without any).
  double MaxInFlight() const;

 private:
  struct VapTable {
    RowFormat format;
    double bound = 0;
  };

  std::atomic<bool> active_{false};
  mutable Mutex mu_;
  std::unordered_map<uint32_t, VapTable> tables_ GUARDED_BY(mu_);  // by table id
  ValueBoundLedger ledger_ GUARDED_BY(mu_);
};

}  // namespace client
}  // namespace pace

#endif  // PACE_CLIENT_VAP_GATE_H_
