// Private implementation of ShardStore, shared by shard_store.cc (open,
// catalog, clocks) and shard_store_data.cc (batches, reads, checkpoints).
// Not part of the public API.
#ifndef PACE_STORAGE_SHARD_STORE_IMPL_H_
#define PACE_STORAGE_SHARD_STORE_IMPL_H_

#include <rocksdb/cache.h>
#include <rocksdb/db.h>
#include <rocksdb/options.h>

#include <atomic>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <shared_mutex>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "common/row.h"
#include "storage/row_cache.h"
#include "storage/shard_store.h"

namespace pace {

// Largest num_clients a store accepts (bounds per-client state).
inline constexpr uint32_t kMaxStoreClients = 1u << 16;

// A catalog entry: the schema plus what the write path needs per delta.
struct TableEntry {
  TableSchema schema;
  RowFormat format;
  char tag = 0;  // RowTag(format), the first byte of every stored value
  // Set by DropTable while it holds apply_mu_ (row cache on only), so a cache
  // fill that looked the table up earlier sees the drop. Protected by apply_mu_.
  mutable bool dropped = false;
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

  Status ApplyBatch(ClientId client, ClockT clock, const std::vector<RowDelta>& deltas,
                    bool* duplicate);
  ClockT AppliedClock(ClientId client) const;
  std::vector<ClockT> AppliedClocks() const;
  Version ShardClock() const;

  Status Get(uint32_t table, uint64_t row, std::string* value) const;
  Status MultiGet(uint32_t table, const std::vector<uint64_t>& rows,
                  std::vector<std::string>* values) const;
  Status Scan(uint32_t table, uint64_t start_row,
              const std::function<bool(uint64_t, std::string_view)>& fn) const;

  Status CreateCheckpoint(const std::string& dir) const;
  Status Flush();
  Status ApproximateSize(uint64_t* disk_bytes, uint64_t* estimated_keys) const;
  Status ApproximateTableSize(uint32_t table, uint64_t* bytes) const;

  const ShardIdentity& identity() const { return identity_; }
  const std::string& dir() const { return dir_; }
  bool read_only() const { return options_.read_only; }
  RowCacheStats row_cache_stats() const;

 private:
  rocksdb::Options MakeRocksOptions() const;
  Status OpenRocks(const rocksdb::Options& ro);
  Status InitOrCheckMeta();
  Status LoadCatalog();
  Status LoadClocks();
  Status CheckWritable(std::string_view op) const;
  // The entry of table `id`, or NotFound.
  StatusOr<std::shared_ptr<const TableEntry>> Lookup(uint32_t id) const;
  void AddEntryLocked(const TableSchema& s);
  // Reads rows [0, n) of table `e` from RocksDB into values[0, n); when
  // `fill` is set, also returns their cache entries (*fill resized to n).
  Status ReadFromStore(const TableEntry& e, const uint64_t* rows, size_t n, std::string* values,
                       std::vector<CachedRow>* fill) const;
  // MultiGet through the row cache. REQUIRES: row_cache_ != nullptr.
  Status CachedRead(uint32_t table, const uint64_t* rows, size_t n, std::string* values) const;
  // Adds a validated batch's deltas to the rows it touches that are cached.
  // REQUIRES: apply_mu_ held, the batch written.
  // entries[i] is the table of deltas[i], bytes[i] the payload written for it.
  // Deltas with skip[i] set were already applied to the cache.
  void UpdateCachedRows(const std::vector<const TableEntry*>& entries,
                        const std::vector<RowDelta>& deltas,
                        const std::vector<std::string_view>& bytes, const std::vector<bool>& skip);
  // Flushes the memtable (without waiting) once enough WAL has been written
  // since the last such flush. REQUIRES: apply_mu_ held (row cache on).
  void MaybeFlushForWal(size_t batch_bytes);

  // Constant after Open().
  const ShardStoreOptions options_;
  const std::string dir_;
  ShardIdentity identity_;
  std::shared_ptr<rocksdb::Cache> block_cache_;
  std::unique_ptr<rocksdb::DB> db_;
  rocksdb::WriteOptions write_options_;
  std::string secondary_dir_;                // temp dir of a secondary instance; removed on close
  std::unique_ptr<std::mutex[]> client_mu_;  // [num_clients]; serializes ApplyBatch
  std::unique_ptr<std::atomic<ClockT>[]> applied_;  // [num_clients]; written under client_mu_

  // The row cache (null when disabled). Exactness rules (see
  // docs/storage-format.md section 12): cached rows change only in the same
  // order as RocksDB applies their operands, and a row read from RocksDB is
  // inserted only while no write can run. So apply_mu_ is held across every
  // row write (ApplyBatch, DropTable) and its cache update, and across every
  // cache fill; cache_mu_ guards the cache itself. Lock order: client_mu_,
  // catalog_mu_, apply_mu_, cache_mu_; nothing takes catalog_mu_ while holding
  // apply_mu_.
  const std::unique_ptr<RowCache> row_cache_;
  mutable std::mutex apply_mu_;
  mutable std::mutex cache_mu_;
  // Bytes of batches written since the last MaybeFlushForWal flush. Guarded
  // by apply_mu_.
  size_t wal_bytes_since_flush_ = 0;

  // Catalog, protected by catalog_mu_. ApplyBatch holds it shared across its
  // write so a concurrent DropTable cannot interleave with it.
  mutable std::shared_mutex catalog_mu_;
  std::unordered_map<uint32_t, std::shared_ptr<const TableEntry>> by_id_;
  std::map<std::string, uint32_t, std::less<>> by_name_;
  uint64_t next_table_id_ = 1;
};

}  // namespace pace

#endif  // PACE_STORAGE_SHARD_STORE_IMPL_H_
