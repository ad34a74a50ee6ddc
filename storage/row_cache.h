// RowCache: a byte-bounded LRU map from a row key (table, row) to the row's
// materialized stored state — whether the store has a record for it and the
// record's delta sum — plus, for dense tables with a nonzero initializer, the
// initializer's value, so a read is one element-wise add instead of a RocksDB
// merge of every operand and a recomputed initializer.
//
// The cache only stores and evicts; ShardStore (shard_store_data.cc) decides
// what goes in and keeps it exactly equal to what RocksDB would return (see
// docs/storage-format.md section 12).
//
// Layout: entries live in fixed blocks (a slab with a free list; an entry
// never moves) linked into an intrusive LRU list by index; a FlatTable (common/flat_table.h) maps
// (table, row) to an entry index. A lookup touches the table slot and the entry, nothing is
// allocated per lookup, and no list or hash node is allocated per row.
//
// Dirty rows (MarkDirty): rows whose state is newer than RocksDB's, held
// here until a row write-back (docs/storage-format.md section 15). They are
// kept in a list of their own and never evicted, whatever the capacity; their
// bytes count in bytes() and dirty_bytes(). Eviction only removes clean rows.
// A delta-only row (CachedRow::delta_only) holds only the deltas RocksDB does
// not have yet, not the row: it is always dirty, and CleanAll drops it.
//
// Thread-compatibility: not thread-safe; ShardStore guards it with a mutex.
// Pointers returned by Lookup/Peek stay valid until the next call that inserts,
// erases or evicts.
#ifndef PACE_STORAGE_ROW_CACHE_H_
#define PACE_STORAGE_ROW_CACHE_H_

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "common/flat_table.h"

namespace pace {

// The cached state of one row.
struct CachedRow {
  // The store holds a record for the row (some delta was applied).
  bool written = false;
  // When written: the untagged payload of the stored delta sum.
  std::string sum;
  // Dense tables with a nonzero initializer: the initializer's value of the
  // row (InitRow). Empty otherwise.
  std::string init;
  // A delta-only row (docs/storage-format.md section 15): `sum` (when
  // `written`) is the sum of the deltas not yet in RocksDB, not the stored
  // sum; the row is RocksDB's value plus it. `init` is empty. Always dirty.
  bool delta_only = false;
};

struct RowCacheCounters {
  uint64_t hits = 0;
  uint64_t misses = 0;
  uint64_t inserts = 0;
  uint64_t evictions = 0;
};

class RowCache {
 public:
  // Bookkeeping bytes charged per entry besides its strings' heap buffers
  // (list and hash nodes, key, string headers).
  static constexpr size_t kEntryOverhead = 128;

  // capacity_bytes > 0.
  explicit RowCache(size_t capacity_bytes);
  RowCache(const RowCache&) = delete;
  RowCache& operator=(const RowCache&) = delete;

  // The cached row, marked most recently used (counted as a hit), or nullptr
  // (counted as a miss).
  CachedRow* Lookup(uint32_t table, uint64_t row);
  // Like Lookup, but leaves recency and the hit/miss counters alone.
  CachedRow* Peek(uint32_t table, uint64_t row);
  // Inserts or replaces the row as most recently used, then evicts least
  // recently used rows while over capacity. A row larger than the whole
  // capacity is not kept, and a dirty row is never replaced (it is newer).
  void Insert(uint32_t table, uint64_t row, CachedRow value);
  // Re-charges a row whose strings were changed through a Peek/Lookup pointer,
  // then evicts while over capacity (possibly this row). No-op if not cached.
  void Recharge(uint32_t table, uint64_t row);
  // Marks a cached row dirty (never evicted until CleanAll). False if the
  // row is not cached.
  bool MarkDirty(uint32_t table, uint64_t row) { return PinDirty(table, row) != kNoHandle; }
  // Inserts the row as dirty (replacing a cached one): kept whatever its size;
  // then evicts clean rows while over capacity. Returns its handle.
  uint32_t InsertDirty(uint32_t table, uint64_t row, CachedRow value);

  // Dirty-row handles, for a pass over many rows that looks each up once:
  // PinDirty marks the row dirty like MarkDirty and returns its handle
  // (kNoHandle if not cached). A handle stays valid while its row is dirty:
  // until CleanAll, Clear, EraseTable of its table or Erase of the row.
  static constexpr uint32_t kNoHandle = UINT32_MAX;
  uint32_t PinDirty(uint32_t table, uint64_t row);
  CachedRow* DirtyRow(uint32_t handle) { return &nodes_[handle].value; }
  // Recharge of a dirty row whose strings were changed through DirtyRow.
  void RechargeDirty(uint32_t handle);
  // Start loading what PinDirty(table, row) / DirtyRow(handle) touch, a few
  // rows ahead of using them (a pass over rows in random order is otherwise
  // one cache miss after another).
  void PrefetchKey(uint32_t table, uint64_t row) const { slots_.Prefetch(HashOf(table, row)); }
  // The handle of a cached row (kNoHandle if not cached) without touching
  // its node: for PrefetchDirty a few rows before PinDirty, once the slot
  // (PrefetchKey) has loaded. Valid until the cache next changes.
  uint32_t HandleOf(uint32_t table, uint64_t row) const { return FindNode(table, row); }
  void PrefetchDirty(uint32_t handle) const {
    __builtin_prefetch(&nodes_[handle]);
    __builtin_prefetch(reinterpret_cast<const char*>(&nodes_[handle]) + 64);
  }
  // The stored sum's first bytes. REQUIRES: the node is in cache (PrefetchDirty
  // earlier), else this is the miss it should hide.
  void PrefetchDirtySum(uint32_t handle) const {
    const char* p = nodes_[handle].value.sum.data();
    for (int line = 0; line < 4; ++line) __builtin_prefetch(p + 64 * line);
  }
  // Calls fn(table, row, value) for every dirty row (in no particular order).
  template <typename Fn>
  void ForEachDirty(Fn&& fn) const {
    for (uint32_t n = dirty_head_; n != kNil; n = nodes_[n].next) {
      fn(nodes_[n].table, nodes_[n].row, nodes_[n].value);
    }
  }
  // Makes every dirty row clean (most recently used) and drops the
  // delta-only ones (RocksDB now holds their deltas), then evicts to capacity.
  void CleanAll();
  size_t dirty_bytes() const { return dirty_bytes_; }
  size_t dirty_entries() const { return dirty_entries_; }
  // Drops one row / every row of `table` / everything.
  void Erase(uint32_t table, uint64_t row);
  void EraseTable(uint32_t table);
  void Clear();

  size_t capacity() const { return capacity_; }
  size_t bytes() const { return bytes_; }
  size_t entries() const { return slots_.size(); }
  const RowCacheCounters& counters() const { return counters_; }

 private:
  static constexpr uint32_t kNil = UINT32_MAX;
  struct Node {
    uint32_t table = 0;
    uint32_t prev = kNil;  // towards the most recently used
    uint32_t next = kNil;  // towards the least recently used
    uint64_t row = 0;
    size_t charge = 0;
    bool dirty = false;  // in the dirty list (dirty_head_), not the LRU list
    CachedRow value;
  };
  // A slot of the (table, row) -> node table; node == kNil: empty.
  struct Slot {
    uint64_t row = 0;
    uint32_t table = 0;
    uint32_t node = kNil;
  };
  struct SlotPolicy {
    static bool IsEmpty(const Slot& s) { return s.node == kNil; }
    static size_t Hash(const Slot& s) { return HashOf(s.table, s.row); }
  };

  static size_t ChargeOf(const CachedRow& v);
  static size_t HashOf(uint32_t table, uint64_t row);
  // The node of (table, row), or kNil.
  uint32_t FindNode(uint32_t table, uint64_t row) const;
  void Unlink(uint32_t n);
  void PushFront(uint32_t n);
  void EraseNode(uint32_t n);
  // Adds a clean node at the LRU front (no eviction) and returns it.
  // REQUIRES: not cached.
  uint32_t AddNode(uint32_t table, uint64_t row, CachedRow value, size_t charge);
  // Moves node n to the dirty list (no-op if dirty).
  void MakeDirty(uint32_t n);
  void EvictToCapacity();

  // Nodes by index, in blocks of kBlock that never move. (In one vector,
  // its growth copied every node and held both copies meanwhile: the shard
  // of 8a holds ~620k rows, ~70 MB of nodes, and doubled them in clock 1.)
  class NodeBlocks {
   public:
    Node& operator[](uint32_t n) { return blocks_[n >> kShift][n & (kBlock - 1)]; }
    const Node& operator[](uint32_t n) const { return blocks_[n >> kShift][n & (kBlock - 1)]; }
    size_t size() const { return size_; }
    void emplace_back() {
      if ((size_ >> kShift) == blocks_.size()) blocks_.emplace_back(new Node[kBlock]);
      ++size_;
    }
    void clear() {
      blocks_.clear();
      size_ = 0;
    }

   private:
    static constexpr uint32_t kShift = 12;
    static constexpr uint32_t kBlock = uint32_t{1} << kShift;
    std::vector<std::unique_ptr<Node[]>> blocks_;
    size_t size_ = 0;
  };

  const size_t capacity_;
  size_t bytes_ = 0;
  NodeBlocks nodes_;
  std::vector<uint32_t> free_nodes_;
  uint32_t head_ = kNil;        // most recently used
  uint32_t tail_ = kNil;        // least recently used
  uint32_t dirty_head_ = kNil;  // dirty rows (prev/next link them)
  size_t dirty_bytes_ = 0;
  size_t dirty_entries_ = 0;
  FlatTable<Slot, SlotPolicy> slots_;  // one slot per cached row
  RowCacheCounters counters_;
};

}  // namespace pace

#endif  // PACE_STORAGE_ROW_CACHE_H_
