// The process cache and the oplog, kept together: one CacheEntry per row holds
// the cached value (if any) AND this process's own not-yet-acknowledged deltas
// of that row, so Inc needs a single hash lookup for read-my-writes.
//
// Invariant (DESIGN.md section 1, read-my-writes): when has_value,
//   value == (server value at version `version`, containing this process's
//             batches of clocks < `applied`)
//            + sum of pending[i].delta with pending[i].clock >= applied.
// `pending` holds every delta of this row of every clock whose batch is not
// yet acknowledged by the row's shard (open clocks and sent-unacked ones), so a
// fresh server value (v', a') is turned into a cached value by adding exactly
// the pending deltas of clocks >= a'.
//
// The cache is split into CacheStripe's by key hash, each with its own mutex,
// condition variable and byte budget (budget / number of stripes). Eviction is
// CLOCK (second chance) per stripe, a documented approximation of LRU: a hit
// sets a reference bit instead of relinking a list. Only the value is
// evicted; an entry that still has pending deltas stays (as oplog only), so
// eviction never loses an update. Entries pinned by waiting readers or by
// reads in flight are not evicted.
//
// Thread-safety: every member of a CacheStripe and of its entries is guarded
// by CacheStripe::mu.
#ifndef PACE_CLIENT_ROW_CACHE_H_
#define PACE_CLIENT_ROW_CACHE_H_

#include <condition_variable>
#include <cstddef>
#include <cstdint>
#include <mutex>
#include <string>
#include <string_view>
#include <unordered_map>
#include <utility>
#include <vector>

#include "client/table_state.h"
#include "common/clock.h"
#include "common/row.h"

namespace pace::client {

struct PendingDelta {
  ClockT clock = 0;
  std::string delta;  // encoded as a row delta of the table's format
};

struct CacheEntry {
  RowKey key;
  uint32_t shard = 0;
  TableState* table = nullptr;
  bool has_value = false;
  // The shard pushes this row to us (ESSP/async): its effective version is
  // max(version, the shard's last PushDone version).
  bool subscribed = false;
  bool referenced = false;  // CLOCK bit
  uint16_t waiters = 0;     // readers blocked on this row
  Version version = 0;      // server version of `value`
  ClockT applied = 0;       // this process's applied clock with that value
  int32_t ring_index = -1;  // position in CacheStripe::ring, -1 if no value
  std::string value;
  std::vector<PendingDelta> pending;
  // min_version of each Read of this row sent and not yet answered (few).
  std::vector<Version> reads_in_flight;

  PendingDelta* FindPending(ClockT c) {
    for (size_t i = pending.size(); i-- > 0;) {
      if (pending[i].clock == c) return &pending[i];
    }
    return nullptr;
  }
  bool pinned() const { return waiters != 0 || !reads_in_flight.empty(); }
  // True if a Read in flight will be answered as soon as the shard clock
  // reaches `need`. (One with a larger min_version may be parked waiting for
  // this very process to advance: never rely on it.)
  bool ReadInFlightAtMost(Version need) const {
    for (Version m : reads_in_flight) {
      if (m <= need) return true;
    }
    return false;
  }
  void ReadAnswered(Version min_version) {
    for (size_t i = 0; i < reads_in_flight.size(); ++i) {
      if (reads_in_flight[i] == min_version) {
        reads_in_flight.erase(reads_in_flight.begin() + static_cast<long>(i));
        return;
      }
    }
  }
};

// Approximate bytes an entry costs beyond its value: the entry, the hash node
// and bucket, the ring slot.
inline constexpr size_t kEntryOverheadBytes = sizeof(CacheEntry) + 48;

struct alignas(64) CacheStripe {
  // Finds the entry for `key` or nullptr.
  CacheEntry* Find(const RowKey& key) {
    auto it = map.find(key);
    return it == map.end() ? nullptr : &it->second;
  }
  CacheEntry* FindOrCreate(const RowKey& key, uint32_t shard, TableState* table);

  // Adds a validated delta of clock `c` to the row's oplog and, if cached, to
  // its value. Registers the entry in the clock's dirty list on its first
  // delta of that clock.
  void AddDelta(CacheEntry* e, ClockT c, std::string_view delta);
  // One cell of a dense row: element `col` += `value` (converted).
  void AddDenseCell(CacheEntry* e, ClockT c, uint32_t col, double value);

  // Installs a server value (validated) per the invariant above.
  void InstallValue(CacheEntry* e, std::string server_value, Version v, ClockT a);
  // Forgets the value (keeps the oplog). Does not touch `subscribed`.
  void DropValue(CacheEntry* e);
  // Erases the entry if it holds nothing: no value, no pending, not pinned.
  void MaybeErase(CacheEntry* e);
  // Removes pending deltas of clocks <= c (acknowledged by the shard).
  void PurgeAcked(const RowKey& key, ClockT c);

  // Removes and returns the entries with a delta of clock `c`.
  std::vector<CacheEntry*> TakeDirty(ClockT c);

  // Evicts values (CLOCK order) until bytes <= budget or nothing is
  // evictable. Calls on_evict(entry) before each value is dropped.
  template <typename OnEvict>
  void EvictOverBudget(OnEvict&& on_evict) {
    size_t spins = 0;
    while (bytes > budget && !ring.empty() && spins < 2 * ring.size() + 2) {
      if (hand >= ring.size()) hand = 0;
      CacheEntry* e = ring[hand];
      if (e->pinned() || e->referenced) {
        e->referenced = false;
        ++hand;
        ++spins;
        continue;
      }
      spins = 0;
      on_evict(e);
      DropValue(e);  // swaps ring[hand] with the last slot: re-examine `hand`
      MaybeErase(e);
    }
  }

  size_t Charge(const CacheEntry& e) const { return e.value.capacity() + kEntryOverheadBytes; }

  std::mutex mu;
  std::condition_variable cv;  // a value arrived or shard state changed
  std::unordered_map<RowKey, CacheEntry, RowKeyHash> map;
  std::vector<CacheEntry*> ring;  // entries with a value
  size_t hand = 0;
  size_t bytes = 0;   // sum of Charge() over `ring`
  size_t budget = 0;  // cache budget / number of stripes
  int waiters = 0;    // readers blocked in this stripe
  // Open and sending clocks -> entries with a delta of that clock (few clocks).
  std::vector<std::pair<ClockT, std::vector<CacheEntry*>>> dirty;
};

}  // namespace pace::client

#endif  // PACE_CLIENT_ROW_CACHE_H_
