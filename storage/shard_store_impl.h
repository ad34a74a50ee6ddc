// Private implementation of ShardStore, shared by shard_store.cc (open,
// catalog, clocks) and shard_store_data.cc (batches, reads, checkpoints).
// Not part of the public API.
#ifndef PACE_STORAGE_SHARD_STORE_IMPL_H_
#define PACE_STORAGE_SHARD_STORE_IMPL_H_

#include <pthread.h>
#include <rocksdb/cache.h>
#include <rocksdb/db.h>
#include <rocksdb/options.h>
#include <rocksdb/sst_file_manager.h>
#include <rocksdb/write_batch.h>

#include <atomic>
#include <cstdint>
#include <deque>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <shared_mutex>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "common/mutex.h"
#include "common/row.h"
#include "common/thread_annotations.h"
#include "storage/clock_log.h"
#include "storage/key_format.h"
#include "storage/row_cache.h"
#include "storage/shard_store.h"

namespace pace {

// Largest num_clients a store accepts (bounds per-client state).
inline constexpr uint32_t kMaxStoreClients = 1u << 16;

// The error of a writable open (or ShardStore::CheckWal) that RocksDB
// refused with Corruption: with WALRecoveryMode::kTolerateCorruptedTailRecords
// that is a WAL damaged before its end (or another corrupt file), and the
// message says so and how to get out (shard_store_recovery.cc).
Status DescribeOpenCorruption(const std::string& dir, const rocksdb::Status& s);

// Aborts (with PACE_ASSERT_STORE_THREADS) when a store method that touches
// RocksDB runs on a transport thread (common/thread_role.h).
void CheckNotTransportThread(const char* method);
#if PACE_ASSERT_STORE_THREADS
#define PACE_CHECK_STORE_THREAD(method) ::pace::CheckNotTransportThread(method)
#else
#define PACE_CHECK_STORE_THREAD(method) ((void)0)
#endif

// The view lock: a reader-writer lock that prefers the writer, so a steady
// stream of reads cannot keep a group commit from becoming visible (glibc's
// default rwlock prefers readers). Not recursive: a thread holding it shared
// must not take it again (a waiting writer would block the second take).
class CAPABILITY("mutex") ViewLock {
 public:
  ViewLock();
  ~ViewLock();
  ViewLock(const ViewLock&) = delete;
  ViewLock& operator=(const ViewLock&) = delete;
  void Lock() ACQUIRE();
  void Unlock() RELEASE();
  void ReaderLock() ACQUIRE_SHARED();
  void ReaderUnlock() RELEASE_SHARED();

 private:
  pthread_rwlock_t rw_;
};

class SCOPED_CAPABILITY ViewWriterLock {
 public:
  explicit ViewWriterLock(ViewLock* mu) ACQUIRE(mu) : mu_(mu) { mu_->Lock(); }
  ~ViewWriterLock() RELEASE() { mu_->Unlock(); }

 private:
  ViewLock* const mu_;
};

class SCOPED_CAPABILITY ViewReaderLock {
 public:
  explicit ViewReaderLock(ViewLock* mu) ACQUIRE_SHARED(mu) : mu_(mu) { mu_->ReaderLock(); }
  ~ViewReaderLock() RELEASE() { mu_->ReaderUnlock(); }

 private:
  ViewLock* const mu_;
};

// Adds one delta to a cached row's stored sum with the merge operator's
// arithmetic (a row without a record takes it as its sum), in place. Returns
// whether the row's strings grew (it must be re-charged). Both write paths'
// publish use it (shard_store_data.cc).
bool AddToCachedRow(const RowFormat& f, CachedRow* c, std::string_view delta);

// A catalog entry: the schema plus what the write path needs per delta.
struct TableEntry {
  TableSchema schema;
  RowFormat format;
  char tag = 0;  // RowTag(format), the first byte of every stored value
  // Set by DropTable while it holds view_mu_ exclusively, so a read that
  // looked the table up earlier sees the drop. Read under view_mu_ (shared).
  mutable std::atomic<bool> dropped{false};
};

class ShardStore::Impl {
 public:
  Impl(const ShardStoreOptions& options, std::string dir, ShardIdentity identity);
  ~Impl();

  // Opens RocksDB, checks/creates the format and identity records, loads the
  // catalog and clocks.
  Status Open();

  Status CreateTable(const TableSchema& schema, TableSchema* created);
  Status DropTable(const std::string& name);
  std::vector<TableSchema> ListTables() const;
  StatusOr<TableSchema> FindTable(std::string_view name) const;
  StatusOr<TableSchema> FindTable(uint32_t id) const;

  Status ApplyBatches(const std::vector<BatchRequest>& batches, std::vector<BatchResult>* results)
      EXCLUDES(write_mu_, view_mu_);
  ClockT AppliedClock(ClientId client) const;
  uint32_t AppliedParts(ClientId client) const;
  std::vector<ClockT> AppliedClocks() const;
  Version ShardClock() const;
  IncompleteClock IncompleteClockOf(ClientId client) const;
  Status UndoIncompleteClock(ClientId client, uint64_t incarnation, UndoResult* result)
      EXCLUDES(write_mu_, view_mu_);

  Status Get(uint32_t table, uint64_t row, std::string* value) const EXCLUDES(view_mu_);
  Status MultiGet(uint32_t table, const std::vector<uint64_t>& rows,
                  std::vector<std::string>* values) const EXCLUDES(view_mu_);
  // MultiGet of rows [0, n) from the current view. `absent` (may be null,
  // else n flags): a row without a record gets absent[i] = 1 and an empty
  // value instead of its initializer's (ReadView::MultiGetOrAbsent).
  // REQUIRES: view_mu_ held (shared or exclusive) by the caller (a ReadView).
  Status ReadRows(uint32_t table, const uint64_t* rows, size_t n, std::string* values,
                  uint8_t* absent = nullptr) const REQUIRES_SHARED(view_mu_);
  // The view lock (ReadView).
  void LockView() const ACQUIRE_SHARED(view_mu_) { view_mu_.ReaderLock(); }
  void UnlockView() const RELEASE_SHARED(view_mu_) { view_mu_.ReaderUnlock(); }
  Status Scan(uint32_t table, uint64_t start_row,
              const std::function<bool(uint64_t, std::string_view)>& fn) const;

  Status CreateCheckpoint(const std::string& dir);
  StatusOr<std::string> LastImport() const;
  Status Flush();
  Status VerifyChecksums() const;
  Status VerifyNewChecksums(size_t* verified, size_t* skipped) const;
  Status ApproximateSize(uint64_t* disk_bytes, uint64_t* estimated_keys) const;
  bool GetIntProperty(const std::string& name, uint64_t* value) const;
  Status ApproximateTableSize(uint32_t table, uint64_t* bytes) const;

  const ShardIdentity& identity() const { return identity_; }
  const std::string& dir() const { return dir_; }
  bool read_only() const { return options_.read_only; }
  RowCacheStats row_cache_stats() const;
  StoreMemoryStats memory_stats() const;
  DataPathStats data_path_stats() const;
  Status WriteBack() EXCLUDES(write_mu_, view_mu_);

  // Failures and recovery (shard_store_recovery.cc).
  Status failure() const EXCLUDES(write_mu_);
  bool failed() const { return has_failed_.load(std::memory_order_acquire); }
  Status Recover() EXCLUDES(write_mu_, db_mu_, view_mu_);

 private:
  // Marks the store failed after RocksDB refused a write (`error`, from
  // FromRocks) and returns the store's failure; logs once. REQUIRES: write_mu_.
  Status MarkFailedLocked(const Status& error, std::string_view op) REQUIRES(write_mu_);
  // Why a reopen would fail now (Unavailable), or OK. REQUIRES: write_mu_.
  Status CheckCauseGoneLocked() const REQUIRES(write_mu_);
  // The RocksDB options of a writable store plus its info logger.
  rocksdb::Options MakeWritableRocksOptions();
  rocksdb::Options MakeRocksOptions() const;
  // Opens RocksDB into db_ (Open, Recover).
  Status OpenRocks(const rocksdb::Options& ro) REQUIRES(db_mu_);
  // The steps of Open after OpenRocks; write_mu_ keeps db_ in place.
  Status InitOrCheckMeta() REQUIRES(write_mu_) EXCLUDES(catalog_mu_);
  // identity_.job: the recorded one, or records one (older store).
  Status LoadJob() REQUIRES(write_mu_);
  Status LoadCatalog() REQUIRES(write_mu_) EXCLUDES(catalog_mu_);
  Status LoadClocks() REQUIRES(write_mu_);
  // The applied clocks stored in RocksDB, indexed by client id.
  // parts (may be null): the parts of the next clock applied, per client.
  Status ReadStoredClocks(std::vector<ClockT>* clocks, std::vector<uint32_t>* parts = nullptr) const
      REQUIRES(write_mu_);
  Status CheckWritable(std::string_view op) const;
  // The entry of table `id`, or NotFound.
  StatusOr<std::shared_ptr<const TableEntry>> Lookup(uint32_t id) const EXCLUDES(catalog_mu_);
  void AddEntryLocked(const TableSchema& s) REQUIRES(catalog_mu_);
  // Reads rows [0, n) of table `e` from RocksDB at the view's snapshot into
  // values[0, n) (`absent` as in ReadRows); when `fill` is set, returns
  // their cache entries instead (*fill resized to n). REQUIRES: view_mu_ held.
  Status ReadFromStore(const TableEntry& e, const uint64_t* rows, size_t n, std::string* values,
                       std::vector<CachedRow>* fill, uint8_t* absent = nullptr) const
      REQUIRES_SHARED(view_mu_);
  // ReadRows through the row cache. REQUIRES: row_cache_ != nullptr, view_mu_ held.
  Status CachedRead(const TableEntry& e, const uint64_t* rows, size_t n, std::string* values,
                    uint8_t* absent) const REQUIRES_SHARED(view_mu_);
  // Makes a written group visible: takes a snapshot of it, adds its deltas
  // (ops, in WriteBatch order) to the cached rows and sets the applied
  // clocks. REQUIRES: write_mu_ held.
  struct CacheOp {
    const TableEntry* entry;
    uint32_t table;
    uint64_t row;
    std::string_view bytes;
    // Written as a Put: offset of its new sum in Publish's `put_sums`; -1: a merge.
    int64_t put = -1;
  };
  struct ClockUpdate {
    ClientId client;
    ClockT applied;
    uint32_t parts = 0;  // parts of clock `applied` applied (a partial Apply)
    // The undo state after it (IncompleteClock::undoable, incarnation).
    bool undo_kept = false;
    uint64_t undo_incarnation = 0;
  };
  // The undo records a group writes and deletes, in its commit's WriteBatch
  // (shard_store_undo.cc): deletes first, then puts.
  struct UndoWrites {
    struct Put {
      ClientId client = 0;
      uint32_t part = 0;
      ClockT clock = 0;
      uint64_t incarnation = 0;
      // The part's deltas: group.deltas[first, first + count) as admitted
      // (WriteAdmittedLocked sorts the group's deltas later).
      size_t first = 0;
      size_t count = 0;
      // Either a file (the record encoded from those deltas before the sort:
      // key_format.h, EncodeUndoRecord) or, where the group is the part
      // alone, the group's clock log record (no copy of the deltas).
      std::string record;
      storage_format::UndoPointer log;  // in_log: where its record is
    };
    std::vector<Put> puts;
    std::vector<std::pair<ClientId, uint32_t>> clears;  // delete parts [0, n) of the client
    bool empty() const { return puts.empty() && clears.empty(); }
  };
  // Adds `undo`'s keys to `batch`.
  static rocksdb::Status AddUndoWrites(const UndoWrites& undo, rocksdb::WriteBatch* batch);
  // Before the clock log restarts (a row write-back): every undo key that
  // points into the log gets a record file and points to it instead, so the
  // parts stay undoable once the log's bytes are reused.
  Status MoveUndoOutOfLogLocked() REQUIRES(write_mu_);
  // Writes the record files of undo.puts (before the commit that points to
  // them); removes those of undo.clears (after it).
  Status WriteUndoFilesLocked(const UndoWrites& undo) REQUIRES(write_mu_);
  // WriteUndoFilesLocked's two steps: one put's record file (fdatasynced
  // with options_.sync), and the directory's sync that makes the new files'
  // entries durable (options_.sync only).
  Status WriteUndoFileLocked(const UndoWrites::Put& p) REQUIRES(write_mu_);
  Status SyncUndoDirLocked() REQUIRES(write_mu_);
  void RemoveUndoFilesLocked(const UndoWrites& undo) REQUIRES(write_mu_);
  // Reads the record file of `client`'s part `part` (pointed to by `p`)
  // into *out. Corruption if it is missing or does not match.
  Status ReadUndoFile(ClientId client, uint32_t part, const storage_format::UndoPointer& p,
                      std::string* out) const;
  // Reads the record of a part whose undo key points into the clock log
  // (p.in_log) into *rec, its bytes in *payload. Corruption if the log no
  // longer holds it or it does not match.
  Status ReadUndoInLogLocked(const storage_format::UndoPointer& p, std::string* payload,
                             storage_format::UndoRecord* rec) const REQUIRES(write_mu_);
  // Copies the undo record files pointed to by the store into `to` (a checkpoint).
  Status CopyUndoFilesLocked(const std::string& to) REQUIRES(write_mu_);
  // Sets the applied clock, parts and undo state of c.client (under
  // view_mu_ exclusively, or before the store is shared). The undo state is
  // stored before the parts, so a reader that sees the parts sees it too.
  void SetClockState(const ClockUpdate& c);
  // Loads the undo state of every client with parts applied (open, Recover).
  Status LoadUndoStateLocked() REQUIRES(write_mu_);
  // put_sums: the new sums of the Put rows (CacheOp::put), copied into their
  // cache entries.
  void Publish(const std::vector<CacheOp>& ops, const std::string& put_sums,
               const std::vector<ClockUpdate>& clocks) REQUIRES(write_mu_) EXCLUDES(view_mu_);
  // ApplyBatches in named stages (shard_store_data.cc). Admit: classifies
  // each batch by the batch rule (consistency/batch_rule.h) and validates the
  // deltas of those applied into `group`; a refused batch contributes
  // nothing. Build: the WriteBatch of the group, in row-key order, and the
  // row cache's ops. Commit: one RocksDB write, then Publish. The clock log
  // replaces build and commit with WriteGroupToLogLocked.
  struct GroupDelta;
  struct AdmittedGroup;
  void AdmitLocked(const std::vector<BatchRequest>& batches, std::vector<BatchResult>* results,
                   AdmittedGroup* group) REQUIRES(write_mu_) EXCLUDES(catalog_mu_);
  Status AdmitDeltasLocked(const std::vector<RowDelta>& deltas, AdmittedGroup* group) const
      REQUIRES(write_mu_) REQUIRES_SHARED(catalog_mu_);
  Status BuildLocked(const AdmittedGroup& group, std::vector<CacheOp>* ops, std::string* put_sums)
      REQUIRES(write_mu_) EXCLUDES(view_mu_);
  Status CommitLocked(const AdmittedGroup& group, const std::vector<CacheOp>& ops,
                      const std::string& put_sums) REQUIRES(write_mu_) EXCLUDES(view_mu_);
  // The new stored sum of a cached dense row changed once by the group (a
  // Put instead of a merge operand); records where it is in *op.
  static const char* PutSum(const GroupDelta& d, const CachedRow& cached, CacheOp* op,
                            std::string* put_sums);
  // The clock log (shard_store_log.cc, docs/storage-format.md section 15).
  struct LogState {
    uint64_t number = 1;     // the active log file
    uint64_t end = 0;        // committed bytes of it
    uint64_t first_seq = 1;  // sequence number of its first record
    uint64_t next_seq = 1;   // of the next record
  };
  // Reads the stored log state; a store without one (format 1, or new) has
  // the default state. REQUIRES: db_ open.
  Status ReadLogState(LogState* st) const REQUIRES(write_mu_);
  // Opening: replays the log's committed records into the row cache (dirty
  // rows); a writable store then writes them back and opens the log for
  // appending, and records the current format.
  Status OpenClockLog() EXCLUDES(write_mu_);
  // Refuses a store marked by an undurable open that did not close cleanly;
  // marks it when this open is undurable (ShardStoreOptions::durable).
  Status CheckDurableMark() REQUIRES(write_mu_);
  // This open marked the store undurable; its clean close removes the mark.
  bool marked_undurable_ = false;
  // Replays the records of log file st.number in [0, st.end) whose sequence
  // number is at least `seq` into the row cache as dirty rows.
  Status ReplayLogLocked(const LogState& st, uint64_t seq) REQUIRES(write_mu_);
  // Adds `deltas` (table, row, bytes) to the rows in the row cache, reading
  // the rows missing from it from RocksDB first; every row is left dirty.
  Status ApplyToDirtyRowsLocked(const std::vector<ClockLogEntry>& deltas) REQUIRES(write_mu_);
  // Adds `deltas` to their rows, all pinned in the row cache (handles[i]:
  // the row of deltas[i], from PinRowsLocked), validating each against its
  // table's format when `validate`.
  Status AddToPinnedRowsLocked(const std::vector<ClockLogEntry>& deltas,
                               const std::vector<uint32_t>& handles, bool validate)
      REQUIRES(write_mu_);
  // Reads the rows the group changes that the row cache lacks and marks them
  // all dirty (pinned) before the group is logged; (*handles)[i] is the row
  // cache handle of deltas[i]'s row. A row without bytes yet (absent, or a
  // new delta-only row) is sized for its first delta here, not in the
  // publish under the view lock. REQUIRES: deltas sorted by (table, row), as
  // a group and its log record are.
  Status PinRowsLocked(const std::vector<ClockLogEntry>& deltas, std::vector<uint32_t>* handles)
      REQUIRES(write_mu_) EXCLUDES(view_mu_);
  // The group commit of the clock log: one log record, then the clocks and the
  // log's end in RocksDB, then the deltas added to the pinned rows.
  Status WriteGroupToLogLocked(const std::vector<ClockLogEntry>& deltas,
                               const std::vector<ClockUpdate>& clocks,
                               const std::string* import_record, UndoWrites* undo)
      REQUIRES(write_mu_);
  // ApplyBatches after admission: sorts the group and writes it on the
  // active write path (clock log, or Build and Commit). Non-OK: nothing of
  // it was written.
  Status WriteAdmittedLocked(AdmittedGroup* group) REQUIRES(write_mu_) EXCLUDES(view_mu_);
  // Admission's undo bookkeeping for batch `req`, admitted as `admission`
  // at position `applied`, whose deltas are group->deltas[first, end)
  // (shard_store_undo.cc). Returns the undo state after it in *update.
  void NoteUndoLocked(const BatchRequest& req, BatchAdmission admission,
                      const AppliedPosition& applied, size_t first, AdmittedGroup* group,
                      ClockUpdate* update) REQUIRES(write_mu_);
  // UndoIncompleteClock's admission: the negated parts as `group`.
  Status AdmitUndoLocked(ClientId client, const IncompleteClock& ic, AdmittedGroup* group)
      REQUIRES(write_mu_) EXCLUDES(catalog_mu_);
  // Whether the group's one kept part is recorded by its clock log record
  // (the group is that part alone and goes to the log) instead of a file.
  bool UndoInLogLocked(const AdmittedGroup& group) const REQUIRES(write_mu_);
  // Whether some client has parts of an incomplete clock kept for undo
  // (whose records a write-back first moves out of the log).
  bool AnyPartsKeptLocked() const REQUIRES(write_mu_);
  // Encodes the record of every put of group->undo from group->deltas (before
  // they are sorted).
  static void EncodeUndoRecords(AdmittedGroup* group);
  // Writes the dirty rows back (one SST file, ingested) and restarts the log.
  Status WriteBackLocked(const char* why) REQUIRES(write_mu_);
  // The keys of the dirty rows that hold a value to write back, in key order.
  struct DirtyKey {
    uint32_t table;
    uint64_t row;
  };
  std::vector<DirtyKey> SortedDirtyKeys() const EXCLUDES(cache_mu_);
  // After a failed write: brings the log and the dirty rows in line with
  // what RocksDB holds (Recover).
  Status ResyncLogLocked() REQUIRES(write_mu_);
  // Stored bytes of the dirty rows of `table` (or of all tables).
  uint64_t DirtyRowBytes(uint32_t table, bool all_tables) const;
  // Log bytes after which the dirty rows (`dirty` bytes) are written back,
  // and the dirty bytes after which they are (DirtyLimitBytes).
  uint64_t LogLimitBytes(uint64_t dirty) const;
  uint64_t DirtyLimitBytes() const;

  // Empties batch_ for the next group, freeing its buffer when it is larger
  // than the retained size (ShardStoreOptions::retained_write_batch_mb).
  void TrimWriteBatchLocked() REQUIRES(write_mu_);
  // After a group of `group_bytes` was written: starts a background flush of
  // the active memtable once it holds several groups' worth (shard_store_data.cc).
  void MaybeSwitchMemtableLocked(size_t group_bytes) REQUIRES(write_mu_);
  // Replaces the view's snapshot with one of the latest state.
  // REQUIRES: view_mu_ held exclusively, write_mu_ held.
  void RefreshSnapshotLocked() REQUIRES(view_mu_, write_mu_);

  // The failure (ShardStore::failure): set by MarkFailedLocked, cleared by a
  // successful Recover. has_failed_ mirrors !failed_.ok() for lock-free checks.
  Status failed_ GUARDED_BY(write_mu_);
  int failed_errno_ GUARDED_BY(write_mu_) = 0;  // ENOSPC, EMFILE, EROFS or 0
  int64_t failed_since_ms_ GUARDED_BY(write_mu_) = 0;
  std::atomic<bool> has_failed_{false};
  // db_'s lifetime: Open and Recover replace db_ holding db_mu_ exclusively
  // and write_mu_ (Recover also view_mu_). Users of db_ that hold neither
  // write_mu_ nor view_mu_ (Scan, checkpoints, Flush, sizes, properties) hold
  // db_mu_ shared and read db_; holders of write_mu_ or view_mu_ use
  // WriterDb() / ViewDb(). db_ is null only after a failed reopen (until the
  // next Recover).
  mutable SharedMutex db_mu_ ACQUIRED_AFTER(write_mu_);
  std::unique_ptr<rocksdb::DB> db_ GUARDED_BY(db_mu_);
  // db_ for a thread that keeps it from being replaced by holding write_mu_
  // (every write) or view_mu_ (reads of a view). Null after a failed reopen.
  rocksdb::DB* WriterDb() const REQUIRES(write_mu_) NO_THREAD_SAFETY_ANALYSIS { return db_.get(); }
  rocksdb::DB* ViewDb() const REQUIRES_SHARED(view_mu_) NO_THREAD_SAFETY_ANALYSIS {
    return db_.get();
  }
  std::shared_ptr<rocksdb::Logger> info_log_;
  std::shared_ptr<rocksdb::SstFileManager> sst_file_manager_;

  // Constant after Open().
  const ShardStoreOptions options_;
  const std::string dir_;
  ShardIdentity identity_;
  std::shared_ptr<rocksdb::Cache> block_cache_;
  rocksdb::WriteOptions write_options_;
  std::string secondary_dir_;  // temp dir of a secondary instance; removed on close

  // The WriteBatch of the group being built, reused by the next group (its
  // buffer kept up to options_.retained_write_batch_mb). write_batch_bytes_: its
  // capacity, for memory_stats().
  rocksdb::WriteBatch batch_ GUARDED_BY(write_mu_);
  // The row cache handles of a group's rows (WriteGroupToLogLocked), kept
  // between groups so the vector is not reallocated per group.
  std::vector<uint32_t> pinned_handles_ GUARDED_BY(write_mu_);
  std::atomic<uint64_t> write_batch_bytes_{0};

  // Locking (docs/storage-format.md section 14). write_mu_ serializes every
  // write (ApplyBatches, CreateTable, DropTable). view_mu_ makes a completed write visible: a
  // writer writes RocksDB holding write_mu_ only, then takes view_mu_
  // exclusively for the short Publish (snapshot, cached rows, applied
  // clocks); readers hold it shared. cache_mu_ guards the row cache's
  // structure among concurrent readers (fills) and the writer's lookups.
  // Lock order: write_mu_, catalog_mu_ (never held while taking view_mu_),
  // view_mu_, cache_mu_.
  mutable Mutex write_mu_;
  mutable ViewLock view_mu_ ACQUIRED_AFTER(write_mu_);
  mutable Mutex cache_mu_ ACQUIRED_AFTER(view_mu_);
  // [num_clients]: the applied clocks of the view. Written under view_mu_
  // exclusively (atomics so AppliedClock needs no lock).
  std::unique_ptr<std::atomic<ClockT>[]> applied_;
  // [num_clients]: parts of clock applied_[i] applied (docs/wire-protocol.md,
  // "Apply parts"); written with applied_.
  std::unique_ptr<std::atomic<uint32_t>[]> applied_parts_;
  // [num_clients]: the undo state of the parts of clock applied_[i]
  // (IncompleteClock::undoable, incarnation); stored before applied_parts_.
  std::unique_ptr<std::atomic<bool>[]> undo_kept_;
  std::unique_ptr<std::atomic<uint64_t>[]> undo_incarnation_;
  // The snapshot reads of RocksDB use: the state after the last published
  // write (null for a read-only store). Guarded by view_mu_.
  const rocksdb::Snapshot* snapshot_ GUARDED_BY(view_mu_) = nullptr;

  // The row cache (null when disabled). Exactness rules: see
  // docs/storage-format.md sections 12 and 13.
  // With a clock log it also holds the dirty rows; it always exists then.
  const std::unique_ptr<RowCache> row_cache_;

  // The clock log. log_mode_: groups go to it (constant after Open).
  bool log_mode_ = false;
  ClockLogWriter log_ GUARDED_BY(write_mu_);
  LogState log_state_ GUARDED_BY(write_mu_);
  // A leaf: taken alone or under write_mu_ (counters only).
  mutable Mutex stats_mu_ ACQUIRED_AFTER(write_mu_);
  DataPathStats path_stats_ GUARDED_BY(stats_mu_);

  // Catalog (DropTable also holds write_mu_, so a batch being written cannot
  // see its table vanish).
  mutable SharedMutex catalog_mu_ ACQUIRED_AFTER(write_mu_);
  std::unordered_map<uint32_t, std::shared_ptr<const TableEntry>> by_id_ GUARDED_BY(catalog_mu_);
  std::map<std::string, uint32_t, std::less<>> by_name_ GUARDED_BY(catalog_mu_);
  uint64_t next_table_id_ GUARDED_BY(catalog_mu_) = 1;
};

// One delta of a group, in the order it goes into the WriteBatch.
struct ShardStore::Impl::GroupDelta {
  uint32_t table;
  uint32_t seq;  // position in the group: batch by batch, deltas in batch order
  uint64_t row;
  const TableEntry* entry;
  std::string_view bytes;  // the payload written (sparse zeros stripped)
};

// What the admit stage accepted of a group: its deltas, the clock records
// and undo records it leaves.
struct ShardStore::Impl::AdmittedGroup {
  std::vector<GroupDelta> deltas;
  std::deque<std::string> stripped_rows;  // stable addresses for GroupDelta::bytes
  std::vector<ClockUpdate> clocks;
  // Where each client stands after the batches admitted so far, and its
  // undo state then (IncompleteClock::undoable, incarnation).
  std::unordered_map<ClientId, AppliedPosition> next;
  std::unordered_map<ClientId, UndoState> undo_next;
  UndoWrites undo;
  const std::string* import_record = nullptr;  // the last import's record, if any
  size_t reserve = 64;                         // WriteBatch bytes
  uint32_t seq = 0;

  bool empty() const { return clocks.empty() && import_record == nullptr && undo.empty(); }
};

}  // namespace pace

#endif  // PACE_STORAGE_SHARD_STORE_IMPL_H_
