// ShardStore: one shard's persistent state in RocksDB — the table catalog,
// parameter rows (updated through merge operators), and the per-client applied
// clocks — with atomic, durable batch application and checkpoints.
//
// On-disk layout: docs/storage-format.md (key and value encodings, format
// version, identity record, checkpoint manifest).
//
// Thread-safety: a ShardStore is safe for concurrent use from multiple threads.
// Writes (ApplyBatches, CreateTable, DropTable) are serialized; reads never
// wait for a write to reach disk: they see the last write that completed (a
// "view"), see docs/storage-format.md section 14.
// Threads: no method that touches RocksDB may run on a transport (network
// I/O) thread (common/thread_role.h); with PACE_ASSERT_STORE_THREADS (on by
// default) such a call aborts, naming the method.
// Ownership: the caller owns the ShardStore; destroying it flushes the
// memtables (so the next open replays no WAL) and closes RocksDB.
#ifndef PACE_STORAGE_SHARD_STORE_H_
#define PACE_STORAGE_SHARD_STORE_H_

#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "common/clock.h"
#include "common/mutex.h"
#include "common/schema.h"
#include "common/status.h"
#include "consistency/batch_rule.h"

namespace pace {

// Bumped when the on-disk format changes incompatibly. A store written with a
// different major format is refused with StatusCode::kIncompatible.
inline constexpr uint32_t kStorageFormatVersion = 4;
// The oldest format this build opens (and upgrades at a writable open).
inline constexpr uint32_t kOldestStorageFormatVersion = 1;

struct ShardStoreOptions {
  // Size of the RocksDB block cache, in MiB. Bounds read memory. Default: 256.
  size_t block_cache_mb = 256;
  // Size of one memtable, in MiB. Default: 64.
  size_t write_buffer_mb = 64;
  // Number of memtables kept before writes stall. Default: 3.
  int max_write_buffer_number = 3;
  // After a group commit, the active memtable is switched (flushed in the
  // background) once it holds more than this many groups of that group's
  // size (and at least 1 MiB), so small groups written every clock do not
  // pile up one version per clock of each row until write_buffer_mb fills
  // (each skip-list insert walks past a row's older versions). 0: memtables
  // are switched by size only, so the WAL holds everything since the last
  // flush. Default: 4.
  size_t memtable_switch_groups = 4;
  // Budget of the in-memory row cache, in MiB: the materialized values of
  // recently read rows, kept exactly equal to the stored ones by ApplyBatch
  // (write-through), so reads of hot rows skip RocksDB's merge-on-read.
  // ApplyBatch writes a cached dense row changed once by a batch as a Put of
  // its new value instead of one more merge operand. 0 disables it.
  // Default: 256.
  size_t row_cache_mb = 256;
  // The largest WriteBatch buffer, in MiB, kept between group commits for
  // the next group (reused so a model-scale clock does not map and fault in
  // a fresh ~130 MB buffer each time); a larger one is freed after its write.
  // Never more than the memtable budget (write_buffer_mb x
  // max_write_buffer_number), so a store sized from a memory budget keeps
  // little. Counted in StoreMemoryStats::write_batch_bytes. 0: never kept.
  // Default: 256.
  size_t retained_write_batch_mb = 256;
  // Write path (docs/storage-format.md section 15). true: each group is one
  // record of the clock log plus its applied clocks in RocksDB; the rows it
  // changes are held in memory (dirty rows of the row cache) and written to
  // RocksDB in bulk (one SST file, ingested) when the dirty rows exceed the
  // row cache budget or the log exceeds clock_log_mb, and at close, checkpoint
  // and DropTable. false: every group writes each row it changes to RocksDB
  // (a Put or merge operand per row). A record is staged through two buffers
  // of row_cache_mb / 16 each (256 KiB to 8 MiB). Default: true.
  bool clock_log = true;
  // false: FOR MEASURING THE COST OF DURABILITY ONLY. Groups are not logged
  // (no clock log record, RocksDB's WAL off), so a crash loses every update
  // since the last row write-back. The store is marked while open and a store
  // not closed cleanly is refused at its next open (Corruption), so such a
  // loss is never trained on. Default: true.
  bool durable = true;
  // Log bytes after which the dirty rows are written back. 0: eight times
  // the dirty rows' bytes, at least 64 MiB and at most four times
  // row_cache_mb. Default: 0.
  size_t clock_log_mb = 0;
  // Also write back after this many group commits (bounds a restart's
  // replay by count; the crash tests use it to kill inside write-backs).
  // 0: by the budgets only. Default: 0.
  uint32_t writeback_every_groups = 0;
  // Clock log only. true: a delta to a row the row cache does not hold is
  // kept without reading the row, as a delta-only row (the sum of its deltas
  // not yet in RocksDB), written back as one merge operand; reading such a
  // row reads RocksDB and adds the pending sum. A float row's sum is then
  // added in per-write-back parts, S + (d1 + d2), which may differ in the last
  // bits from the in-order ((S + d1) + d2) and depends on what was cached.
  // false: every row is read before a delta is added to it (float sums in
  // order whatever the cache holds). Default: true.
  bool delta_only_rows = true;
  // fsync the WAL before ApplyBatch returns. Default: false (WAL written, not synced).
  bool sync = false;
  // Open for inspection only; may run beside a writer process (RocksDB
  // secondary/read-only). Writes return FailedPrecondition. Default: false.
  bool read_only = false;
  // Create the store if `dir` has none. Ignored when read_only. Default: true.
  bool create_if_missing = true;
  // The job identity recorded when the store is created. On open, a mismatch
  // with the recorded identity is an InvalidArgument error naming both values,
  // unless check_identity is false (tools that only inspect). Defaults: 0/1/1.
  uint32_t shard_id = 0;
  uint32_t num_shards = 1;
  uint32_t num_clients = 1;
  bool check_identity = true;
  // The job the store belongs to (docs/wire-protocol.md, "Jobs"), recorded
  // at creation: this name, or when empty an automatic id of this shard
  // (common/token_file.h, kAutoJobPrefix + 16 random hex digits). On open, a nonempty id that
  // differs from the recorded one is an InvalidArgument error (unless check_identity is false);
  // empty takes the recorded one. A store of an older build without a job id gets one recorded at
  // its first writable open. At most 128 bytes. Default: "".
  std::string job{};
};

// The identity recorded in a store.
struct ShardIdentity {
  uint32_t format_version = kStorageFormatVersion;
  uint32_t shard_id = 0;
  uint32_t num_shards = 1;
  uint32_t num_clients = 1;
  std::string job{};  // "" only for a read-only open of a store without one
};

// A delta for one row. `bytes` uses the encoding of common/row.h.
struct RowDelta {
  uint32_t table = 0;
  uint64_t row = 0;
  std::string_view bytes;
};

// One client batch for ApplyBatches. `deltas` (and the bytes they point to)
// must stay valid for the call.
struct BatchRequest {
  ClientId client = 0;
  ClockT clock = 0;
  const std::vector<RowDelta>* deltas = nullptr;
  // A partial Apply (docs/wire-protocol.md, "Apply parts"): this batch is
  // part `part` (0, 1, ...) of the client's clock `clock`; `more`: more
  // parts of that clock follow, so the clock is not complete after it. The
  // default (part 0, no more) is the whole clock in one batch. See
  // ApplyBatch for duplicates and gaps.
  uint32_t part = 0;
  bool more = false;
  // The client process that sent the batch (net::Hello::incarnation; 0:
  // unknown). Recorded with the parts of an incomplete clock (their undo
  // records), so that another process of the client can have them taken back
  // (ShardStore::UndoIncompleteClock).
  uint64_t incarnation = 0;
  // Non-null: an import (ImportBatch), not a client's batch: `client` and
  // `clock` are ignored, no applied clock changes, and this text is stored
  // as the store's last-import record in the same WriteBatch.
  const std::string* import_record = nullptr;
};

// What ApplyBatches did with one batch.
struct BatchResult {
  // OK: written (or a duplicate). Otherwise why this batch was refused;
  // nothing of it was written.
  Status status;
  // Skipped: kDuplicate, or kCompletesClock (skipped, but it moved the
  // client's applied clock on).
  bool duplicate = false;
  // How the batch rule (consistency/batch_rule.h) classified it; meaningful
  // when status is OK.
  BatchAdmission admission = BatchAdmission::kApply;
};

// What ShardStore::UndoIncompleteClock did.
struct UndoResult {
  bool undone = false;  // the parts were taken back (false: nothing to undo)
  ClockT clock = 0;     // the clock they belonged to
  uint32_t parts = 0;   // how many
  // The rows the undo changed, in (table, row) order, each once.
  std::vector<std::pair<uint32_t, uint64_t>> rows;
};

// Counters of the row cache (ShardStoreOptions::row_cache_mb).
struct RowCacheStats {
  uint64_t capacity_bytes = 0;  // 0: disabled
  uint64_t bytes = 0;           // charged bytes now cached
  uint64_t entries = 0;         // rows now cached
  uint64_t hits = 0;            // rows read from the cache
  uint64_t misses = 0;          // rows read from RocksDB
  uint64_t evictions = 0;
};

// The write path's per-stage counters (ShardStore::data_path_stats), totals
// since the store was opened, for /metrics and the shard's --v=1 trace
// (docs/data-path.md).
struct DataPathStats {
  bool clock_log = false;            // the store writes groups to the clock log
  uint64_t log_records = 0;          // groups appended to the clock log
  uint64_t log_bytes = 0;            // bytes appended to it (headers included)
  uint64_t log_offset = 0;           // bytes of the active log file not yet written back
  uint64_t dirty_rows = 0;           // rows newer in memory than in RocksDB, now
  uint64_t dirty_bytes = 0;          // their charged bytes, now
  uint64_t writebacks = 0;           // row write-backs
  uint64_t writeback_rows = 0;       // rows they wrote
  uint64_t writeback_bytes = 0;      // bytes of the SST files they ingested
  uint64_t rows_read_for_write = 0;  // rows read from RocksDB to hold them in memory
  uint64_t delta_only_rows = 0;      // rows a group changed without reading them (delta-only)
  uint64_t writeback_operands = 0;   // rows written back as merge operands (delta-only)
  uint64_t replayed_records = 0;     // log records replayed at open or recovery
  uint64_t rocksdb_write_bytes = 0;  // bytes of the WriteBatches written through RocksDB's WAL
};

// Memory a store holds now, per component, in bytes (ShardStore::memory_stats).
// Cheap: RocksDB properties and counters, no scan.
struct StoreMemoryStats {
  // RocksDB memtables, active and immutable (unflushed and pinned), i.e.
  // "rocksdb.size-all-mem-tables". Bounded by about write_buffer_mb x
  // max_write_buffer_number, except that one WriteBatch larger than a
  // memtable goes whole into the active one (a model-scale clock).
  uint64_t memtable_bytes = 0;
  // The RocksDB block cache's usage (data, index and filter blocks) and its
  // capacity (block_cache_mb; 0: disabled).
  uint64_t block_cache_bytes = 0;
  uint64_t block_cache_capacity = 0;
  // Index/filter memory of open SST readers not charged to the block cache
  // ("rocksdb.estimate-table-readers-mem").
  uint64_t table_reader_bytes = 0;
  // The row cache's charged bytes and its capacity (row_cache_mb).
  uint64_t row_cache_bytes = 0;
  uint64_t row_cache_capacity = 0;
  // The write path's buffer: the WriteBatch being built or kept for the
  // next group (its capacity; kept only up to retained_write_batch_mb).
  uint64_t write_batch_bytes = 0;
  uint64_t total() const {
    return memtable_bytes + block_cache_bytes + table_reader_bytes + row_cache_bytes +
           write_batch_bytes;
  }
};

// What a checkpoint's manifest records (file "PACE-CHECKPOINT" in its dir).
struct CheckpointManifest {
  uint32_t format_version = kStorageFormatVersion;
  ShardIdentity identity;
  std::vector<TableSchema> tables;
  std::vector<ClockT> applied_clocks;  // indexed by client id
  Version shard_clock = 0;
  int64_t created_unix_ms = 0;
};

class ShardStore {
 public:
  // Opens (or creates) the store in `dir`. Errors: Incompatible for another
  // format version; InvalidArgument for an identity mismatch; IOError /
  // Corruption from RocksDB; NotFound if missing and !create_if_missing.
  static Status Open(const ShardStoreOptions& options, const std::string& dir,
                     std::unique_ptr<ShardStore>* store);

  // Opens the store in `dir` read-only to look at it (Open with read_only,
  // no identity check, no row cache, a block cache of block_cache_mb).
  static Status OpenForInspection(const std::string& dir, size_t block_cache_mb,
                                  std::unique_ptr<ShardStore>* store);

  ShardStore(const ShardStore&) = delete;
  ShardStore& operator=(const ShardStore&) = delete;
  ~ShardStore();

  const ShardIdentity& identity() const;
  const std::string& dir() const;

  // --- Catalog -------------------------------------------------------------
  // Creates a table. schema.id == 0: the store assigns the next free id (ids
  // start at 1); nonzero: that id is used. If a table with this name exists
  // with the SameSchema, returns it (idempotent). Errors: InvalidArgument (bad
  // schema), AlreadyExists (name taken by another schema, or id taken).
  Status CreateTable(const TableSchema& schema, TableSchema* created);
  // Drops the table and deletes its rows. NotFound if unknown.
  Status DropTable(const std::string& name);
  std::vector<TableSchema> ListTables() const;
  StatusOr<TableSchema> FindTable(std::string_view name) const;
  StatusOr<TableSchema> FindTable(uint32_t id) const;

  // --- Writes --------------------------------------------------------------
  // Applies client `client`'s batch for clock `clock` as one atomic
  // WriteBatch holding every delta and the new applied clock (clock + 1).
  // If clock < AppliedClock(client), nothing is written and *duplicate = true.
  // Errors (nothing written): InvalidArgument for client >= num_clients, an
  // unknown table, or a delta that fails ValidateRow; FailedPrecondition for a
  // clock gap (clock > AppliedClock(client)).
  // Parts (BatchRequest::part/more, through ApplyBatches): the record is
  // (applied clock a, parts p of clock a applied). A part (c, i) with c < a,
  // or c == a and i < p, is a duplicate (nothing written); c == a and i == p
  // is applied with the record (a, p + 1), or (a + 1, 0) when it is the last
  // (!more); anything later is a gap. A last part with i < p (possible only
  // from another incarnation of the client, which cut the clock differently)
  // completes the clock without writing its deltas (a duplicate, like a
  // re-run clock the shard already has).
  Status ApplyBatch(ClientId client, ClockT clock, const std::vector<RowDelta>& deltas,
                    bool* duplicate);
  // Group commit: validates each batch on its own (exactly as ApplyBatch),
  // then writes every valid one, each with its applied-clock record, as ONE
  // RocksDB WriteBatch (one WAL append, one fsync with options.sync). A refused
  // batch gets its own error in (*results)[i] and does not affect the others;
  // batches of one client must come in clock order (clock c then c + 1 in one
  // group is fine). Returns non-OK only when the write itself failed; then no
  // batch was written and every result carries that error.
  Status ApplyBatches(const std::vector<BatchRequest>& batches, std::vector<BatchResult>* results);

  // Writes `deltas` as one atomic WriteBatch that changes no applied clock,
  // together with `record` (a one-line text) as the store's last-import
  // record (LastImport). For loading data into a store no client is training
  // on (pacectl import); the rows then hold their old value plus the delta.
  // Errors (nothing written): as ApplyBatch for the deltas.
  Status ImportBatch(const std::vector<RowDelta>& deltas, const std::string& record);
  // The record of the last ImportBatch; "" if there was none.
  StatusOr<std::string> LastImport() const;
  // Reads every SST file of the store once and checks its block checksums
  // (RocksDB's DB::VerifyChecksum): Corruption naming the file on the first
  // mismatch. Costs a read of the whole store.
  Status VerifyChecksums() const;
  // As VerifyChecksums for the SST files not verified at an earlier call:
  // SST files never change, so a file listed (name and size) in the data
  // dir's VERIFIED-SSTS needs no second read. Rewrites that list with the
  // live files once all pass. Costs a read of what was written since the last
  // call (flushes, compactions, write-backs). *verified / *skipped: files read
  // and files trusted from the list.
  Status VerifyNewChecksums(size_t* verified, size_t* skipped) const;

  // --- Incomplete clocks ----------------------------------------------------
  // A part of a clock that does not complete it (BatchRequest::more) is
  // applied and also kept as an undo record (a file UNDO-<client>-<part>,
  // pointed to by a key written with the part) until the clock completes
  // (docs/storage-format.md section 4). IncompleteClockOf is in memory; any
  // thread.
  IncompleteClock IncompleteClockOf(ClientId client) const;
  // If NeedsUndo(IncompleteClockOf(client), incarnation): applies the
  // negation of every part of client's incomplete clock, resets its parts to
  // 0 and deletes the undo records, as ONE group commit (atomic: after a
  // crash either all of it or none of it, so an undo happens exactly once).
  // Otherwise does nothing (result->undone false); so too when a record is
  // missing, malformed or of another clock (logged: the parts stay applied
  // and are no longer undoable). Errors: those of a write or read (nothing
  // undone); InvalidArgument for a client out of range.
  Status UndoIncompleteClock(ClientId client, uint64_t incarnation, UndoResult* result);

  // --- Clocks --------------------------------------------------------------
  // 0 for a client id >= num_clients.
  ClockT AppliedClock(ClientId client) const;
  // Parts of clock AppliedClock(client) applied (0 unless a partial Apply of
  // it is in progress).
  uint32_t AppliedParts(ClientId client) const;
  std::vector<ClockT> AppliedClocks() const;  // indexed by client id
  // min over all num_clients clients of AppliedClock.
  Version ShardClock() const;

  // --- Reads ---------------------------------------------------------------
  // The row's value; a row never written yields its initializer's value.
  // NotFound for an unknown table. Values come from the row cache when it has
  // them (bit-identical to RocksDB's, see docs/storage-format.md section 12);
  // a MultiGet is atomic with respect to ApplyBatch (it sees each batch
  // wholly or not at all).
  Status Get(uint32_t table, uint64_t row, std::string* value) const;
  Status MultiGet(uint32_t table, const std::vector<uint64_t>& rows,
                  std::vector<std::string>* values) const;
  // A consistent read view: see View() below.
  class ReadView;
  // The state after the last completed write: values and applied clocks read
  // through the view belong to that one state (a value holds exactly the
  // clocks < AppliedClock(p) of every client p). While a view is alive the
  // next write may go to disk but does not become visible, so keep views
  // short-lived (one request) and never write from a thread that holds one.
  ReadView View() const;
  // Calls fn(row, value) for every written row of `table` with row >=
  // start_row, in increasing row order, until fn returns false. With the row
  // cache on (and not read_only), writes wait while a scan runs, so fn must
  // not write to this store.
  Status Scan(uint32_t table, uint64_t start_row,
              const std::function<bool(uint64_t row, std::string_view value)>& fn) const;

  // --- Checkpoints and maintenance -----------------------------------------
  // Writes a RocksDB checkpoint (hard links where possible) of the whole store
  // plus its manifest into `dir`, which must not exist. The checkpoint is a
  // complete store: Open(options, dir) opens it.
  Status CreateCheckpoint(const std::string& dir) const;
  static Status ReadCheckpointManifest(const std::string& dir, CheckpointManifest* manifest);
  // Copies the checkpoint in `checkpoint_dir` (validated by its manifest) into
  // `data_dir`, which must not exist or be an empty directory, so the
  // checkpoint itself stays untouched when the restored store is written.
  // SST files are hard-linked when possible. Errors: NotFound / Corruption /
  // Incompatible (manifest), AlreadyExists (data_dir not empty), IOError.
  static Status RestoreCheckpoint(const std::string& checkpoint_dir, const std::string& data_dir);
  // Checks the write-ahead logs of the store in `dir` (not open elsewhere for
  // writing) as a writable open would: a torn last record is tolerated (a
  // crash while appending), damage before the end of a log is Corruption
  // naming the way out (docs/operations.md, "A corrupt WAL"). pacectl verify.
  static Status CheckWal(const std::string& dir);
  // Flushes memtables to SST files.
  Status Flush();
  // Approximate bytes on disk and number of rows written, per RocksDB's estimates.
  Status ApproximateSize(uint64_t* disk_bytes, uint64_t* estimated_keys) const;
  // Approximate bytes (files and memtables) of one table's rows. NotFound for
  // an unknown table.
  Status ApproximateTableSize(uint32_t table, uint64_t* bytes) const;
  // An integer RocksDB property of the default column family (e.g.
  // "rocksdb.cur-size-all-mem-tables", "rocksdb.block-cache-usage",
  // "rocksdb.estimate-table-readers-mem"), for memory stats and metrics.
  // False if RocksDB does not know it.
  bool GetIntProperty(const std::string& name, uint64_t* value) const;
  // True if opened with options.read_only.
  bool read_only() const;

  // --- Failures (docs/operations.md, "Disk full, fd exhaustion") ----------
  // A write that RocksDB fails (no space left, no file descriptor, a
  // read-only file system, an I/O error) marks the store failed: the error is
  // logged once, naming its cause, and every later write (ApplyBatches,
  // CreateTable, DropTable) returns it at once without calling RocksDB again
  // (Debian's RocksDB 7.8 aborts when a WAL writer that failed is appended to,
  // and Resume() keeps that writer), until Recover() succeeded. Reads keep
  // being served from the last published state.
  // OK while healthy; else Unavailable "shard K: no space left on device
  // (data dir D) ...".
  Status failure() const;
  bool failed() const;
  // If failed: when the cause looks gone (free space of at least
  // write_buffer_mb + 1 MiB; open-file headroom), reopens RocksDB (which
  // drops the torn record of the failed write, replays and flushes the rest)
  // and clears the failure. OK: healthy. Unavailable: still failed, retry
  // later. Any other code (Corruption, Incompatible, ...): the store cannot
  // be recovered in this process.
  Status Recover();
  // Row cache counters (all zero when the cache is disabled).
  RowCacheStats row_cache_stats() const;
  // The write path's counters (see DataPathStats).
  DataPathStats data_path_stats() const;
  // Writes the rows held in memory (dirty) to RocksDB and starts a new clock
  // log file (docs/storage-format.md section 15). No-op without a clock log.
  Status WriteBack();
  // Bytes of memory the store holds now, per component (see StoreMemoryStats).
  StoreMemoryStats memory_stats() const;

 private:
  class Impl;
  explicit ShardStore(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;
};

// A read view of a ShardStore (ShardStore::View). Holds the store's view lock
// shared for its lifetime. Not copyable or movable; must not outlive the store.
// Thread-compatible: use from the thread that created it.
class ShardStore::ReadView {
 public:
  ~ReadView();
  ReadView(const ReadView&) = delete;
  ReadView& operator=(const ReadView&) = delete;

  // As ShardStore::MultiGet, from this view's state.
  Status MultiGet(uint32_t table, const std::vector<uint64_t>& rows,
                  std::vector<std::string>* values) const;
  // As MultiGet, except for a row that has no record in this view's state
  // (never written: its value is its initializer's): (*absent)[i] = 1 and
  // (*values)[i] is left empty, for the caller to compute the initializer
  // (InitRow, common/row.h). Such a row costs no initializer here and only a
  // small row-cache entry without bytes, which also spares the writer a
  // RocksDB read when the row's first delta comes. Other rows: absent 0.
  Status MultiGetOrAbsent(uint32_t table, const std::vector<uint64_t>& rows,
                          std::vector<std::string>* values, std::vector<uint8_t>* absent) const;
  // Applied clocks of this view's state; 0 for client >= num_clients.
  ClockT AppliedClock(ClientId client) const;
  uint32_t AppliedParts(ClientId client) const;
  Version ShardClock() const;

 private:
  friend class ShardStore;
  explicit ReadView(const Impl* impl);
  const Impl* const impl_;
};

}  // namespace pace

#endif  // PACE_STORAGE_SHARD_STORE_H_
