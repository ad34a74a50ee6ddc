// Stored row values and the RocksDB merge operator that adds deltas to them.
//
// Every row value and every merge operand is "tagged": one format byte
// (RowTag: row kind << 4 | element type) followed by a row encoding of
// common/row.h. A stored value holds the SUM OF ALL DELTAS applied to the row,
// never its initializer: Get composes InitRow + stored sum (ComposeRow). See
// docs/storage-format.md for why the tag makes one operator self-describing.
//
// The operator never throws and never trusts its input: an operand or base
// value with a bad tag, mismatched tag or malformed payload makes FullMergeV2
// return false, which RocksDB reports as Corruption. Thread-safe (stateless).
#ifndef PACE_STORAGE_ROW_MERGE_H_
#define PACE_STORAGE_ROW_MERGE_H_

#include <rocksdb/merge_operator.h>

#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "common/row.h"
#include "common/schema.h"
#include "common/status.h"

namespace pace {

// The format byte in front of a stored row value: kind << 4 | type.
uint8_t RowTag(RowKind kind, ElementType type);
inline uint8_t RowTag(const RowFormat& f) { return RowTag(f.kind, f.type); }
// Returns false for a byte that is no valid tag.
bool ParseRowTag(uint8_t tag, RowKind* kind, ElementType* type);

// Checks that `stored` (a tagged value read from RocksDB) belongs to a table of
// format `f` and sets *payload to its untagged row bytes. Corruption if not.
Status ParseStoredRow(const RowFormat& f, std::string_view stored, std::string_view* payload);

// The element add of common/element.h (integers wrap, floats in order), by
// its historical storage name. SparseHasZero and StripSparseZeros are in
// common/row.h.
inline void AddDenseUnaligned(ElementType t, char* dst, const char* src, size_t n) {
  AddDenseElements(t, dst, src, n);
}

// The delta that takes `delta` (a validated payload of format `f`) back:
// every element negated in place (integers wrap: -INT_MIN == INT_MIN; floats
// flip their sign, so (x + d) + (-d) equals x within rounding). Sparse
// columns are kept, so no zero entry appears.
void NegateRow(const RowFormat& f, std::string* delta);

// *out = the initializer's value of `row` plus `payload` (the stored delta sum,
// validated by ParseStoredRow; nullptr when the row was never written).
void ComposeRow(const TableSchema& s, uint64_t row, const std::string_view* payload,
                std::string* out);

// Adds tagged `operands` (in order) to the tagged `base` (nullptr: none) and
// writes the tagged sum to *out. Corruption on any malformed input. This is the
// operator's arithmetic, exposed for tests and tools.
Status MergeRowValues(const std::string_view* base, const std::vector<std::string_view>& operands,
                      std::string* out);

// The merge operator named "pace.RowAdd" (kRowMergeOperatorName).
inline constexpr const char* kRowMergeOperatorName = "pace.RowAdd";
std::shared_ptr<rocksdb::MergeOperator> NewRowAddMergeOperator();

}  // namespace pace

#endif  // PACE_STORAGE_ROW_MERGE_H_
