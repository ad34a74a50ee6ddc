// Row encodings shared by every layer: the bytes of a row value or of an
// additive delta, as stored by storage/ and carried by net/.
//
// Dense row: `width` elements, little-endian, packed; exactly
//   width * ElementSize(type) bytes.
// Sparse row: u32 LE count n, then n u32 LE columns in strictly increasing
//   order, then n elements LE; exactly 4 + n * (4 + ElementSize(type)) bytes.
//   Columns must be < width unless width is 0. A sparse value never stores an
//   entry equal to zero after an addition (explicit zeros in a delta are
//   allowed and are no-ops).
// A delta has the same encoding as a value of the same kind. Adding is
// element-wise; integers wrap (two's complement) instead of overflowing.
//
// The format is documented in docs/storage-format.md. All functions are
// thread-compatible and validate their input: a truncated or mis-typed buffer
// yields a Status, never a crash.
#ifndef PACE_COMMON_ROW_H_
#define PACE_COMMON_ROW_H_

#include <cstdint>
#include <cstring>
#include <map>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "common/element.h"
#include "common/schema.h"
#include "common/status.h"

#if !defined(__BYTE_ORDER__) || __BYTE_ORDER__ != __ORDER_LITTLE_ENDIAN__
#error "PaceDB row encodings assume a little-endian host"
#endif

namespace pace {

// What a row's bytes look like: the part of a TableSchema the codec needs.
struct RowFormat {
  RowKind kind = RowKind::kDense;
  ElementType type = ElementType::kF32;
  uint32_t width = 1;

  static RowFormat Of(const TableSchema& s) { return RowFormat{s.kind, s.type, s.width}; }
  size_t element_size() const { return ElementSize(type); }
  // Dense only: the exact encoded size.
  size_t dense_bytes() const { return static_cast<size_t>(width) * element_size(); }
};

// Returns OK if `bytes` is a well-formed value or delta of format `f`.
Status ValidateRow(const RowFormat& f, std::string_view bytes);

// value += delta. REQUIRES nothing: both are validated; on error `*value` is
// unchanged. An empty `*value` is treated as the zero row.
Status AddRow(const RowFormat& f, std::string* value, std::string_view delta);

// Like AddRow without validation. REQUIRES: both are valid for `f` (or `*value`
// empty). For hot paths whose inputs were validated on entry.
void AddRowUnchecked(const RowFormat& f, std::string* value, std::string_view delta);

// Element-wise dst[i] += src[i] for `n` elements of type `t` (the add of
// common/element.h); neither pointer needs alignment.
void AddDenseElements(ElementType t, void* dst, const void* src, size_t n);

// One cell of a dense row: element `col` += `value` converted to the element
// type (static_cast, then the add of common/element.h). REQUIRES: col < width.
void AddDenseCell(ElementType t, void* data, uint32_t col, double value);

// For a valid sparse row of format `f`: true if it has an explicit zero entry
// (allowed in deltas, never stored).
bool SparseHasZero(const RowFormat& f, std::string_view row);
// *out = `row` without its zero entries. REQUIRES: a valid sparse row.
void StripSparseZeros(const RowFormat& f, std::string_view row, std::string* out);

// The initializer's value for one cell: a pure function of
// (table id, row, column, seed). Zeros for the zeros initializer.
double InitialValue(const TableSchema& s, uint64_t row, uint32_t col);

// Writes the initial value of `row` into *out: dense rows get `width`
// initialized elements; sparse rows start empty (count 0).
void InitRow(const TableSchema& s, uint64_t row, std::string* out);

// The ways InitRow computes a uniform initializer, all to the same bits:
// the widest the CPU has (what InitRow uses), one element at a time, or a
// given vector width. For tests, which check each path on any machine.
enum class InitPath { kWidest, kScalar, kAvx2, kAvx512 };
// True if the CPU can run `path` (kWidest and kScalar always).
bool HaveInitPath(InitPath path);
// InitRow through `path`. REQUIRES: HaveInitPath(path).
void InitRowVia(InitPath path, const TableSchema& s, uint64_t row, std::string* out);

// An empty (all-zero) row of format `f`: zeros for dense, count 0 for sparse.
std::string ZeroRow(const RowFormat& f);

// Reads element `i` of a dense row as a double. REQUIRES: i < width.
double DenseElementAsDouble(ElementType t, const char* data, size_t i);

// Number of entries of a valid sparse row.
uint32_t SparseCount(std::string_view bytes);

// Typed helpers for sparse rows. T must match the row's element type.
template <typename T>
std::string EncodeSparse(const std::vector<std::pair<uint32_t, T>>& sorted_entries) {
  std::string out;
  uint32_t n = static_cast<uint32_t>(sorted_entries.size());
  out.resize(4 + n * (4 + sizeof(T)));
  std::memcpy(&out[0], &n, 4);
  char* cols = &out[4];
  char* vals = cols + 4 * static_cast<size_t>(n);
  for (uint32_t i = 0; i < n; ++i) {
    std::memcpy(cols + 4 * i, &sorted_entries[i].first, 4);
    std::memcpy(vals + sizeof(T) * i, &sorted_entries[i].second, sizeof(T));
  }
  return out;
}

template <typename T>
std::string EncodeSparse(const std::map<uint32_t, T>& entries) {
  std::vector<std::pair<uint32_t, T>> v(entries.begin(), entries.end());
  return EncodeSparse(v);
}

// REQUIRES: `bytes` is a valid sparse row whose element type has sizeof(T).
template <typename T>
std::vector<std::pair<uint32_t, T>> DecodeSparse(std::string_view bytes) {
  uint32_t n = SparseCount(bytes);
  std::vector<std::pair<uint32_t, T>> out(n);
  const char* cols = bytes.data() + 4;
  const char* vals = cols + 4 * static_cast<size_t>(n);
  for (uint32_t i = 0; i < n; ++i) {
    std::memcpy(&out[i].first, cols + 4 * i, 4);
    std::memcpy(&out[i].second, vals + sizeof(T) * i, sizeof(T));
  }
  return out;
}

// Dense typed view helpers.
template <typename T>
std::string EncodeDense(const std::vector<T>& v) {
  return std::string(reinterpret_cast<const char*>(v.data()), v.size() * sizeof(T));
}

template <typename T>
std::vector<T> DecodeDense(std::string_view bytes) {
  std::vector<T> out(bytes.size() / sizeof(T));
  if (!out.empty()) std::memcpy(out.data(), bytes.data(), out.size() * sizeof(T));
  return out;
}

}  // namespace pace

#endif  // PACE_COMMON_ROW_H_
