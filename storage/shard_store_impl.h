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
#include <unordered_map>

#include "common/row.h"
#include "storage/shard_store.h"

namespace pace {

// Largest num_clients a store accepts (bounds per-client state).
inline constexpr uint32_t kMaxStoreClients = 1u << 16;

// A catalog entry: the schema plus what the write path needs per delta.
struct TableEntry {
  TableSchema schema;
  RowFormat format;
  char tag = 0;  // RowTag(format), the first byte of every stored value
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

  // Catalog, protected by catalog_mu_. ApplyBatch holds it shared across its
  // write so a concurrent DropTable cannot interleave with it.
  mutable std::shared_mutex catalog_mu_;
  std::unordered_map<uint32_t, std::shared_ptr<const TableEntry>> by_id_;
  std::map<std::string, uint32_t, std::less<>> by_name_;
  uint64_t next_table_id_ = 1;
};

}  // namespace pace

#endif  // PACE_STORAGE_SHARD_STORE_IMPL_H_
