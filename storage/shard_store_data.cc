// ShardStore: batch application, reads, checkpoints and size estimates.
#include <glog/logging.h>
#include <rocksdb/iterator.h>
#include <rocksdb/slice.h>
#include <rocksdb/utilities/checkpoint.h>
#include <rocksdb/write_batch.h>

#include <algorithm>
#include <chrono>
#include <deque>
#include <filesystem>
#include <string>
#include <vector>

#include "storage/checkpoint.h"
#include "storage/key_format.h"
#include "storage/rocks_status.h"
#include "storage/row_merge.h"
#include "storage/shard_store.h"
#include "storage/shard_store_impl.h"

namespace pace {

namespace fs = std::filesystem;
namespace sf = storage_format;

namespace {

std::string_view View(const rocksdb::Slice& s) { return std::string_view(s.data(), s.size()); }

// Per-delta bytes a WriteBatch spends besides the operand: tag, varint
// lengths, record type, key.
constexpr size_t kBatchOverheadPerDelta = 1 + 1 + 5 + 5 + sf::kRowKeySize;

// The order in which a batch's deltas go into the WriteBatch: by row key
// (table, row), deltas of one row in batch order. Inserting keys in order lets
// the memtable start each insert from the previous one's position (see
// memtable_insert_with_hint_prefix_extractor in shard_store.cc) instead of
// searching the whole skip list; the row merges see each row's deltas in the
// same order either way.
std::vector<uint32_t> KeyOrder(const std::vector<RowDelta>& deltas) {
  std::vector<uint32_t> order(deltas.size());
  for (uint32_t i = 0; i < order.size(); ++i) order[i] = i;
  auto less = [&deltas](uint32_t a, uint32_t b) {
    const RowDelta& x = deltas[a];
    const RowDelta& y = deltas[b];
    if (x.table != y.table) return x.table < y.table;
    if (x.row != y.row) return x.row < y.row;
    return a < b;
  };
  if (!std::is_sorted(order.begin(), order.end(), less)) {
    std::sort(order.begin(), order.end(), less);
  }
  return order;
}

}  // namespace

// --- Writes -------------------------------------------------------------------

Status ShardStore::Impl::ApplyBatch(ClientId client, ClockT clock,
                                    const std::vector<RowDelta>& deltas, bool* duplicate) {
  *duplicate = false;
  RETURN_IF_ERROR(CheckWritable("ApplyBatch"));
  if (client >= identity_.num_clients) {
    return Status::InvalidArgument("client id " + std::to_string(client) + " is not in [0, " +
                                   std::to_string(identity_.num_clients) + ")");
  }
  if (clock < 0) return Status::InvalidArgument("negative clock " + std::to_string(clock));
  std::lock_guard<std::mutex> client_lock(client_mu_[client]);
  const ClockT applied = applied_[client].load(std::memory_order_relaxed);
  if (clock < applied) {
    *duplicate = true;
    return Status::OK();
  }
  if (clock > applied) {
    return Status::FailedPrecondition("clock gap: client " + std::to_string(client) +
                                      " sent its batch for clock " + std::to_string(clock) +
                                      " but this shard has applied only clocks < " +
                                      std::to_string(applied));
  }

  size_t reserve = 64;
  for (const RowDelta& d : deltas) reserve += d.bytes.size() + kBatchOverheadPerDelta;
  rocksdb::WriteBatch batch(reserve);
  // With the row cache on: each delta's table and written bytes, to update
  // cached rows after the write.
  const bool cache = row_cache_ != nullptr;
  std::vector<const TableEntry*> entry_of;
  std::vector<std::string_view> bytes_of;
  std::deque<std::string> stripped_rows;  // stable addresses for bytes_of
  // Cached dense rows changed once by this batch are written as a Put of their
  // new stored value (the cached sum plus the delta), which the memtable
  // updates in place (inplace_update_support) instead of adding one more merge
  // operand per row and clock. put_rows lists them; put_values holds their
  // tagged values, one after another.
  struct PutRow {
    uint32_t delta;  // index into deltas
    CachedRow* cached;
    size_t offset;  // of the tagged value in put_values
  };
  std::vector<PutRow> put_rows;
  std::string put_values;
  if (cache) {
    entry_of.resize(deltas.size());
    bytes_of.resize(deltas.size());
  }
  const std::vector<uint32_t> order = KeyOrder(deltas);

  // Held shared across the write so DropTable cannot interleave with it.
  std::shared_lock<std::shared_mutex> catalog_lock(catalog_mu_);
  // With the cache on, batches of all clients are built and written one at a
  // time so cached rows see their deltas in RocksDB's order, and the cached
  // sums the Puts are computed from cannot change before the write.
  std::unique_lock<std::mutex> apply_lock(apply_mu_, std::defer_lock);
  std::unique_lock<std::mutex> cache_lock(cache_mu_, std::defer_lock);
  if (cache) {
    apply_lock.lock();
    cache_lock.lock();
    put_values.reserve(reserve);
    put_rows.reserve(deltas.size());
  }
  const TableEntry* entry = nullptr;
  char key[sf::kRowKeySize];
  const rocksdb::Slice key_slice(key, sf::kRowKeySize);
  for (size_t k = 0; k < order.size(); ++k) {
    const uint32_t i = order[k];
    const RowDelta& d = deltas[i];
    if (entry == nullptr || entry->schema.id != d.table) {
      auto it = by_id_.find(d.table);
      if (it == by_id_.end()) {
        return Status::InvalidArgument("delta " + std::to_string(i) + " names unknown table id " +
                                       std::to_string(d.table));
      }
      entry = it->second.get();
    }
    Status valid = ValidateRow(entry->format, d.bytes);
    if (!valid.ok()) {
      return Status::InvalidArgument("delta " + std::to_string(i) + " (table '" +
                                     entry->schema.name + "', row " + std::to_string(d.row) +
                                     "): " + valid.message());
    }
    std::string_view bytes = d.bytes;
    if (entry->format.kind == RowKind::kSparse && SparseHasZero(entry->format, bytes)) {
      // Stored values never hold zero entries; strip them here (rare).
      StripSparseZeros(entry->format, bytes, &stripped_rows.emplace_back());
      bytes = stripped_rows.back();
    }
    if (cache) {
      entry_of[i] = entry;
      bytes_of[i] = bytes;
    }
    sf::EncodeRowKey(d.table, d.row, key);
    CachedRow* cached = nullptr;
    if (cache && entry->format.kind == RowKind::kDense) {
      auto same_row = [&deltas, &d](uint32_t j) {
        return deltas[j].table == d.table && deltas[j].row == d.row;
      };
      const bool once =
          (k == 0 || !same_row(order[k - 1])) && (k + 1 == order.size() || !same_row(order[k + 1]));
      if (once) cached = row_cache_->Peek(d.table, d.row);
    }
    rocksdb::Status s;
    if (cached != nullptr) {
      // The merge operator's arithmetic (row_merge.cc): a lone operand is the
      // sum; a later one is added to it.
      const size_t offset = put_values.size();
      put_values.push_back(entry->tag);
      if (cached->written) {
        put_values.append(cached->sum);
        AddDenseUnaligned(entry->format.type, put_values.data() + offset + 1, bytes.data(),
                          entry->format.width);
      } else {
        put_values.append(bytes.data(), bytes.size());
      }
      put_rows.push_back(PutRow{i, cached, offset});
      s = batch.Put(key_slice, rocksdb::Slice(put_values.data() + offset, 1 + bytes.size()));
    } else {
      const rocksdb::Slice value_parts[2] = {rocksdb::Slice(&entry->tag, 1),
                                             rocksdb::Slice(bytes.data(), bytes.size())};
      s = batch.Merge(rocksdb::SliceParts(&key_slice, 1), rocksdb::SliceParts(value_parts, 2));
    }
    if (!s.ok()) return FromRocks(s, "build batch");
  }
  if (cache) cache_lock.unlock();
  rocksdb::Status s = batch.Put(sf::ClockKey(client), sf::EncodeClock(clock + 1));
  if (!s.ok()) return FromRocks(s, "build batch");
  RETURN_IF_ERROR(FromRocks(
      db_->Write(write_options_, &batch),
      "apply batch of client " + std::to_string(client) + " clock " + std::to_string(clock)));
  if (cache) {
    std::vector<bool> done(deltas.size(), false);
    {
      std::lock_guard<std::mutex> lock(cache_mu_);
      // Recharging may evict: only after every pointer in put_rows was used.
      std::vector<uint32_t> grown;
      for (const PutRow& p : put_rows) {
        CachedRow* c = p.cached;
        if (!c->written) grown.push_back(p.delta);
        c->sum.assign(put_values.data() + p.offset + 1, bytes_of[p.delta].size());
        c->written = true;
        done[p.delta] = true;
      }
      for (uint32_t i : grown) row_cache_->Recharge(deltas[i].table, deltas[i].row);
    }
    // Rows written as merges (sparse, or changed twice by this batch).
    if (put_rows.size() < deltas.size()) UpdateCachedRows(entry_of, deltas, bytes_of, done);
    MaybeFlushForWal(batch.GetDataSize());
  }
  applied_[client].store(clock + 1, std::memory_order_release);
  return Status::OK();
}

void ShardStore::Impl::MaybeFlushForWal(size_t batch_bytes) {
  // In-place updates do not fill the memtable, so without this the WAL (which
  // RocksDB drops only when the memtables it covers are flushed) would grow
  // without bound. Flush once the WAL written since the last forced flush
  // reaches twice a memtable's size.
  wal_bytes_since_flush_ += batch_bytes;
  if (wal_bytes_since_flush_ < 2 * (options_.write_buffer_mb << 20)) return;
  wal_bytes_since_flush_ = 0;
  rocksdb::FlushOptions fo;
  fo.wait = false;
  fo.allow_write_stall = true;
  rocksdb::Status s = db_->Flush(fo);
  if (!s.ok()) LOG(WARNING) << "flush of " << dir_ << " to bound the WAL: " << s.ToString();
}

void ShardStore::Impl::UpdateCachedRows(const std::vector<const TableEntry*>& entries,
                                        const std::vector<RowDelta>& deltas,
                                        const std::vector<std::string_view>& bytes,
                                        const std::vector<bool>& skip) {
  std::lock_guard<std::mutex> cache_lock(cache_mu_);
  for (size_t i = 0; i < deltas.size(); ++i) {
    if (skip[i]) continue;
    CachedRow* c = row_cache_->Peek(deltas[i].table, deltas[i].row);
    if (c == nullptr) continue;
    const RowFormat& f = entries[i]->format;
    // The merge operator's arithmetic (row_merge.cc): a lone operand is the
    // sum; each later one is added to the sum in order.
    if (!c->written) {
      c->sum.assign(bytes[i].data(), bytes[i].size());
      c->written = true;
    } else if (f.kind == RowKind::kDense) {
      AddDenseUnaligned(f.type, c->sum.data(), bytes[i].data(), f.width);
      continue;  // same size: no recharge
    } else {
      AddRowUnchecked(f, &c->sum, bytes[i]);
    }
    row_cache_->Recharge(deltas[i].table, deltas[i].row);
  }
}

// --- Reads --------------------------------------------------------------------

namespace {

// The cache entry of a row read from the store (payload: its validated stored
// sum, or nullptr when it has no record).
CachedRow MakeCachedRow(const TableSchema& s, uint64_t row, const std::string_view* payload) {
  CachedRow c;
  if (payload != nullptr) {
    c.written = true;
    c.sum.assign(payload->data(), payload->size());
  }
  if (s.kind == RowKind::kDense && s.init.kind != InitKind::kZeros) InitRow(s, row, &c.init);
  return c;
}

// What ComposeRow returns for the stored state `c` holds, computed the same way.
void ComposeCachedRow(const TableSchema& s, uint64_t row, const CachedRow& c, std::string* out) {
  if (!c.init.empty()) {
    out->assign(c.init);
    if (c.written) AddDenseUnaligned(s.type, out->data(), c.sum.data(), s.width);
  } else if (c.written) {
    out->assign(c.sum);
  } else {
    InitRow(s, row, out);
  }
}

}  // namespace

Status ShardStore::Impl::ReadFromStore(const TableEntry& e, const uint64_t* rows, size_t n,
                                       std::string* values, std::vector<CachedRow>* fill) const {
  if (fill != nullptr) fill->resize(n);
  if (n == 0) return Status::OK();
  const TableSchema& schema = e.schema;
  std::vector<char> key_bytes(n * sf::kRowKeySize);
  std::vector<rocksdb::Slice> keys(n);
  for (size_t i = 0; i < n; ++i) {
    char* k = key_bytes.data() + i * sf::kRowKeySize;
    sf::EncodeRowKey(schema.id, rows[i], k);
    keys[i] = rocksdb::Slice(k, sf::kRowKeySize);
  }
  std::vector<rocksdb::PinnableSlice> stored(n);
  std::vector<rocksdb::Status> statuses(n);
  db_->MultiGet(rocksdb::ReadOptions(), db_->DefaultColumnFamily(), n, keys.data(), stored.data(),
                statuses.data());
  for (size_t i = 0; i < n; ++i) {
    std::string_view payload;
    const std::string_view* p = nullptr;
    if (!statuses[i].IsNotFound()) {
      std::string where = "row " + std::to_string(rows[i]) + " of table '" + schema.name + "'";
      RETURN_IF_ERROR(FromRocks(statuses[i], "read " + where));
      RETURN_IF_ERROR(ParseStoredRow(e.format, View(stored[i]), &payload).WithPrefix(where));
      p = &payload;
    }
    if (fill == nullptr) {
      ComposeRow(schema, rows[i], p, &values[i]);
    } else {
      (*fill)[i] = MakeCachedRow(schema, rows[i], p);
      ComposeCachedRow(schema, rows[i], (*fill)[i], &values[i]);
    }
  }
  return Status::OK();
}

Status ShardStore::Impl::CachedRead(uint32_t table, const uint64_t* rows, size_t n,
                                    std::string* values) const {
  ASSIGN_OR_RETURN(std::shared_ptr<const TableEntry> e, Lookup(table));
  const TableSchema& schema = e->schema;
  std::vector<size_t> missing;
  {
    std::lock_guard<std::mutex> cache_lock(cache_mu_);
    for (size_t i = 0; i < n; ++i) {
      const CachedRow* c = row_cache_->Lookup(table, rows[i]);
      if (c != nullptr) {
        ComposeCachedRow(schema, rows[i], *c, &values[i]);
      } else {
        missing.push_back(i);
      }
    }
  }
  if (missing.empty()) return Status::OK();

  // No write may run from here until the rows read are cached: their values
  // would miss its deltas. All rows are read again under the lock (also the
  // ones that hit), so the result is one state between two batches.
  std::lock_guard<std::mutex> apply_lock(apply_mu_);
  if (e->dropped) return Status::NotFound("unknown table id " + std::to_string(table));
  missing.clear();
  {
    std::lock_guard<std::mutex> cache_lock(cache_mu_);
    for (size_t i = 0; i < n; ++i) {
      const CachedRow* c = row_cache_->Peek(table, rows[i]);
      if (c != nullptr) {
        ComposeCachedRow(schema, rows[i], *c, &values[i]);
      } else {
        missing.push_back(i);
      }
    }
  }
  if (missing.empty()) return Status::OK();
  std::vector<uint64_t> ids(missing.size());
  for (size_t j = 0; j < missing.size(); ++j) ids[j] = rows[missing[j]];
  std::vector<std::string> read(missing.size());
  std::vector<CachedRow> fill;
  RETURN_IF_ERROR(ReadFromStore(*e, ids.data(), ids.size(), read.data(), &fill));
  for (size_t j = 0; j < missing.size(); ++j) values[missing[j]] = std::move(read[j]);
  std::lock_guard<std::mutex> cache_lock(cache_mu_);
  for (size_t j = 0; j < missing.size(); ++j) {
    // A row asked for twice is inserted twice with the same state.
    row_cache_->Insert(table, ids[j], std::move(fill[j]));
  }
  return Status::OK();
}

Status ShardStore::Impl::Get(uint32_t table, uint64_t row, std::string* value) const {
  if (row_cache_ != nullptr) return CachedRead(table, &row, 1, value);
  ASSIGN_OR_RETURN(std::shared_ptr<const TableEntry> e, Lookup(table));
  return ReadFromStore(*e, &row, 1, value, nullptr);
}

Status ShardStore::Impl::MultiGet(uint32_t table, const std::vector<uint64_t>& rows,
                                  std::vector<std::string>* values) const {
  values->resize(rows.size());
  if (row_cache_ != nullptr) return CachedRead(table, rows.data(), rows.size(), values->data());
  ASSIGN_OR_RETURN(std::shared_ptr<const TableEntry> e, Lookup(table));
  return ReadFromStore(*e, rows.data(), rows.size(), values->data(), nullptr);
}

RowCacheStats ShardStore::Impl::row_cache_stats() const {
  RowCacheStats st;
  if (row_cache_ == nullptr) return st;
  std::lock_guard<std::mutex> cache_lock(cache_mu_);
  st.capacity_bytes = row_cache_->capacity();
  st.bytes = row_cache_->bytes();
  st.entries = row_cache_->entries();
  st.hits = row_cache_->counters().hits;
  st.misses = row_cache_->counters().misses;
  st.evictions = row_cache_->counters().evictions;
  return st;
}

Status ShardStore::Impl::Scan(uint32_t table, uint64_t start_row,
                              const std::function<bool(uint64_t, std::string_view)>& fn) const {
  ASSIGN_OR_RETURN(std::shared_ptr<const TableEntry> e, Lookup(table));
  // With the row cache on, ApplyBatch updates Puts in place in the memtable
  // (inplace_update_support), which a concurrent iterator could see half
  // written: no batch is written during a scan.
  std::unique_lock<std::mutex> apply_lock(apply_mu_, std::defer_lock);
  if (row_cache_ != nullptr && !options_.read_only) apply_lock.lock();
  const TableSchema& schema = e->schema;
  const bool zero_init = schema.init.kind == InitKind::kZeros || schema.kind == RowKind::kSparse;
  std::string end = sf::TableRowsEnd(table);
  rocksdb::Slice upper(end);
  rocksdb::ReadOptions ro;
  ro.iterate_upper_bound = &upper;
  ro.readahead_size = 2 << 20;
  std::unique_ptr<rocksdb::Iterator> it(db_->NewIterator(ro));
  std::string composed;
  for (it->Seek(sf::MakeRowKey(table, start_row)); it->Valid(); it->Next()) {
    uint32_t key_table;
    uint64_t row;
    if (!sf::DecodeRowKey(View(it->key()), &key_table, &row) || key_table != table) {
      return Status::Corruption("malformed row key in table '" + schema.name + "'");
    }
    std::string_view payload;
    RETURN_IF_ERROR(
        ParseStoredRow(e->format, View(it->value()), &payload)
            .WithPrefix("row " + std::to_string(row) + " of table '" + schema.name + "'"));
    if (zero_init) {
      if (!fn(row, payload)) return Status::OK();
    } else {
      ComposeRow(schema, row, &payload, &composed);
      if (!fn(row, composed)) return Status::OK();
    }
  }
  return FromRocks(it->status(), "scan table '" + schema.name + "'");
}

// --- Checkpoints and maintenance ---------------------------------------------

Status ShardStore::Impl::CreateCheckpoint(const std::string& dir) const {
  RETURN_IF_ERROR(CheckWritable("CreateCheckpoint"));
  std::error_code ec;
  if (fs::exists(dir, ec)) return Status::AlreadyExists("checkpoint dir " + dir + " exists");
  rocksdb::Checkpoint* raw = nullptr;
  RETURN_IF_ERROR(FromRocks(rocksdb::Checkpoint::Create(db_.get(), &raw), "checkpoint"));
  std::unique_ptr<rocksdb::Checkpoint> cp(raw);
  RETURN_IF_ERROR(FromRocks(cp->CreateCheckpoint(dir), "create checkpoint in " + dir));

  // Describe what the checkpoint holds by reading it back, so the manifest is
  // exact even while batches keep arriving.
  auto cleanup_on_error = [&dir](Status s) {
    if (!s.ok()) {
      std::error_code rm_ec;
      fs::remove_all(dir, rm_ec);
    }
    return s;
  };
  CheckpointManifest m;
  {
    ShardStoreOptions o;
    o.read_only = true;
    o.check_identity = false;
    o.block_cache_mb = 1;
    o.row_cache_mb = 0;
    std::unique_ptr<ShardStore> snapshot;
    RETURN_IF_ERROR(cleanup_on_error(ShardStore::Open(o, dir, &snapshot)));
    m.format_version = kStorageFormatVersion;
    m.identity = snapshot->identity();
    m.tables = snapshot->ListTables();
    m.applied_clocks = snapshot->AppliedClocks();
    m.shard_clock = snapshot->ShardClock();
  }
  m.created_unix_ms = std::chrono::duration_cast<std::chrono::milliseconds>(
                          std::chrono::system_clock::now().time_since_epoch())
                          .count();
  RETURN_IF_ERROR(cleanup_on_error(WriteCheckpointManifest(dir, m)));
  LOG(INFO) << "checkpoint of " << dir_ << " written to " << dir << " at shard clock "
            << m.shard_clock;
  return Status::OK();
}

Status ShardStore::Impl::Flush() {
  RETURN_IF_ERROR(CheckWritable("Flush"));
  return FromRocks(db_->Flush(rocksdb::FlushOptions()), "flush " + dir_);
}

Status ShardStore::Impl::ApproximateSize(uint64_t* disk_bytes, uint64_t* estimated_keys) const {
  std::string begin = sf::TableRowsBegin(0);
  std::string end = sf::KeySpaceEnd(sf::kRowPrefix);
  rocksdb::Range range(begin, end);
  rocksdb::SizeApproximationOptions so;
  so.include_memtables = true;
  so.include_files = true;
  RETURN_IF_ERROR(
      FromRocks(db_->GetApproximateSizes(so, db_->DefaultColumnFamily(), &range, 1, disk_bytes),
                "approximate size"));
  if (!db_->GetIntProperty("rocksdb.estimate-num-keys", estimated_keys)) *estimated_keys = 0;
  return Status::OK();
}

Status ShardStore::Impl::ApproximateTableSize(uint32_t table, uint64_t* bytes) const {
  ASSIGN_OR_RETURN(std::shared_ptr<const TableEntry> e, Lookup(table));
  std::string begin = sf::TableRowsBegin(table);
  std::string end = sf::TableRowsEnd(table);
  rocksdb::Range range(begin, end);
  rocksdb::SizeApproximationOptions so;
  so.include_memtables = true;
  so.include_files = true;
  return FromRocks(db_->GetApproximateSizes(so, db_->DefaultColumnFamily(), &range, 1, bytes),
                   "approximate size of table '" + e->schema.name + "'");
}

}  // namespace pace
