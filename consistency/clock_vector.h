// ClockVector: a shard's per-client applied clocks and their minimum, the
// shard clock (docs/design.md, "Semantics"), plus what a "client X holds back the shard
// clock" warning needs: which clients sit at the minimum and since when.
//
// Times are caller-supplied milliseconds on any monotonic scale, which keeps
// the class deterministic and testable.
//
// Thread-compatible: the owner (the shard service) serializes access.
#ifndef PACE_CONSISTENCY_CLOCK_VECTOR_H_
#define PACE_CONSISTENCY_CLOCK_VECTOR_H_

#include <cstdint>
#include <vector>

#include "common/clock.h"

namespace pace {

class ClockVector {
 public:
  // `num_clients` clients, all at clock 0, the minimum dating from `now_ms`.
  explicit ClockVector(uint32_t num_clients, int64_t now_ms = 0);
  // Starts from recorded clocks (e.g. a store's applied clocks after a
  // restart). Negative entries are treated as 0.
  ClockVector(std::vector<ClockT> clocks, int64_t now_ms);

  uint32_t num_clients() const { return static_cast<uint32_t>(clocks_.size()); }
  // REQUIRES: client < num_clients().
  ClockT Get(ClientId client) const { return clocks_[client]; }
  const std::vector<ClockT>& clocks() const { return clocks_; }
  // The shard clock: min over all clients; 0 when there are no clients.
  Version Min() const { return min_; }
  // The largest client clock; 0 when there are no clients.
  ClockT Max() const;

  // Sets `client`'s clock (clocks may also move back, e.g. after a restore)
  // and returns the new minimum. Returns Min() unchanged and does nothing if
  // client >= num_clients() or clock < 0.
  Version Set(ClientId client, ClockT clock, int64_t now_ms);
  // Set(client, Get(client) + 1, now_ms).
  Version Advance(ClientId client, int64_t now_ms);

  // The clients whose clock equals Min(), in increasing id order: the ones
  // holding back the shard clock.
  std::vector<ClientId> Laggards() const;
  // When Min() last changed (or construction time).
  int64_t min_since_ms() const { return min_since_ms_; }
  // True if some client is ahead of Min(): it is waiting for the laggards.
  bool HoldsBack() const { return num_at_min_ < clocks_.size(); }
  // Since when HoldsBack() has been true with the current Min(): the later of
  // the last change of Min() and the moment a client first moved ahead of it.
  // Meaningful only while HoldsBack().
  int64_t held_back_since_ms() const { return held_back_since_ms_; }

 private:
  void Recompute(int64_t now_ms);

  std::vector<ClockT> clocks_;
  Version min_ = 0;
  uint32_t num_at_min_ = 0;  // how many clients have clock == min_
  int64_t min_since_ms_ = 0;
  int64_t held_back_since_ms_ = 0;
};

}  // namespace pace

#endif  // PACE_CONSISTENCY_CLOCK_VECTOR_H_
