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
// A block of rows loads in place (LoadRows: the client writes them where
// they stay, no copy of a block).
// Indexed (`indexed` = true, for tables whose every row may be copied within
// a clock anyway): row `index`'s copy is at index * width in one array, so a
// loaded row's address is computed without a lookup (IndexedRow), as a plain
// array of the factors would be. Pages of the array that no loaded row
// touches are never written, so it costs memory for the rows loaded only.
#ifndef PACE_APPS_SHARED_ROW_BUFFER_H_
#define PACE_APPS_SHARED_ROW_BUFFER_H_

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <memory>
#include <vector>

namespace pace {
namespace apps {

template <typename T>
class RowBuffer {
 public:
  // `run_rows`: the most rows one LoadRows call is expected to load (the
  // packed layout's chunks are at least that large, so that runs reuse them
  // after Clear() instead of growing new ones).
  RowBuffer(size_t num_rows, uint32_t width, bool indexed = false, size_t run_rows = 0)
      : width_(width), chunk_rows_(std::max(run_rows, kMinChunkRows)), meta_(num_rows) {
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
  // Requests the cache line Find(index) and Has(index) start from.
  void PrefetchLookup(uint32_t index) const { __builtin_prefetch(&meta_[index]); }
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
    const size_t s = rows_.size();
    if (indexed()) {
      meta_[index].slot = static_cast<int32_t>(s);
      rows_.push_back(index);
      return IndexedRow(index);
    }
    const Place p = Reserve(1);
    AddSlot(index, p);
    return p.cur;
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

  // Loads rows indices[i] (distinct, none loaded yet) with their values
  // written by fill(T* out), which writes them one after another (width
  // each, e.g. Worker::GetRows) and returns a Status. In the packed layout
  // `out` is the rows' place in the buffer (no copy of the block); in the
  // indexed layout a scratch block copied to each row's place. If fill fails
  // no row is loaded and its Status is returned.
  template <typename Fill>
  auto LoadRows(const std::vector<uint32_t>& indices, Fill&& fill) -> decltype(fill(nullptr)) {
    const size_t n = indices.size();
    if (n == 0) return decltype(fill(nullptr))();
    if (indexed()) {
      scratch_.resize(n * width_);
      auto r = fill(scratch_.data());
      if (r.ok()) LoadBlock(indices, scratch_.data());
      return r;
    }
    const size_t chunk_before = chunk_at_, row_before = row_at_;
    const Place p = Reserve(n);
    auto r = fill(p.cur);
    if (!r.ok()) {
      chunk_at_ = chunk_before;
      row_at_ = row_before;
      return r;
    }
    std::memcpy(p.orig, p.cur, n * width_ * sizeof(T));
    for (size_t i = 0; i < n; ++i) {
      AddSlot(indices[i], Place{p.cur + i * width_, p.orig + i * width_});
    }
    return r;
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
    // Room for every loaded row at once: grown a row at a time, the array
    // (a whole table's rows at model scale: 20k x 129 floats) was copied at
    // each doubling and reached up to twice its size.
    indices->reserve(rows_.size());
    deltas->reserve(rows_.size() * width_);
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

  // The packed layout's loaded rows as runs whose copies lie one after
  // another: calls fn(indices, current, base) per run, row indices[k]'s copy
  // at current + k * width and its base at base + k * width (e.g. for
  // Worker::IncDiff: no array of deltas). Every loaded row is in a run,
  // changed or not. Stops at and returns the first non-OK Status fn returns.
  // REQUIRES: !indexed() (there ChangedRows lists the deltas).
  template <typename Fn>
  auto ForEachRun(Fn&& fn) const
      -> decltype(fn(std::vector<uint32_t>(), static_cast<const T*>(nullptr),
                     static_cast<const T*>(nullptr))) {
    using R = decltype(fn(std::vector<uint32_t>(), static_cast<const T*>(nullptr),
                          static_cast<const T*>(nullptr)));
    std::vector<uint32_t> run;
    size_t s = 0;
    while (s < rows_.size()) {
      size_t e = s + 1;
      while (e < rows_.size() && places_[e].cur == places_[e - 1].cur + width_) ++e;
      run.assign(rows_.begin() + static_cast<std::ptrdiff_t>(s),
                 rows_.begin() + static_cast<std::ptrdiff_t>(e));
      R r = fn(run, places_[s].cur, places_[s].orig);
      if (!r.ok()) return r;
      s = e;
    }
    return R();
  }

  // Forgets every loaded row (keeps the memory).
  void Clear() {
    for (uint32_t index : rows_) meta_[index].slot = -1;
    rows_.clear();
    places_.clear();
    chunk_at_ = 0;
    row_at_ = 0;
  }

 private:
  // The packed layout's copies live in chunks of at least chunk_rows_
  // rows, each a current and a base array of the same size, filled in load
  // order (a LoadRows run contiguous in one chunk) and reused after Clear().
  static constexpr size_t kMinChunkRows = 256;
  struct Chunk {
    size_t rows = 0;
    std::unique_ptr<T[]> cur;
    std::unique_ptr<T[]> orig;
  };
  struct Place {
    T* cur;
    T* orig;
  };
  // The place of n consecutive rows, in the current chunk or the first later
  // one with room (a new one if none).
  Place Reserve(size_t n) {
    size_t c = chunk_at_, r = row_at_;
    while (c < chunks_.size() && chunks_[c].rows - r < n) {
      ++c;
      r = 0;
    }
    if (c == chunks_.size()) {
      Chunk k;
      k.rows = std::max(n, chunk_rows_);
      k.cur.reset(new T[k.rows * width_]);
      k.orig.reset(new T[k.rows * width_]);
      chunks_.push_back(std::move(k));
    }
    chunk_at_ = c;
    row_at_ = r + n;
    return Place{chunks_[c].cur.get() + r * width_, chunks_[c].orig.get() + r * width_};
  }
  void AddSlot(uint32_t index, Place p) {
    meta_[index].slot = static_cast<int32_t>(rows_.size());
    rows_.push_back(index);
    places_.push_back(p);
  }
  // The copies of the row in slot s (rows_[s]).
  T* Cur(size_t s) const { return indexed() ? IndexedRow(rows_[s]) : places_[s].cur; }
  T* Orig(size_t s) const {
    if (indexed()) return indexed_orig_.get() + static_cast<size_t>(rows_[s]) * width_;
    return places_[s].orig;
  }

  struct Meta {
    int32_t slot = -1;  // in rows_, or -1: not loaded
    uint32_t mark = 0;  // MarkMissing
  };
  const uint32_t width_;
  const size_t chunk_rows_;
  std::vector<Meta> meta_;  // by row index
  std::vector<uint32_t> rows_;
  std::vector<Place> places_;  // by slot (the packed layout)
  std::vector<Chunk> chunks_;
  size_t chunk_at_ = 0;  // the next free row: chunks_[chunk_at_], row row_at_
  size_t row_at_ = 0;
  std::unique_ptr<T[]> indexed_cur_;  // the indexed layout: num_rows * width each
  std::unique_ptr<T[]> indexed_orig_;
  std::vector<T> scratch_;  // LoadRows in the indexed layout
  std::vector<T> delta_;
};

}  // namespace apps
}  // namespace pace

#endif  // PACE_APPS_SHARED_ROW_BUFFER_H_
