// The process cache and the oplog, kept together: one CacheEntry per row holds
// the cached value (if any) AND this process's own not-yet-acknowledged deltas
// of that row, so Inc needs a single hash lookup.
//
// A row's deltas are "open" (their clock's batch is not sent yet: workers may
// still add to them) or "sealed" (sent, waiting for the shard's Ack). A clock
// may be sent in parts (docs/wire-protocol.md, "Apply parts"): a sealed delta
// carries its (clock, part), and a row may have sealed deltas of several parts
// of one clock plus an open delta of the same clock.
// Invariant (docs/design.md, "Read-my-writes"): when has_value,
//   value == (server value at version `version`, containing this process's
//             batches of clocks < `applied` and parts < `applied_parts` of
//             clock `applied`)
//            + sum of the SEALED pending deltas with (clock, part) >=
//              (applied, applied_parts),
// and a reader sees value + the OPEN pending deltas (all of which come after
// every sealed one). So an Inc adds to one buffer only (its open delta), a Get
// of a row without open deltas is a plain copy, and sealing a clock or a part
// (sending its batch) folds each sealed delta into the value once. A fresh
// server value (v', a', p') becomes value = server + sealed deltas of
// (clock, part) >= (a', p'): never a part twice, never one missing.
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
// by CacheStripe::mu (the stripe's members are annotated GUARDED_BY and its
// methods REQUIRES(mu); hold it with SpinLock / SpinUniqueLock so clang's
// analysis sees it).
#ifndef PACE_CLIENT_ROW_CACHE_H_
#define PACE_CLIENT_ROW_CACHE_H_

#include <algorithm>
#include <atomic>
#include <condition_variable>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <deque>
#include <memory>
#include <mutex>
#include <new>
#include <string>
#include <string_view>
#include <unordered_map>
#include <utility>
#include <vector>

#include "client/spin_mutex.h"
#include "client/table_state.h"
#include "common/byte_arena.h"
#include "common/clock.h"
#include "common/element.h"
#include "common/flat_table.h"
#include "common/row.h"
#include "common/sanitizers.h"
#include "common/thread_annotations.h"
#include "consistency/batch_rule.h"

#if defined(PACE_ASAN)
#include <sanitizer/asan_interface.h>
#define PACE_ASAN_POISON(p, n) ASAN_POISON_MEMORY_REGION((p), (n))
#define PACE_ASAN_UNPOISON(p, n) ASAN_UNPOISON_MEMORY_REGION((p), (n))
#else
#define PACE_ASAN_POISON(p, n) ((void)(p), (void)(n))
#define PACE_ASAN_UNPOISON(p, n) ((void)(p), (void)(n))
#endif

namespace pace::client {

// A row's delta, encoded as a row delta of the table's format: open (workers
// add to `delta`, the row's own buffer) or sealed (sent: its bytes are in
// the batch's arena, SentBatch::deltas, which outlives the delta: the purge
// of the batch's Ack removes it first).
struct PendingDelta {
  ClockT clock = 0;
  std::string delta;              // open: the delta; sealed: empty
  std::string_view sealed_bytes;  // when sealed: the delta
  uint32_t part = 0;              // when sealed: the part of `clock` it was sent in
  bool sealed = false;            // its batch has been sent (it is part of `value`)

  std::string_view bytes() const { return sealed ? sealed_bytes : std::string_view(delta); }
};

// Pending deltas a row with some left keeps room for once its acknowledged
// ones are purged: a sealed delta whose Ack is on its way and one more (the
// next clock's, or an open delta of a worker a clock ahead). PurgeAcked
// releases the rest (what an outage's backlog of unacknowledged clocks made
// the row's storage grow to), also when nothing is left (then all but the
// entry's inline room when delta buffers are not recycled).
inline constexpr size_t kKeptPendingCapacity = 2;

// A row's pending deltas other than its open slot: almost always none or one
// (the sealed delta whose Ack is on its way), so room for the first lies in
// the entry itself (`room`, given at construction and outliving the list) and
// a row's first seal allocates nothing: a vector's storage was a malloc per
// new row and a dependent cache miss in every seal and purge. Contiguous, in
// the row's order, like the vector it replaces; more than one spills to the
// heap. Not copyable: entries never move.
class PendingList {
 public:
  explicit PendingList(void* room) : data_(static_cast<PendingDelta*>(room)), room_(data_) {}
  ~PendingList() {
    clear();
    if (!inline_storage()) ::operator delete(data_);
  }
  PendingList(const PendingList&) = delete;
  PendingList& operator=(const PendingList&) = delete;

  bool empty() const { return size_ == 0; }
  size_t size() const { return size_; }
  // Room without another allocation: at least the inline one.
  size_t capacity() const { return capacity_; }
  // The storage is the entry's own (nothing on the heap).
  bool inline_storage() const { return data_ == room_; }

  PendingDelta* data() { return data_; }
  const PendingDelta* data() const { return data_; }
  PendingDelta* begin() { return data_; }
  PendingDelta* end() { return data_ + size_; }
  const PendingDelta* begin() const { return data_; }
  const PendingDelta* end() const { return data_ + size_; }
  PendingDelta& operator[](size_t i) { return data_[i]; }
  const PendingDelta& operator[](size_t i) const { return data_[i]; }
  PendingDelta& back() { return data_[size_ - 1]; }

  PendingDelta& push_back(PendingDelta&& p) {
    if (size_ == capacity_) Relocate(capacity_ * 2);
    PendingDelta* at = new (data_ + size_) PendingDelta(std::move(p));
    ++size_;
    return *at;
  }
  // Removes [first, last), moving the rest down (an empty range moves
  // nothing: a self-move would empty a delta's string).
  void erase(PendingDelta* first, PendingDelta* last) {
    if (first == last) return;
    PendingDelta* out = first;
    for (PendingDelta* in = last; in != end(); ++in, ++out) *out = std::move(*in);
    for (PendingDelta* p = out; p != end(); ++p) p->~PendingDelta();
    size_ = static_cast<uint32_t>(out - data_);
  }
  void erase(PendingDelta* at) { erase(at, at + 1); }
  void clear() { erase(begin(), end()); }
  // Storage for exactly max(n, size(), 1) deltas: the heap's is given back
  // when they fit inline.
  void ShrinkTo(size_t n) {
    const size_t want = std::max<size_t>({n, size_, 1});
    if (want < capacity_) Relocate(want);
  }

 private:
  void Relocate(size_t cap) {
    PendingDelta* to =
        cap == 1 ? room_ : static_cast<PendingDelta*>(::operator new(cap * sizeof(PendingDelta)));
    for (uint32_t i = 0; i < size_; ++i) {
      new (to + i) PendingDelta(std::move(data_[i]));
      data_[i].~PendingDelta();
    }
    if (!inline_storage()) ::operator delete(data_);
    data_ = to;
    capacity_ = static_cast<uint32_t>(cap);
  }

  PendingDelta* data_;
  uint32_t size_ = 0;
  uint32_t capacity_ = 1;
  PendingDelta* room_;
};

// The min_versions of a row's Reads in flight: almost always none or one, so
// the first is held inline (a row's first Read allocates nothing).
class ReadsInFlight {
 public:
  bool empty() const { return n_ == 0; }
  size_t size() const { return n_; }
  Version operator[](size_t i) const { return i == 0 ? first_ : (*more_)[i - 1]; }
  void push_back(Version v) {
    if (n_ == 0) {
      first_ = v;
    } else {
      if (more_ == nullptr) more_ = std::make_unique<std::vector<Version>>();
      more_->push_back(v);
    }
    ++n_;
  }
  void erase_at(size_t i) {
    if (i == 0) {
      if (n_ > 1) {
        first_ = more_->front();
        more_->erase(more_->begin());
      }
    } else {
      more_->erase(more_->begin() + static_cast<long>(i - 1));
    }
    --n_;
  }

 private:
  Version first_ = 0;
  uint32_t n_ = 0;
  std::unique_ptr<std::vector<Version>> more_;  // the others (rare): 8 bytes of the entry
};

// (clock, part) a before (clock, part) b: the batch rule's order.
using ::pace::PartBefore;

// The most shards a client reaches (CacheEntry::shard).
inline constexpr size_t kMaxShards = UINT16_MAX + size_t{1};

// Fields are ordered so that the passes over many rows (a read, an Inc, a
// look-ahead, a seal) find what they use in the entry's first kHotEntryBytes
// (three cache lines: PrefetchEntryLines), then the value or the delta.
struct CacheEntry {
  bool has_value = false;
  // A delta of this row has been sealed (sent): the shard may have a record
  // of it (TableState::rows_local ends when such an entry is erased).
  bool sent = false;
  // The shard pushes this row to us (ESSP/async): its effective version is
  // max(version, the shard's last PushDone version).
  bool subscribed = false;
  bool referenced = false;  // CLOCK bit
  // Look-ahead (Worker::Prefetch): the row was prefetched and not read since.
  // The CLOCK hand passes it this many more times before evicting it (a
  // referenced row: once), so eviction prefers rows outside the readers'
  // look-ahead windows; a read clears it. Bounded, so rows prefetched and
  // never read do not stay forever.
  uint8_t look_ahead = 0;
  // `open` holds an open delta. Open deltas exist iff has_open; the others
  // (sealed ones, and open ones of other clocks when workers are at several
  // clocks) are in `pending`.
  bool has_open = false;
  uint16_t waiters = 0;  // readers blocked on this row
  uint16_t shard = 0;    // < kMaxShards (client/open.cc)
  // The worker whose lease (Worker::LeaseRows) holds the row, 0 if none:
  // its value does not change, its delta is not sealed, other workers do not
  // read or update it. (CacheStripe::leases says whether any row of the
  // stripe is leased.)
  uint16_t lease_owner = 0;
  uint32_t applied_parts = 0;  // the parts of clock `applied` in `value`
  Version version = 0;         // server version of `value`
  ClockT applied = 0;          // this process's applied clock with that value
  TableState* table = nullptr;
  PendingList pending{pending_room};
  std::string value;
  PendingDelta open;
  int32_t ring_index = -1;  // position in CacheStripe::ring, -1 if no value
  // min_version of each Read of this row sent and not yet answered (few).
  ReadsInFlight reads_in_flight;
  RowKey key;
  // PendingList's room for one delta, last: the passes over many rows look
  // at pending.size() alone; a seal, a purge and an install use the room.
  alignas(PendingDelta) unsigned char pending_room[sizeof(PendingDelta)];

  // The open (not yet sealed) delta of clock c, or nullptr.
  PendingDelta* FindPending(ClockT c) {
    if (has_open && open.clock == c) return &open;
    for (size_t i = pending.size(); i-- > 0;) {
      if (pending[i].clock == c && !pending[i].sealed) return &pending[i];
    }
    return nullptr;
  }
  // The sealed delta of part `part` of clock c, or nullptr.
  PendingDelta* FindSealed(ClockT c, uint32_t part) {
    for (size_t i = pending.size(); i-- > 0;) {
      if (pending[i].clock == c && pending[i].sealed && pending[i].part == part) {
        return &pending[i];
      }
    }
    return nullptr;
  }
  bool HasOpenDeltas() const { return has_open; }
  // Open deltas other than `open` (rare: workers at different clocks).
  bool HasMoreOpenDeltas() const {
    for (const PendingDelta& p : pending) {
      if (!p.sealed) return true;
    }
    return false;
  }
  bool HoldsDeltas() const { return has_open || !pending.empty(); }
  bool pinned() const { return waiters != 0 || !reads_in_flight.empty() || lease_owner != 0; }
  // True if a Read in flight will be answered as soon as the shard clock
  // reaches `need`. (One with a larger min_version may be parked waiting for
  // this very process to advance: never rely on it.)
  bool ReadInFlightAtMost(Version need) const {
    for (size_t i = 0; i < reads_in_flight.size(); ++i) {
      if (reads_in_flight[i] <= need) return true;
    }
    return false;
  }
  void ReadAnswered(Version min_version) {
    for (size_t i = 0; i < reads_in_flight.size(); ++i) {
      if (reads_in_flight[i] == min_version) {
        reads_in_flight.erase_at(i);
        return;
      }
    }
  }
};

// The element add of common/element.h (integers wrap, floats in order).
using ::pace::AddInPlace;

// What a reader sees of a dense row (value + open deltas), as T[width].
// REQUIRES: e.has_value.
template <typename T>
inline void ReadDense(const CacheEntry& e, size_t width, T* out) {
  const T* v = reinterpret_cast<const T*>(e.value.data());
  if (!e.has_open) {
    std::memcpy(out, v, width * sizeof(T));
    return;
  }
  AddInto(out, v, reinterpret_cast<const T*>(e.open.delta.data()), width);
  if (!e.HasMoreOpenDeltas()) return;
  for (const PendingDelta& p : e.pending) {
    if (!p.sealed) AddInPlace(out, reinterpret_cast<const T*>(p.delta.data()), width);
  }
}

// What a reader sees of any row, encoded: e.value itself when there is no
// open delta, else value + open deltas built in *scratch. REQUIRES: has_value.
std::string_view ReaderView(const CacheEntry& e, const RowFormat& f, std::string* scratch);

// The CLOCK hand's passes a prefetched, not yet read row gets (look_ahead).
inline constexpr uint8_t kLookAheadChances = 3;

// Marks a row as read (CLOCK reference; no longer only looked ahead).
// Written only when it changes: threads reading the same rows then share the
// entry's cache line instead of bouncing it between cores.
inline void MarkRead(CacheEntry* e) {
  if (!e->referenced) e->referenced = true;
  if (e->look_ahead != 0) e->look_ahead = 0;
}

// The bytes of an entry the passes over many rows read: every field up to
// the open delta's buffer (the rest is for rarer paths: a read in flight,
// eviction, erasure). Entries lie 16-byte aligned (EntryTable's blocks come
// from new[], and an entry's size is a multiple of 16), so these bytes span
// three cache lines wherever an entry starts. (offsetof of a type that is not
// standard-layout: GCC and Clang compute it, and warn.)
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Winvalid-offsetof"
inline constexpr size_t kHotEntryBytes =
    offsetof(CacheEntry, open) + offsetof(PendingDelta, delta) + sizeof(std::string);
static_assert(offsetof(CacheEntry, value) + sizeof(std::string) <= kHotEntryBytes &&
                  offsetof(CacheEntry, pending) < kHotEntryBytes &&
                  offsetof(CacheEntry, table) < kHotEntryBytes &&
                  offsetof(PendingDelta, clock) < offsetof(PendingDelta, delta),
              "the fields the passes over many rows read lie in the entry's hot bytes");
static_assert(kHotEntryBytes <= 3 * 64 - 48 && sizeof(CacheEntry) % 16 == 0,
              "three cache lines at any 16-byte alignment");
#pragma GCC diagnostic pop
// Starts loading an entry's hot cache lines (kHotEntryBytes).
inline void PrefetchEntryLines(const CacheEntry* e) {
  const char* p = reinterpret_cast<const char*>(e);
  for (size_t at = 0; at < kHotEntryBytes; at += 64) __builtin_prefetch(p + at);
  __builtin_prefetch(p + kHotEntryBytes - 1);
}

// The seal's look-ahead over a slice of rows (scattered in memory) at row
// i: starts loading the entry 8 rows ahead, and the value, the open delta
// and the pending room of the entry 4 rows ahead (loaded by then), so that
// the cache misses of consecutive rows overlap. Always inlined: GCC 12 takes
// a function that only prefetches for a pure one and drops its calls (their
// result is unused) unless it was inlined first.
[[gnu::always_inline]] inline void PrefetchForSeal(const std::vector<CacheEntry*>& rows, size_t i) {
  if (i + 8 < rows.size()) __builtin_prefetch(rows[i + 8]);
  if (i + 4 < rows.size()) {
    const CacheEntry* ahead = rows[i + 4];
    __builtin_prefetch(ahead->value.data());
    __builtin_prefetch(ahead->open.delta.data());
    __builtin_prefetch(ahead->pending_room);  // where the seal puts it
  }
}

// Unsubscribes of evicted rows of one (shard, table), not sent yet.
struct PendingUnsubscribe {
  uint32_t shard = 0;
  uint32_t table = 0;
  std::vector<uint64_t> rows;
};

// Approximate bytes an entry costs beyond its value: the entry, its hash
// slots (at most half full), the ring slot, malloc headers.
inline constexpr size_t kEntryOverheadBytes = sizeof(CacheEntry) + 2 * 24 + 8 + 16;

// RowKey -> CacheEntry*: a FlatTable (common/flat_table.h) whose slots hold
// the key inline, so a lookup touches one slot and then the entry (a
// node-based std::unordered_map touches two to four lines more). Entries are
// heap-allocated and owned here; their addresses are stable until Erase.
// `hash` is RowKeyHash of the key. Thread-compatible.
class EntryTable {
 public:
  EntryTable() : slots_(16) {}
  ~EntryTable() {
    slots_.ForEach([](Slot& s) { s.entry->~CacheEntry(); });
  }
  EntryTable(const EntryTable&) = delete;
  EntryTable& operator=(const EntryTable&) = delete;

  // Find without loading the value: for passes that do not read it.
  CacheEntry* Lookup(const RowKey& key, size_t hash) const {
    const Slot* s = slots_.Find(Home(hash), Match{key});
    return s == nullptr ? nullptr : s->entry;
  }
  CacheEntry* Find(const RowKey& key, size_t hash) const {
    const Slot* s = slots_.Find(Home(hash), Match{key});
    if (s == nullptr) return nullptr;
    // Start loading the value while the caller loads the entry: the two
    // cache misses of a hit then overlap instead of following each other.
    // (The second line's address is computed as an integer: the hint of a
    // row without a value is null, and null + 64 is undefined behaviour.)
    __builtin_prefetch(s->value_hint);
    __builtin_prefetch(
        reinterpret_cast<const void*>(reinterpret_cast<uintptr_t>(s->value_hint) + 64));
    return s->entry;
  }
  // Starts loading the key's hash slot (Find of it some work later hits).
  void Prefetch(const RowKey& key, size_t hash) const {
    (void)key;
    slots_.Prefetch(Home(hash));
  }
  // Records where the entry's value bytes are, for Find's prefetch (only a
  // hint: a stale one costs a useless prefetch, never a wrong result).
  void SetValueHint(const RowKey& key, size_t hash, const char* data) {
    Slot* s = slots_.Find(Home(hash), Match{key});
    if (s != nullptr) s->value_hint = data;
  }
  // REQUIRES: no entry for the key.
  CacheEntry* Insert(const RowKey& key, size_t hash) {
    CacheEntry* e = NewEntry();
    e->key = key;
    slots_.Insert(Home(hash), Slot{key.row, key.table, e, nullptr});
    return e;
  }
  // Deletes the entry.
  void Erase(const RowKey& key, size_t hash) {
    Slot removed;
    if (slots_.Erase(Home(hash), Match{key}, &removed)) FreeEntry(removed.entry);
  }
  size_t size() const { return slots_.size(); }
  template <typename F>
  void ForEach(F&& f) {
    slots_.ForEach([&f](Slot& s) { f(s.entry); });
  }

 private:
  // Entries live in blocks of kBlockEntries, and an erased entry's place is
  // the next new entry's: a row's first touch allocated its entry alone, one
  // of ~4 allocations per new row that made a job's first clock slow
  // (docs/data-path.md, benchmark 5). A stripe keeps the blocks of its
  // largest number of entries (each was counted in the cache's bytes while
  // it held a row). Under AddressSanitizer a free place is poisoned, so a
  // use of an erased entry is still reported.
  static constexpr size_t kBlockEntries = 64;
  union FreeSlot {
    FreeSlot* next;
    alignas(CacheEntry) unsigned char bytes[sizeof(CacheEntry)];
  };
  CacheEntry* NewEntry() {
    FreeSlot* f = free_;
    if (f != nullptr) {
      free_ = f->next;
    } else {
      if (block_used_ == kBlockEntries || blocks_.empty()) {
        blocks_.emplace_back(new FreeSlot[kBlockEntries]);
        block_used_ = 0;
      }
      f = &blocks_.back()[block_used_++];
    }
    PACE_ASAN_UNPOISON(f->bytes, sizeof(f->bytes));
    return new (f->bytes) CacheEntry;
  }
  void FreeEntry(CacheEntry* e) {
    e->~CacheEntry();
    FreeSlot* f = reinterpret_cast<FreeSlot*>(e);
    f->next = free_;
    free_ = f;
    PACE_ASAN_POISON(f->bytes + sizeof(FreeSlot*), sizeof(f->bytes) - sizeof(FreeSlot*));
  }
  std::vector<std::unique_ptr<FreeSlot[]>> blocks_;
  size_t block_used_ = 0;
  FreeSlot* free_ = nullptr;

  struct Slot {
    uint64_t row = 0;
    uint32_t table = 0;
    CacheEntry* entry = nullptr;
    const char* value_hint = nullptr;  // see SetValueHint
  };
  // The stripe is chosen by the hash's low bits: probe with higher ones.
  static size_t Home(size_t hash) { return hash >> 17; }
  struct Policy {
    static bool IsEmpty(const Slot& s) { return s.entry == nullptr; }
    static size_t Hash(const Slot& s) { return Home(RowKeyHash()(RowKey{s.table, s.row})); }
  };
  struct Match {
    RowKey key;
    bool operator()(const Slot& s) const { return s.row == key.row && s.table == key.table; }
  };

  FlatTable<Slot, Policy> slots_;
};

struct alignas(64) CacheStripe {
  // Finds the entry for `key` or nullptr.
  CacheEntry* Find(const RowKey& key) REQUIRES(mu) { return map.Find(key, RowKeyHash()(key)); }
  CacheEntry* Find(const RowKey& key, size_t hash) REQUIRES(mu) { return map.Find(key, hash); }
  CacheEntry* FindOrCreate(const RowKey& key, uint32_t shard, TableState* table) REQUIRES(mu);

  // Adds a validated delta to the row's open delta of clock `c`, registering
  // the entry in the clock's dirty list on its first delta of that clock.
  void AddDelta(CacheEntry* e, ClockT c, std::string_view delta) REQUIRES(mu);
  // Opens a zero delta of `size` bytes for clock `c` (the row has none of
  // that clock): AddDelta of zeros, without writing them when a kept buffer
  // of that size is taken (kept buffers are zero).
  void OpenZeroDelta(CacheEntry* e, ClockT c, size_t size) REQUIRES(mu);
  // One cell of a dense row: element `col` += `value` (converted).
  void AddDenseCell(CacheEntry* e, ClockT c, uint32_t col, double value) REQUIRES(mu);
  // The first delta of clock `c` of a row (AddDelta, OpenZeroDelta):
  // fill(buffer) sets its `size` bytes.
  template <typename Fill>
  void OpenDelta(CacheEntry* e, ClockT c, size_t size, Fill&& fill) REQUIRES(mu);
  // Marks the row's open delta of clock `c` sent as part `part` of the clock:
  // copies it into `arena` (the batch's) and folds it into the value; its
  // buffer is kept for the stripe's next open delta (GiveSpareDelta; freed
  // under a memory budget). Returns the sealed delta (nullptr if none).
  const PendingDelta* Seal(CacheEntry* e, ClockT c, uint32_t part, ByteArena* arena) REQUIRES(mu);

  // Installs a server value (validated) per the invariant above: it holds
  // this process's clocks < a and parts < parts of clock a. A leased row's
  // value is computed now and installed at the release (DeferredInstall).
  void InstallValue(CacheEntry* e, std::string server_value, Version v, ClockT a,
                    uint32_t parts = 0) REQUIRES(mu);
  // Forgets the value (keeps the oplog). Does not touch `subscribed`. A
  // leased row keeps it.
  void DropValue(CacheEntry* e) REQUIRES(mu);

  // Leases (Worker::LeaseRows). Whether `e` is leased by a worker other
  // than `me` (0: no worker).
  bool LeasedByOther(const CacheEntry* e, uint16_t me) const REQUIRES(mu) {
    return leases != 0 && e->lease_owner != 0 && e->lease_owner != me;
  }
  void Lease(CacheEntry* e, uint16_t owner) REQUIRES(mu) {
    if (e->lease_owner == 0) {
      ++leases;
      AddLeasedBytes(e->table->format.dense_bytes(), 0);  // its open delta's
    }
    e->lease_owner = owner;
  }
  // Ends the lease: installs the value that arrived meanwhile, if any, and
  // wakes the readers waiting for the row.
  void Release(CacheEntry* e) REQUIRES(mu);
  // Erases the entry if it holds nothing: no value, no pending, not pinned.
  void MaybeErase(CacheEntry* e) REQUIRES(mu);
  // Removes sealed deltas of (clock, part) <= (c, part) (acknowledged by the
  // shard; a whole clock is its part 0 — later parts of c, if any, are acked
  // with their own part). Returns their bytes. The storage of `pending` is
  // released beyond kKeptPendingCapacity deltas (all but the inline room
  // without recycle_delta_buffers, once none is left) once no more than
  // that is left.
  size_t PurgeAcked(const RowKey& key, ClockT c, uint32_t part = UINT32_MAX) REQUIRES(mu) {
    return PurgeAcked(key, RowKeyHash()(key), c, part);
  }
  size_t PurgeAcked(const RowKey& key, size_t hash, ClockT c, uint32_t part) REQUIRES(mu);
  // A two-stage prefetch for a pass over keys in random memory order:
  // PrefetchSlot(key) some keys ahead, then (its slot is in the CPU cache by
  // then) Find or Lookup it and PrefetchEntryLines a few keys ahead of where
  // the entry is used. Keep what the look-up returned, or write the
  // prefetch out in the loop: a function whose only effect is a prefetch
  // (a member that looked the entry up and prefetched it, or a lambda doing
  // so) is found free of effects by GCC, and its calls are dropped.
  void PrefetchSlot(const RowKey& key, size_t hash) REQUIRES(mu) { map.Prefetch(key, hash); }
  // Find without loading the value.
  CacheEntry* Lookup(const RowKey& key, size_t hash) REQUIRES(mu) { return map.Lookup(key, hash); }

  // Moves up to `max` of the entries with an open delta of clock `c` into
  // *out (cleared first; the last registered first) and takes their bytes
  // off the clock's count: a batch takes a stripe's rows a slice per hold of
  // the lock, and those left stay counted for the next slice or part.
  void TakeDirty(ClockT c, size_t max, std::vector<CacheEntry*>* out) REQUIRES(mu);
  // Bytes of the open deltas of clock `c` in this stripe.
  size_t OpenBytesOf(ClockT c) const REQUIRES(mu) {
    for (const DirtyClock& d : dirty) {
      if (d.clock == c) return d.bytes;
    }
    return 0;
  }
  // Rows with an open delta of clock c.
  size_t OpenRowsOf(ClockT c) const REQUIRES(mu) {
    for (const DirtyClock& d : dirty) {
      if (d.clock == c) return d.entries.size();
    }
    return 0;
  }

  // Evicts values (CLOCK order) until bytes <= budget or nothing is
  // evictable. Calls on_evict(entry) before each value is dropped.
  template <typename OnEvict>
  void EvictOverBudget(OnEvict&& on_evict) REQUIRES(mu) {
    auto evict = [&](CacheEntry* e) REQUIRES(mu) {
      on_evict(e);
      DropValue(e);  // swaps e's ring slot with the last one
      MaybeErase(e);
    };
    // First the rows a worker said it streams (Worker::EvictFirst), oldest
    // first, unless read or prefetched since (then they are in use again).
    // The CLOCK hand alone would also take hot rows whose chances it had
    // cleared on its last pass: out of core, pace_mf's 20k item rows were
    // fetched ~5 times a clock while the user rows streamed through.
    while (bytes > budget && !evict_first.empty()) {
      const auto [key, hash] = evict_first.front();
      evict_first.pop_front();
      CacheEntry* e = map.Lookup(key, hash);
      if (e != nullptr && e->has_value && !HasChances(*e)) evict(e);
    }
    size_t spins = 0;
    // Each pass over an unpinned entry takes one of its chances (referenced,
    // then look_ahead), so (2 + kLookAheadChances) revolutions without an
    // eviction mean only pinned entries are left.
    while (bytes > budget && !ring.empty() && spins < (2 + kLookAheadChances) * ring.size() + 2) {
      if (hand >= ring.size()) hand = 0;
      CacheEntry* e = ring[hand];
      if (HasChances(*e)) {
        if (e->referenced) {
          e->referenced = false;
        } else if (e->look_ahead != 0 && !e->pinned()) {
          --e->look_ahead;
        }
        ++hand;
        ++spins;
        continue;
      }
      spins = 0;
      evict(e);  // ring[hand] is now another entry: re-examine `hand`
    }
  }

  // Queues the row (key, hash) for EvictOverBudget before the CLOCK hand
  // (Worker::EvictFirst); drops the oldest queued keys (left to the hand)
  // beyond ring.size() + kEvictFirstSlack, when a stream outruns evictions.
  void QueueEvictFirst(const RowKey& key, size_t hash) REQUIRES(mu) {
    evict_first.emplace_back(key, hash);
    while (evict_first.size() > ring.size() + kEvictFirstSlack) evict_first.pop_front();
  }

  size_t Charge(const CacheEntry& e) const { return e.value.capacity() + kEntryOverheadBytes; }
  // Whether eviction passes `e` over: pinned, or a CLOCK chance left
  // (referenced, look-ahead).
  static bool HasChances(const CacheEntry& e) {
    return e.pinned() || e.referenced || e.look_ahead != 0;
  }

  SpinMutex mu;
  std::condition_variable_any cv;  // a value arrived or shard state changed
  EntryTable map GUARDED_BY(mu);
  std::vector<CacheEntry*> ring GUARDED_BY(mu);  // entries with a value
  size_t hand GUARDED_BY(mu) = 0;
  // Keys (and hashes) of rows a worker streams, in the order it said so
  // (QueueEvictFirst); EvictOverBudget takes them before the CLOCK hand runs.
  std::deque<std::pair<RowKey, size_t>> evict_first GUARDED_BY(mu);
  static constexpr size_t kEvictFirstSlack = 1024;
  size_t bytes GUARDED_BY(mu) = 0;   // sum of Charge() over `ring`
  size_t budget GUARDED_BY(mu) = 0;  // cache budget / number of stripes
  // PurgeAcked leaves a cached row room for its next sealed delta (no
  // allocation per row per clock). Off under a memory budget, with
  // spare_budget 0: kept storage is memory no bound counts.
  bool recycle_delta_buffers GUARDED_BY(mu) = true;
  // The buffers Seal kept, for the next rows' open deltas (any row of the
  // stripe): at most spare_budget bytes of them (0: none kept). A row kept
  // its own buffer before, so every row a job ever updated held one for the
  // rest of the job (~220 MB of 8a's peak, whose user rows are updated in
  // one clock or two, docs/data-path.md); the open deltas in flight at once
  // are bounded (two parts), and so are the buffers kept here.
  std::vector<std::string> spare_deltas GUARDED_BY(mu);
  size_t spare_bytes GUARDED_BY(mu) = 0;
  size_t spare_budget GUARDED_BY(mu) = 0;
  // Sets *buf to `delta`, in a kept buffer when it has none large enough.
  void AssignInSpareDelta(std::string* buf, std::string_view delta) REQUIRES(mu) {
    TakeSpareDelta(buf, delta.size());
    buf->assign(delta.data(), delta.size());
  }
  // Sets *buf to `size` zero bytes, in a kept buffer when it has none large
  // enough. A kept buffer is zero over its size already: one of that size
  // is taken without a write. (A new delta's lines are written first by
  // its worker's update then, where they are requested ahead, instead of
  // by a store to each uncached line here, which kept the lease pass
  // waiting for the store queue.)
  void AssignZeroInSpareDelta(std::string* buf, size_t size) REQUIRES(mu) {
    if (TakeSpareDelta(buf, size) && buf->size() == size) return;
    buf->assign(size, '\0');
  }
  // Swaps a kept buffer into *buf if *buf has no room for `size` bytes;
  // true if it did.
  bool TakeSpareDelta(std::string* buf, size_t size) REQUIRES(mu) {
    if (buf->capacity() >= size || spare_deltas.empty()) return false;
    buf->swap(spare_deltas.back());
    spare_deltas.pop_back();
    spare_bytes -= buf->capacity();
    return true;
  }
  // Keeps *buf's storage for another row's open delta, zeroed over its size
  // (its lines are in the cache: the seal has just read them), or frees it;
  // *buf is left empty without storage of its own.
  void GiveSpareDelta(std::string* buf) REQUIRES(mu) {
    if (buf->capacity() > std::string().capacity() &&
        spare_bytes + buf->capacity() <= spare_budget) {
      std::memset(buf->data(), 0, buf->size());
      spare_bytes += buf->capacity();
      spare_deltas.emplace_back().swap(*buf);
    } else {
      std::string().swap(*buf);
    }
  }
  // Bytes of the open (not yet sent) deltas of this stripe's rows. (Sealed
  // ones are counted client-wide, per batch: Client::Impl::unacked_bytes_.)
  size_t open_bytes GUARDED_BY(mu) = 0;
  // The client's total of every stripe's open_bytes, changed with them (under
  // this stripe's lock; nullptr: none). The open-delta bound's checks read
  // it instead of taking every stripe's lock when it is clearly under the
  // bound: each such pass moved the 64 stripes' lock lines between the cores
  // of workers updating the same rows.
  std::atomic<uint64_t>* open_bytes_total = nullptr;
  void AddOpenBytes(size_t added, size_t removed) REQUIRES(mu) {
    open_bytes = open_bytes + added - removed;
    if (batching_totals) {
      batched_open += static_cast<int64_t>(added) - static_cast<int64_t>(removed);
    } else {
      AddToTotal(open_bytes_total, added, removed);
    }
  }
  // Moves a client-wide total (nullptr: none) with a stripe's count.
  static void AddToTotal(std::atomic<uint64_t>* total, size_t added, size_t removed) {
    if (total == nullptr || added == removed) return;
    if (added > removed) {
      total->fetch_add(added - removed, std::memory_order_relaxed);
    } else {
      total->fetch_sub(removed - added, std::memory_order_relaxed);
    }
  }
  // Between these two (one hold of the lock: TotalsBatch), the changes of
  // open_bytes_total and leased_bytes_total are summed and moved once at the
  // end. An atomic add per row waited each time for the row's stores before
  // it: the zeroed open delta a lease writes, ~a quarter of the lease
  // pass's samples at model scale. The totals are read without the lock as
  // a hint (an exact check takes the stripes' locks), so they may lag while
  // the lock is held.
  void BeginTotalsBatch() REQUIRES(mu) { batching_totals = true; }
  void EndTotalsBatch() REQUIRES(mu) {
    batching_totals = false;
    AddSigned(open_bytes_total, batched_open);
    AddSigned(leased_bytes_total, batched_leased);
    batched_open = 0;
    batched_leased = 0;
  }
  int waiters GUARDED_BY(mu) = 0;  // readers blocked in this stripe
  // Unsubscribes of rows evicted here, not sent yet (few (shard, table)s).
  // They leave together (Client::Impl::FlushUnsubscribesLocked): before any
  // Read of a row of this stripe is sent (so a re-subscribing Read never
  // overtakes the Unsubscribe of the same row), when they are many, and at
  // the end of the inbound message or clock whose installs evicted them; one
  // message per row was one channel wake-up per evicted row.
  std::vector<PendingUnsubscribe> unsubscribe GUARDED_BY(mu);
  size_t unsubscribe_rows GUARDED_BY(mu) = 0;
  // Open clocks -> entries with an open delta of that clock and their bytes
  // (few clocks). A part or the clock's batch takes them (TakeDirty).
  struct DirtyClock {
    ClockT clock = 0;
    std::vector<CacheEntry*> entries;
    size_t bytes = 0;
  };
  std::vector<DirtyClock> dirty GUARDED_BY(mu);
  // Puts entries TakeDirty took back into clock c's dirty list (a part
  // leaves the leased ones for a later part).
  void ReturnDirty(ClockT c, const std::vector<CacheEntry*>& entries) REQUIRES(mu);

  // Rows of this stripe leased (CacheEntry::lease_owner != 0), and the
  // bytes of their open deltas (dense rows: of their open delta each).
  uint32_t leases GUARDED_BY(mu) = 0;
  size_t leased_bytes GUARDED_BY(mu) = 0;
  // The client's total of every stripe's leased_bytes, changed with them as
  // open_bytes_total is (nullptr: none): the seal trigger's check subtracts
  // it from open_bytes_total before it looks at every stripe.
  std::atomic<uint64_t>* leased_bytes_total = nullptr;
  void AddLeasedBytes(size_t added, size_t removed) REQUIRES(mu) {
    leased_bytes = leased_bytes + added - removed;
    if (batching_totals) {
      batched_leased += static_cast<int64_t>(added) - static_cast<int64_t>(removed);
    } else {
      AddToTotal(leased_bytes_total, added, removed);
    }
  }
  bool batching_totals GUARDED_BY(mu) = false;
  int64_t batched_open GUARDED_BY(mu) = 0;
  int64_t batched_leased GUARDED_BY(mu) = 0;
  static void AddSigned(std::atomic<uint64_t>* total, int64_t change) {
    if (change >= 0) {
      AddToTotal(total, static_cast<size_t>(change), 0);
    } else {
      AddToTotal(total, 0, static_cast<size_t>(-change));
    }
  }
  // Values that arrived for leased rows, by entry, installed at the release:
  // already rebased on the row's sealed deltas (a leased row seals none, so
  // they stay right), the highest version of a row only. (A map: a worker
  // may lease a stripe's share of its whole partition, and a clock's pushes
  // reach most of those rows.)
  struct DeferredInstall {
    std::string value;
    Version version = 0;
    ClockT applied = 0;
    uint32_t parts = 0;
  };
  std::unordered_map<CacheEntry*, DeferredInstall> deferred GUARDED_BY(mu);

 private:
  // InstallValue's second half: `value` already holds the sealed deltas.
  void CommitValue(CacheEntry* e, std::string value, Version v, ClockT a, uint32_t parts)
      REQUIRES(mu);
};

// CacheStripe::BeginTotalsBatch for one scope; the stripe's lock is held
// throughout (the analysis cannot follow a lock into a destructor).
class TotalsBatch {
 public:
  explicit TotalsBatch(CacheStripe* st) NO_THREAD_SAFETY_ANALYSIS : st_(st) {
    st_->BeginTotalsBatch();
  }
  ~TotalsBatch() NO_THREAD_SAFETY_ANALYSIS { st_->EndTotalsBatch(); }
  TotalsBatch(const TotalsBatch&) = delete;
  TotalsBatch& operator=(const TotalsBatch&) = delete;

 private:
  CacheStripe* st_;
};

}  // namespace pace::client

#endif  // PACE_CLIENT_ROW_CACHE_H_
