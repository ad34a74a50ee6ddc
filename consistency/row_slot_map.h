// RowSlotMap: an open-addressing hash map from a row id (u64) to a u32 slot
// index, for per-row state kept in dense vectors (SubscriptionRegistry). One
// contiguous array of 16-byte entries, linear probing, load factor <= 1/2,
// backward-shift deletion (no tombstones), so a lookup touches one or two cache
// lines and nothing is allocated per row.
//
// Thread-compatible: the owner serializes access.
#ifndef PACE_CONSISTENCY_ROW_SLOT_MAP_H_
#define PACE_CONSISTENCY_ROW_SLOT_MAP_H_

#include <cstddef>
#include <cstdint>
#include <vector>

namespace pace {

class RowSlotMap {
 public:
  static constexpr uint32_t kNone = UINT32_MAX;

  // The slot of `row`, or kNone.
  uint32_t Find(uint64_t row) const {
    if (size_ == 0) return kNone;
    for (size_t i = Home(row);; i = (i + 1) & mask_) {
      const Entry& e = entries_[i];
      if (e.slot == kNone) return kNone;
      if (e.row == row) return e.slot;
    }
  }
  // Maps row -> slot. REQUIRES: row not present, slot != kNone.
  void Insert(uint64_t row, uint32_t slot) {
    if ((size_ + 1) * 2 > entries_.size()) Grow();
    size_t i = Home(row);
    while (entries_[i].slot != kNone) i = (i + 1) & mask_;
    entries_[i] = Entry{row, slot};
    ++size_;
  }
  // Removes `row` if present.
  void Erase(uint64_t row) {
    if (size_ == 0) return;
    size_t i = Home(row);
    for (;; i = (i + 1) & mask_) {
      if (entries_[i].slot == kNone) return;
      if (entries_[i].row == row) break;
    }
    // Backward shift: move later entries of the probe run into the hole when
    // their home position is not cyclically in (hole, j].
    for (size_t j = (i + 1) & mask_; entries_[j].slot != kNone; j = (j + 1) & mask_) {
      const size_t home = Home(entries_[j].row);
      const bool stays = i <= j ? (i < home && home <= j) : (i < home || home <= j);
      if (stays) continue;
      entries_[i] = entries_[j];
      i = j;
    }
    entries_[i].slot = kNone;
    --size_;
  }
  size_t size() const { return size_; }

 private:
  struct Entry {
    uint64_t row = 0;
    uint32_t slot = kNone;
  };
  size_t Home(uint64_t row) const {
    return static_cast<size_t>((row * 0x9E3779B97F4A7C15ull) >> shift_) & mask_;
  }
  void Grow() {
    std::vector<Entry> old;
    old.swap(entries_);
    const size_t cap = old.empty() ? 16 : old.size() * 2;
    entries_.assign(cap, Entry{});
    mask_ = cap - 1;
    shift_ = 64;
    for (size_t c = cap; c > 1; c >>= 1) --shift_;
    size_ = 0;
    for (const Entry& e : old) {
      if (e.slot != kNone) Insert(e.row, e.slot);
    }
  }

  std::vector<Entry> entries_;
  size_t mask_ = 0;
  int shift_ = 64;
  size_t size_ = 0;
};

}  // namespace pace

#endif  // PACE_CONSISTENCY_ROW_SLOT_MAP_H_
