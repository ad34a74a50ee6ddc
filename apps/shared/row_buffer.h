// A worker's private copies of the model rows it touches during one clock.
//
// Within a clock a worker reads each row it needs once (Worker::Get), updates
// its copy in place for every data point, and at the end of the clock adds
// the difference (current - as read) to the table with one Inc per row. The
// worker sees its own updates at once, as with per-point Get/Inc, while the
// client's per-row cost is paid once per row per clock instead of once per
// data point. Other workers' updates made during the same clock arrive at the
// next clock, which bounded-staleness consistency allows anyway.
//
// Rows are addressed by dense index in [0, num_rows). Row pointers stay valid
// until Clear() (storage grows in blocks, never moves). Thread-compatible: one
// RowBuffer per worker.
//
// Two layouts. Packed (the default): copies are placed one after another in
// the order they are loaded, so a buffer holding a few of many rows is small
// and its rows sit densely in cache; a row is found through its index's slot.
// Indexed (`indexed` = true, for tables whose every row may be copied within
// a clock anyway): row `index`'s copy is at index * width in one array, so a
// loaded row's address is computed without a lookup (IndexedRow), as a plain
// array of the factors would be. Pages of the array that no loaded row
// touches are never written, so it costs memory for the rows loaded only.
#ifndef PACE_APPS_SHARED_ROW_BUFFER_H_
#define PACE_APPS_SHARED_ROW_BUFFER_H_

#include <cstdint>
#include <cstring>
#include <memory>
#include <vector>

namespace pace {
namespace apps {

template <typename T>
class RowBuffer {
 public:
  RowBuffer(size_t num_rows, uint32_t width, bool indexed = false)
      : width_(width), meta_(num_rows) {
    if (indexed) {
      // Not value-initialized: untouched pages stay unmapped.
      indexed_cur_.reset(new T[num_rows * static_cast<size_t>(width)]);
      indexed_orig_.reset(new T[num_rows * static_cast<size_t>(width)]);
    }
  }

  uint32_t width() const { return width_; }
  bool indexed() const { return indexed_cur_ != nullptr; }
  // The copy of row `index` in the indexed layout, without a lookup.
  // REQUIRES: indexed() and Has(index) (else the memory is not the row's).
  T* IndexedRow(uint32_t index) const {
    return indexed_cur_.get() + static_cast<size_t>(index) * width_;
  }
  size_t loaded() const { return rows_.size(); }
  // Rows of the table (row indices are 0 .. num_rows() - 1).
  size_t num_rows() const { return meta_.size(); }

  bool Has(uint32_t index) const { return meta_[index].slot >= 0; }
  // The copy of row `index`, or nullptr if it was not loaded this clock.
  T* Find(uint32_t index) {
    int32_t s = meta_[index].slot;
    if (s < 0) return nullptr;
    return indexed() ? IndexedRow(index) : Cur(static_cast<size_t>(s));
  }

  // For collecting the distinct rows of a range of data points that are not
  // loaded (a pass per range, each with a new nonzero `mark`): marks row
  // `index` and says whether it was unmarked and not loaded. The mark sits
  // beside the row's slot, so the test touches one place. No branch: in such
  // a pass the answer is random.
  bool MarkMissing(uint32_t index, uint32_t mark) {
    Meta& m = meta_[index];
    const bool missing = (m.mark != mark) & (m.slot < 0);
    m.mark = mark;
    return missing;
  }
  // Forgets every mark (before marks are reused: a wrapped counter).
  void ClearMarks() {
    for (Meta& m : meta_) m.mark = 0;
  }

  // Makes room for row `index` and returns the buffer to load it into; the
  // caller fills it (e.g. with Worker::Get) and then calls Loaded().
  // REQUIRES: Find(index) == nullptr.
  T* Slot(uint32_t index) {
    size_t s = rows_.size();
    if (!indexed() && s / kBlockRows == cur_blocks_.size()) {
      cur_blocks_.emplace_back(new T[kBlockRows * static_cast<size_t>(width_)]);
      orig_blocks_.emplace_back(new T[kBlockRows * static_cast<size_t>(width_)]);
    }
    meta_[index].slot = static_cast<int32_t>(s);
    rows_.push_back(index);
    return Cur(s);
  }
  // Records the just-loaded value of the last Slot() as the row's base.
  void Loaded() {
    size_t s = rows_.size() - 1;
    std::memcpy(Orig(s), Cur(s), width_ * sizeof(T));
  }

  // Loads rows indices[i] (distinct, none loaded yet) from `block`, which
  // holds their values one after another (width each, e.g. from
  // Worker::GetRows): as Slot + copy + Loaded for each.
  void LoadBlock(const std::vector<uint32_t>& indices, const T* block) {
    for (size_t i = 0; i < indices.size(); ++i) {
      T* cur = Slot(indices[i]);
      std::memcpy(cur, block + i * width_, width_ * sizeof(T));
      Loaded();
    }
  }

  // Calls fn(index, delta) for every loaded row that changed, with
  // delta = current - base (in a scratch buffer valid during the call).
  // Stops at and returns the first non-OK Status fn returns.
  template <typename Fn>
  auto ForEachDelta(Fn&& fn) -> decltype(fn(uint32_t{}, static_cast<const T*>(nullptr))) {
    using R = decltype(fn(uint32_t{}, static_cast<const T*>(nullptr)));
    delta_.resize(width_);
    for (size_t s = 0; s < rows_.size(); ++s) {
      const T* cur = Cur(s);
      const T* orig = Orig(s);
      bool changed = false;
      for (uint32_t c = 0; c < width_; ++c) {
        delta_[c] = cur[c] - orig[c];
        changed |= delta_[c] != T(0);
      }
      if (!changed) continue;
      R r = fn(rows_[s], delta_.data());
      if (!r.ok()) return r;
    }
    return R();
  }

  // The loaded rows that changed: their indices in *indices and their
  // deltas (current - base), width each, one after another in *deltas.
  void ChangedRows(std::vector<uint32_t>* indices, std::vector<T>* deltas) const {
    indices->clear();
    deltas->clear();
    for (size_t s = 0; s < rows_.size(); ++s) {
      const T* cur = Cur(s);
      const T* orig = Orig(s);
      const size_t at = deltas->size();
      deltas->resize(at + width_);
      bool changed = false;
      for (uint32_t c = 0; c < width_; ++c) {
        (*deltas)[at + c] = cur[c] - orig[c];
        changed |= (*deltas)[at + c] != T(0);
      }
      if (changed) {
        indices->push_back(rows_[s]);
      } else {
        deltas->resize(at);
      }
    }
  }

  // Forgets every loaded row (keeps the memory).
  void Clear() {
    for (uint32_t index : rows_) meta_[index].slot = -1;
    rows_.clear();
  }

 private:
  static constexpr size_t kBlockRows = 256;
  // Rows b*kBlockRows.. : their current values in cur_blocks_[b], their bases
  // in orig_blocks_[b]. Apart, so the hot loop's rows sit densely in cache.
  // The copies of the row in slot s (rows_[s]).
  T* Cur(size_t s) const {
    if (indexed()) return IndexedRow(rows_[s]);
    return cur_blocks_[s / kBlockRows].get() + (s % kBlockRows) * width_;
  }
  T* Orig(size_t s) const {
    if (indexed()) return indexed_orig_.get() + static_cast<size_t>(rows_[s]) * width_;
    return orig_blocks_[s / kBlockRows].get() + (s % kBlockRows) * width_;
  }

  struct Meta {
    int32_t slot = -1;  // in rows_, or -1: not loaded
    uint32_t mark = 0;  // MarkMissing
  };
  const uint32_t width_;
  std::vector<Meta> meta_;  // by row index
  std::vector<uint32_t> rows_;
  std::vector<std::unique_ptr<T[]>> cur_blocks_;
  std::vector<std::unique_ptr<T[]>> orig_blocks_;
  std::unique_ptr<T[]> indexed_cur_;  // the indexed layout: num_rows * width each
  std::unique_ptr<T[]> indexed_orig_;
  std::vector<T> delta_;
};

}  // namespace apps
}  // namespace pace

#endif  // PACE_APPS_SHARED_ROW_BUFFER_H_
