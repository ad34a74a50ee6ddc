// FlatTable: the one open-addressing hash table of the code base. Slots live
// in one contiguous power-of-two array, probed linearly from `hash & mask`,
// kept at most half full, and erased by backward shift (no tombstones), so a
// hit touches one or two cache lines and nothing is allocated per element.
//
// The caller owns the slot layout, so keys and values pack without padding
// (a (table, row) -> u32 slot is 16 bytes, not 24), and supplies the hash, so
// a caller that already hashed a key (to pick a stripe or a shard) does not
// hash it again. `Policy` provides:
//   static bool IsEmpty(const Slot&);    // a value-initialized Slot is empty
//   static size_t Hash(const Slot&);     // the hash of an occupied slot's key
// Lookups take the key's hash (equal to Policy::Hash of its slot) and a
// predicate `match(const Slot&)` that compares the key.
//
// FlatMap<Key, Value, kEmpty> is the plain map over it for integer keys and
// values, where one value is reserved to mean "empty".
//
// Thread-compatible: the owner serializes access. Slot pointers are valid
// until the next Insert or Erase.
#ifndef PACE_COMMON_FLAT_TABLE_H_
#define PACE_COMMON_FLAT_TABLE_H_

#include <cstddef>
#include <cstdint>
#include <type_traits>
#include <utility>
#include <vector>

#include "common/hash.h"

namespace pace {

template <typename Slot, typename Policy>
class FlatTable {
  static_assert(std::is_trivially_copyable_v<Slot>, "slots are moved by copying");

 public:
  // `initial_capacity` slots (rounded up to a power of two, >= 2); 0: no
  // storage until the first Insert.
  explicit FlatTable(size_t initial_capacity = 0) {
    if (initial_capacity > 0) Rehash(RoundUp(initial_capacity));
  }

  // The occupied slot for which match(slot) holds, or nullptr.
  template <typename Match>
  Slot* Find(size_t hash, Match&& match) {
    return const_cast<Slot*>(std::as_const(*this).Find(hash, std::forward<Match>(match)));
  }
  template <typename Match>
  const Slot* Find(size_t hash, Match&& match) const {
    if (size_ == 0) return nullptr;
    for (size_t i = hash & mask_;; i = (i + 1) & mask_) {
      const Slot& s = slots_[i];
      if (Policy::IsEmpty(s)) return nullptr;
      if (match(s)) return &s;
    }
  }

  // Starts loading the home slot of `hash` into the CPU cache (a Find of it
  // some work later then hits).
  void Prefetch(size_t hash) const {
    if (!slots_.empty()) __builtin_prefetch(&slots_[hash & mask_]);
  }

  // Stores `slot` (occupied, with Policy::Hash(slot) == hash). REQUIRES: its
  // key is not present. Returns where it went.
  Slot* Insert(size_t hash, const Slot& slot) {
    if (2 * (size_ + 1) > slots_.size()) Rehash(slots_.empty() ? 16 : 2 * slots_.size());
    Slot* s = Place(hash, slot);
    ++size_;
    return s;
  }

  // Removes the slot for which match(slot) holds, copying it to *removed if
  // not null. Returns false if there is none.
  template <typename Match>
  bool Erase(size_t hash, Match&& match, Slot* removed = nullptr) {
    if (size_ == 0) return false;
    size_t i = hash & mask_;
    for (;; i = (i + 1) & mask_) {
      if (Policy::IsEmpty(slots_[i])) return false;
      if (match(slots_[i])) break;
    }
    if (removed != nullptr) *removed = slots_[i];
    // Backward shift: a later member j of the probe run moves into the hole i
    // unless its home lies cyclically in (i, j].
    for (size_t j = (i + 1) & mask_; !Policy::IsEmpty(slots_[j]); j = (j + 1) & mask_) {
      const size_t home = Policy::Hash(slots_[j]) & mask_;
      const bool stays = i <= j ? (i < home && home <= j) : (i < home || home <= j);
      if (stays) continue;
      slots_[i] = slots_[j];
      i = j;
    }
    slots_[i] = Slot{};
    --size_;
    return true;
  }

  // f(Slot&) for every occupied slot, in table order. f must not insert or
  // erase.
  template <typename F>
  void ForEach(F&& f) {
    for (Slot& s : slots_) {
      if (!Policy::IsEmpty(s)) f(s);
    }
  }

  // Drops every slot and the storage.
  void Clear() {
    std::vector<Slot>().swap(slots_);
    mask_ = 0;
    size_ = 0;
  }

  size_t size() const { return size_; }
  bool empty() const { return size_ == 0; }
  size_t capacity() const { return slots_.size(); }

 private:
  static size_t RoundUp(size_t n) {
    size_t c = 2;
    while (c < n) c *= 2;
    return c;
  }
  Slot* Place(size_t hash, const Slot& slot) {
    size_t i = hash & mask_;
    while (!Policy::IsEmpty(slots_[i])) i = (i + 1) & mask_;
    slots_[i] = slot;
    return &slots_[i];
  }
  void Rehash(size_t capacity) {
    std::vector<Slot> prev(capacity, Slot{});
    prev.swap(slots_);
    mask_ = capacity - 1;
    for (const Slot& s : prev) {
      if (!Policy::IsEmpty(s)) Place(Policy::Hash(s), s);
    }
  }

  std::vector<Slot> slots_;  // size is 0 or a power of two
  size_t mask_ = 0;
  size_t size_ = 0;
};

// An integer-keyed map with one reserved "empty" value, e.g. row id -> index
// of the row's state in a dense vector: FlatMap<uint64_t, uint32_t, UINT32_MAX>.
template <typename Key, typename Value, Value kEmpty>
class FlatMap {
  static_assert(std::is_integral_v<Key> && std::is_integral_v<Value>);

 public:
  static constexpr Value kNone = kEmpty;

  // The value of `key`, or kNone.
  Value Find(Key key) const {
    const Slot* s = table_.Find(HashOf(key), [key](const Slot& x) { return x.key == key; });
    return s == nullptr ? kNone : s->value;
  }
  // Maps key -> value. REQUIRES: key not present, value != kNone.
  void Insert(Key key, Value value) { table_.Insert(HashOf(key), Slot{key, value}); }
  // Removes `key` if present; returns whether it was.
  bool Erase(Key key) {
    return table_.Erase(HashOf(key), [key](const Slot& x) { return x.key == key; });
  }
  size_t size() const { return table_.size(); }
  void Clear() { table_.Clear(); }

 private:
  struct Slot {
    Key key = 0;
    Value value = kEmpty;
  };
  struct Policy {
    static bool IsEmpty(const Slot& s) { return s.value == kEmpty; }
    static size_t Hash(const Slot& s) { return HashOf(s.key); }
  };
  static size_t HashOf(Key key) { return static_cast<size_t>(Mix64(static_cast<uint64_t>(key))); }

  FlatTable<Slot, Policy> table_;
};

}  // namespace pace

#endif  // PACE_COMMON_FLAT_TABLE_H_
