// Per-worker measurement counters (ClientStats / TableStats in client/pace.h).
//
// Each Worker owns one WorkerStats and is its only writer, so the hot paths
// (a cache-hit Get, an Inc) update plain relaxed atomics with a load and a
// store instead of contended read-modify-writes. Client::Stats() reads them
// concurrently (relaxed loads) and sums over workers; ResetStats() records a
// baseline instead of writing to them, so there is never a second writer.
//
// Thread-safety: Add* only from the owning worker's thread; Get/Snapshot from
// any thread.
#ifndef PACE_CLIENT_WORKER_STATS_H_
#define PACE_CLIENT_WORKER_STATS_H_

#include <algorithm>
#include <atomic>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <vector>

namespace pace::client {

// A counter with a single writer.
class SoloCounter {
 public:
  void Add(uint64_t n) {
    v_.store(v_.load(std::memory_order_relaxed) + n, std::memory_order_relaxed);
  }
  uint64_t Get() const { return v_.load(std::memory_order_relaxed); }

 private:
  std::atomic<uint64_t> v_{0};
};

// Counters of one worker for one table. `bound` is the tracked staleness
// bound: buckets 0..bound plus one "> bound" bucket.
struct TableCounters {
  explicit TableCounters(int64_t bound)
      : bound(bound), hist(new SoloCounter[static_cast<size_t>(bound) + 2]) {}

  void RecordStaleness(int64_t staleness) {
    int64_t st = std::max<int64_t>(staleness, 0);
    hist[static_cast<size_t>(std::min<int64_t>(st, bound + 1))].Add(1);
    staleness_sum.Add(static_cast<uint64_t>(st));
  }

  const int64_t bound;
  std::unique_ptr<SoloCounter[]> hist;
  SoloCounter staleness_sum;
  SoloCounter reads;
  SoloCounter hits;
  SoloCounter blocked;
  SoloCounter fetched;
  SoloCounter incs;
};

class WorkerStats {
 public:
  // Tables are numbered densely per client; tables beyond this many are not
  // measured (their reads and updates work as usual).
  static constexpr size_t kMaxTables = 1024;

  WorkerStats() {
    for (auto& t : tables_) t.store(nullptr, std::memory_order_relaxed);
  }
  ~WorkerStats() {
    for (auto& t : tables_) delete t.load(std::memory_order_relaxed);
  }
  WorkerStats(const WorkerStats&) = delete;
  WorkerStats& operator=(const WorkerStats&) = delete;

  // The counters of table `index` (tracked bound `bound`), created on first
  // use; nullptr if index >= kMaxTables. Owner thread only.
  TableCounters* For(uint32_t index, int64_t bound) {
    if (index >= kMaxTables) return nullptr;
    TableCounters* c = tables_[index].load(std::memory_order_acquire);
    if (c == nullptr) {
      c = new TableCounters(bound);
      tables_[index].store(c, std::memory_order_release);
    }
    return c;
  }
  // Any thread; nullptr if the worker never touched the table.
  const TableCounters* Peek(uint32_t index) const {
    return index < kMaxTables ? tables_[index].load(std::memory_order_acquire) : nullptr;
  }

  SoloCounter get_blocked_ns;
  SoloCounter clock_blocked_ns;
  // The worker's id in its leased rows (CacheEntry::lease_owner; set at
  // registration, never 0), and whether it holds leases now (owner thread
  // only).
  uint16_t lease_id = 0;
  bool holds_leases = false;
  bool lease_refused = false;  // the last refusal of a read came from a lease

 private:
  std::atomic<TableCounters*> tables_[kMaxTables];
};

}  // namespace pace::client

#endif  // PACE_CLIENT_WORKER_STATS_H_
