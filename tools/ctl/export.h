// pacectl's export writers: CSV and NumPy .npy (format v1.0) dumps of one
// table of a ShardStore. Thread-compatible; the store must stay open while a
// writer runs.
//
// CSV: dense tables "row,c0,...,c<W-1>" then one line per written row; sparse
// tables "row,col,value" then one line per stored entry. Rows never written
// are not listed.
//
// NPY (dense tables only): a C-order 2-D array of shape (max_row + 1, width)
// in the table's element type; rows never written hold their initializer's
// value, so the array equals what Get returns for every row.
#ifndef PACE_TOOLS_CTL_EXPORT_H_
#define PACE_TOOLS_CTL_EXPORT_H_

#include <cstdint>
#include <ostream>
#include <string>
#include <string_view>
#include <vector>

#include "common/schema.h"
#include "common/status.h"
#include "storage/shard_store.h"

namespace pace::ctl {

// The NPY dtype string of an element type: "<f4", "<f8", "<i4" or "<i8".
std::string NpyDescr(ElementType t);

// A complete NPY v1.0 header (magic, version, header length, dict, padding,
// '\n') for a C-order array of shape (rows, cols). Its length is a multiple
// of 64.
std::string NpyHeader(ElementType t, uint64_t rows, uint64_t cols);
// The same for a 1-D array of `n` little-endian u64 ("<u8"), e.g. row ids.
std::string NpyHeaderU64(uint64_t n);

struct ExportStats {
  uint64_t written_rows = 0;  // rows of the table that have a stored value
  uint64_t array_rows = 0;    // npy only: the first dimension of the array
  uint64_t lines = 0;         // csv only: data lines written (without header)
};

// Writes `schema`'s rows as CSV to `out`. Errors: the store's scan errors
// (Corruption for bad stored data), IOError if `out` fails.
Status ExportCsv(const ShardStore& store, const TableSchema& schema, std::ostream* out,
                 ExportStats* stats);

// The shape of an npy export, computed by scanning the table once.
struct NpyPlan {
  uint64_t rows = 0;  // max written row + 1; 0 for a table with no written row
  uint64_t written_rows = 0;
};
// Errors: InvalidArgument for a sparse table, or when the array would have
// more than `max_rows` rows (the message names both numbers).
Status PlanNpy(const ShardStore& store, const TableSchema& schema, uint64_t max_rows,
               NpyPlan* plan);
// Writes the header and data planned by PlanNpy to `out`. REQUIRES: `plan`
// came from PlanNpy on the same (read-only, hence unchanging) store.
Status WriteNpy(const ShardStore& store, const TableSchema& schema, const NpyPlan& plan,
                std::ostream* out, ExportStats* stats);

// --- Exports over the shards of a job ----------------------------------------
//
// `shards` are the stores of one job, indexed by shard id; row r of table t
// is read from shards[ShardOf(t, r, shards.size())], so a merged export holds
// each row as its owning shard stores it. A single store (shards.size() == 1)
// owns every row it holds.

struct MergedPlan {
  uint64_t rows = 0;              // npy: the array's first dimension
  std::vector<uint64_t> written;  // the written rows, sorted, each from its owner
  uint64_t foreign_rows = 0;      // rows stored on a shard that does not own them (skipped)
};
// Scans the table on every shard. npy: InvalidArgument for a sparse table;
// rows = `rows_flag` if nonzero (InvalidArgument if a written row is >= it),
// else max written row + 1 (InvalidArgument if that exceeds `max_rows`).
Status PlanMerged(const std::vector<const ShardStore*>& shards, const TableSchema& schema, bool npy,
                  uint64_t rows_flag, uint64_t max_rows, MergedPlan* plan);
// The array of shape (plan.rows, width): written rows from their owner, the
// others their initializer's value.
Status WriteMergedNpy(const std::vector<const ShardStore*>& shards, const TableSchema& schema,
                      const MergedPlan& plan, std::ostream* out, ExportStats* stats);
// The CSV of ExportCsv, rows in increasing order from their owners.
Status WriteMergedCsv(const std::vector<const ShardStore*>& shards, const TableSchema& schema,
                      const MergedPlan& plan, std::ostream* out, ExportStats* stats);
// The CSV header line of `schema` ("row,c0,..." or "row,col,value").
void WriteCsvHeader(const TableSchema& schema, std::ostream* out);
// Appends the CSV lines of one row's value to `line`; returns how many.
uint64_t AppendCsvLines(const TableSchema& schema, uint64_t row, std::string_view value,
                        std::string* line);
// A 1-D "<u8" npy array of `rows`.
Status WriteRowIdsNpy(const std::vector<uint64_t>& rows, std::ostream* out);

}  // namespace pace::ctl

#endif  // PACE_TOOLS_CTL_EXPORT_H_
