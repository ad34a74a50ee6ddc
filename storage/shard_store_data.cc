// ShardStore: batch application, reads, checkpoints and size estimates.
#include <glog/logging.h>
#include <rocksdb/iterator.h>
#include <rocksdb/slice.h>
#include <rocksdb/sst_file_reader.h>
#include <rocksdb/utilities/checkpoint.h>
#include <rocksdb/write_batch.h>

#include <algorithm>
#include <chrono>
#include <deque>
#include <filesystem>
#include <fstream>
#include <memory>
#include <set>
#include <sstream>
#include <string>
#include <unordered_map>
#include <vector>

#include "common/replace_file.h"
#include "consistency/batch_rule.h"
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

std::string_view SliceView(const rocksdb::Slice& s) { return std::string_view(s.data(), s.size()); }

// Per-delta bytes a WriteBatch spends besides the operand: tag, varint
// lengths, record type, key.
constexpr size_t kBatchOverheadPerDelta = 1 + 1 + 5 + 5 + sf::kRowKeySize;

}  // namespace

// --- Writes -------------------------------------------------------------------

Status ShardStore::Impl::ApplyBatches(const std::vector<BatchRequest>& batches,
                                      std::vector<BatchResult>* results) {
  PACE_CHECK_STORE_THREAD("ApplyBatches");
  results->assign(batches.size(), BatchResult{});
  {
    Status w = CheckWritable("ApplyBatch");
    if (!w.ok()) {
      for (BatchResult& r : *results) r.status = w;
      return Status::OK();
    }
  }
  MutexLock write_lock(&write_mu_);
  if (!failed_.ok()) {
    // Never call RocksDB's Write again before Recover (shard_store_recovery.cc).
    for (BatchResult& r : *results) r.status = failed_;
    return failed_;
  }
  const auto t_start = std::chrono::steady_clock::now();
  AdmittedGroup group;
  AdmitLocked(batches, results, &group);
  if (group.empty()) return Status::OK();  // nothing to write
  Status written = WriteAdmittedLocked(&group);
  if (!written.ok()) {
    // Nothing was written: every batch that would have been fails.
    for (BatchResult& r : *results) {
      if (r.status.ok() && !r.duplicate) r.status = written;
    }
    return written;
  }
  if (VLOG_IS_ON(2)) {
    VLOG(2) << dir_ << ": group of " << group.clocks.size() << " batch(es), " << group.deltas.size()
            << " deltas in "
            << std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t_start)
                   .count()
            << " ms";
  }
  return Status::OK();
}

Status ShardStore::Impl::WriteAdmittedLocked(AdmittedGroup* group_ptr) {
  AdmittedGroup& group = *group_ptr;
  // Row-key order (deltas of one row in group order): inserting keys in order
  // lets the memtable start each insert from the previous one's position
  // (memtable_insert_with_hint_prefix_extractor in shard_store.cc), and the
  // clock log's record is sorted; the row merges see each row's deltas in the
  // same order either way.
  auto key_less = [](const GroupDelta& x, const GroupDelta& y) {
    if (x.table != y.table) return x.table < y.table;
    if (x.row != y.row) return x.row < y.row;
    return x.seq < y.seq;
  };
  // A kept part's undo record: the group's clock log record if the group is
  // that part alone (its deltas are written once), else a file written
  // before the commit that points to it, encoded before the sort.
  if (!group.undo.puts.empty()) {
    if (UndoInLogLocked(group)) {
      group.undo.puts[0].log.in_log = true;
    } else {
      EncodeUndoRecords(&group);
    }
  }
  if (!std::is_sorted(group.deltas.begin(), group.deltas.end(), key_less)) {
    std::sort(group.deltas.begin(), group.deltas.end(), key_less);
  }
  if (!group.undo.puts.empty()) {
    Status files = WriteUndoFilesLocked(group.undo);
    if (!files.ok()) return MarkFailedLocked(files, "ApplyBatches (undo records)");
  }
  if (log_mode_) {
    std::vector<ClockLogEntry> deltas(group.deltas.size());
    for (size_t k = 0; k < group.deltas.size(); ++k) {
      const GroupDelta& d = group.deltas[k];
      deltas[k] = ClockLogEntry{d.table, d.row, d.bytes};
    }
    RETURN_IF_ERROR(WriteGroupToLogLocked(deltas, group.clocks, group.import_record, &group.undo));
  } else {
    std::vector<CacheOp> ops;
    std::string put_sums;
    RETURN_IF_ERROR(BuildLocked(group, &ops, &put_sums));
    RETURN_IF_ERROR(CommitLocked(group, ops, put_sums));
  }
  if (!group.undo.clears.empty()) RemoveUndoFilesLocked(group.undo);
  return Status::OK();
}

void ShardStore::Impl::AdmitLocked(const std::vector<BatchRequest>& batches,
                                   std::vector<BatchResult>* results, AdmittedGroup* group) {
  // Only writers change the catalog, and they hold write_mu_: entries found
  // here stay valid for the whole group.
  ReaderLock catalog_lock(&catalog_mu_);
  for (size_t b = 0; b < batches.size(); ++b) {
    const BatchRequest& req = batches[b];
    BatchResult& res = (*results)[b];
    const ClientId client = req.client;
    const bool import = req.import_record != nullptr;
    if (!import && client >= identity_.num_clients) {
      res.status =
          Status::InvalidArgument("client id " + std::to_string(client) + " is not in [0, " +
                                  std::to_string(identity_.num_clients) + ")");
      continue;
    }
    if (!import && req.clock < 0) {
      res.status = Status::InvalidArgument("negative clock " + std::to_string(req.clock));
      continue;
    }
    // An import has no client and no clock: the deltas only.
    auto nc = group->next.find(client);
    const AppliedPosition applied =
        import ? AppliedPosition{req.clock, req.part}
        : nc != group->next.end()
            ? nc->second
            : AppliedPosition{applied_[client].load(std::memory_order_relaxed),
                              applied_parts_[client].load(std::memory_order_relaxed)};
    const BatchId id{req.clock, req.part, req.more};
    res.admission = ClassifyBatch(applied, id);
    res.duplicate = res.admission == BatchAdmission::kDuplicate ||
                    res.admission == BatchAdmission::kCompletesClock;
    if (res.admission == BatchAdmission::kGap) {
      res.status = Status::FailedPrecondition(
          "clock gap: client " + std::to_string(client) + " sent its batch for clock " +
          std::to_string(req.clock) +
          (req.part > 0 || req.more ? " part " + std::to_string(req.part) : std::string()) +
          " but this shard has applied only clocks < " + std::to_string(applied.clock) +
          (applied.parts > 0 ? " and " + std::to_string(applied.parts) + " part(s) of clock " +
                                   std::to_string(applied.clock)
                             : std::string()));
      continue;
    }
    const size_t first_delta = group->deltas.size();
    if (res.admission == BatchAdmission::kApply) {
      res.status = AdmitDeltasLocked(*req.deltas, group);
      if (!res.status.ok()) continue;
      if (import) {
        group->import_record = req.import_record;
        continue;
      }
    }
    if (res.admission == BatchAdmission::kDuplicate) continue;
    // Applied, or a last part that completes the clock without its deltas.
    const AppliedPosition next = PositionAfter(applied, id, res.admission);
    group->next[client] = next;
    ClockUpdate update{client, next.clock, next.parts};
    NoteUndoLocked(req, res.admission, applied, first_delta, group, &update);
    group->clocks.push_back(update);
  }
}

Status ShardStore::Impl::AdmitDeltasLocked(const std::vector<RowDelta>& deltas,
                                           AdmittedGroup* group) const {
  const size_t group_begin = group->deltas.size();
  const size_t stripped_begin = group->stripped_rows.size();
  const TableEntry* entry = nullptr;
  size_t batch_reserve = 0;
  Status st;
  // A model-scale batch holds hundreds of thousands of deltas: grown one by
  // one, the group's vector was copied a dozen times on the writer.
  // (Doubling at least: a group of many batches must not grow it per batch.)
  if (group->deltas.capacity() < group_begin + deltas.size()) {
    group->deltas.reserve(std::max(group_begin + deltas.size(), 2 * group->deltas.capacity()));
  }
  for (size_t i = 0; i < deltas.size(); ++i) {
    const RowDelta& d = deltas[i];
    if (entry == nullptr || entry->schema.id != d.table) {
      auto it = by_id_.find(d.table);
      if (it == by_id_.end()) {
        st = Status::InvalidArgument("delta " + std::to_string(i) + " names unknown table id " +
                                     std::to_string(d.table));
        break;
      }
      entry = it->second.get();
    }
    Status valid = ValidateRow(entry->format, d.bytes);
    if (!valid.ok()) {
      st = Status::InvalidArgument("delta " + std::to_string(i) + " (table '" + entry->schema.name +
                                   "', row " + std::to_string(d.row) + "): " + valid.message());
      break;
    }
    std::string_view bytes = d.bytes;
    if (entry->format.kind == RowKind::kSparse && SparseHasZero(entry->format, bytes)) {
      // Stored values never hold zero entries; strip them here (rare).
      StripSparseZeros(entry->format, bytes, &group->stripped_rows.emplace_back());
      bytes = group->stripped_rows.back();
    }
    group->deltas.push_back(
        GroupDelta{d.table, group->seq + static_cast<uint32_t>(i), d.row, entry, bytes});
    batch_reserve += bytes.size() + kBatchOverheadPerDelta;
  }
  if (!st.ok()) {
    // A refused batch contributes nothing.
    group->deltas.resize(group_begin);
    group->stripped_rows.resize(stripped_begin);
    return st;
  }
  group->seq += static_cast<uint32_t>(deltas.size());
  group->reserve += batch_reserve + 32;
  return Status::OK();
}

Status ShardStore::Impl::BuildLocked(const AdmittedGroup& group, std::vector<CacheOp>* ops,
                                     std::string* put_sums) {
  // The batch reuses the previous group's buffer: a model-scale group is
  // ~130 MB, and a fresh buffer of that size is mapped and faulted in page by
  // page on every clock.
  rocksdb::WriteBatch& batch = batch_;
  batch.Clear();
  if (batch.Data().capacity() < group.reserve) batch = rocksdb::WriteBatch(group.reserve);
  write_batch_bytes_.store(batch.Data().capacity(), std::memory_order_relaxed);
  // Nothing kept after a failure.
  auto fail = [this](const rocksdb::Status& s) REQUIRES(write_mu_) {
    batch_ = rocksdb::WriteBatch();
    write_batch_bytes_.store(batch_.Data().capacity(), std::memory_order_relaxed);
    return FromRocks(s, "build batch");
  };
  const bool cache = row_cache_ != nullptr;
  // Cached dense rows changed once by this group are written as a Put of their
  // new stored value (the cached sum plus the delta, PutSum) instead of one
  // more merge operand: the Put supersedes the row's older records, so a
  // later read from RocksDB finds one value instead of merging an operand per
  // clock, and flushes and compactions drop the superseded ones. The cached
  // sum is the published state, which only this (serialized) writer changes.
  // ops: every delta, for Publish (cache on).
  if (cache) {
    ops->reserve(group.deltas.size());
    size_t bytes = 0;
    for (const GroupDelta& d : group.deltas) bytes += d.bytes.size();
    put_sums->reserve(bytes);
  }
  char key[sf::kRowKeySize];
  const rocksdb::Slice key_slice(key, sf::kRowKeySize);
  constexpr size_t kRowsPerCacheLock = 256;  // readers may fill the cache in between
  std::unique_ptr<MutexLock> cache_lock;
  const std::vector<GroupDelta>& deltas = group.deltas;
  for (size_t k = 0; k < deltas.size(); ++k) {
    const GroupDelta& d = deltas[k];
    const TableEntry* entry = d.entry;
    sf::EncodeRowKey(d.table, d.row, key);
    if (cache) ops->push_back(CacheOp{entry, d.table, d.row, d.bytes});
    CachedRow* cached = nullptr;
    if (cache && entry->format.kind == RowKind::kDense) {
      auto same_row = [&deltas, &d](size_t j) {
        return deltas[j].table == d.table && deltas[j].row == d.row;
      };
      const bool once =
          (k == 0 || !same_row(k - 1)) && (k + 1 == deltas.size() || !same_row(k + 1));
      if (once) {
        if (cache_lock == nullptr || k % kRowsPerCacheLock == 0) {
          cache_lock.reset();
          cache_lock = std::make_unique<MutexLock>(&cache_mu_);
        }
        cached = row_cache_->Peek(d.table, d.row);
      }
    }
    rocksdb::Status s;
    if (cached != nullptr) {
      const char* sum = PutSum(d, *cached, &ops->back(), put_sums);
      const rocksdb::Slice value_parts[2] = {rocksdb::Slice(&entry->tag, 1),
                                             rocksdb::Slice(sum, d.bytes.size())};
      s = batch.Put(rocksdb::SliceParts(&key_slice, 1), rocksdb::SliceParts(value_parts, 2));
    } else {
      const rocksdb::Slice value_parts[2] = {rocksdb::Slice(&entry->tag, 1),
                                             rocksdb::Slice(d.bytes.data(), d.bytes.size())};
      s = batch.Merge(rocksdb::SliceParts(&key_slice, 1), rocksdb::SliceParts(value_parts, 2));
    }
    if (!s.ok()) {
      cache_lock.reset();
      return fail(s);
    }
  }
  cache_lock.reset();
  for (const ClockUpdate& c : group.clocks) {
    rocksdb::Status s = batch.Put(sf::ClockKey(c.client), sf::EncodeClock(c.applied, c.parts));
    if (!s.ok()) return fail(s);
  }
  if (group.import_record != nullptr) {
    rocksdb::Status s = batch.Put(sf::kLastImportKey, *group.import_record);
    if (!s.ok()) return fail(s);
  }
  rocksdb::Status s = AddUndoWrites(group.undo, &batch);
  if (!s.ok()) return fail(s);
  return Status::OK();
}

const char* ShardStore::Impl::PutSum(const GroupDelta& d, const CachedRow& cached, CacheOp* op,
                                     std::string* put_sums) {
  // The merge operator's arithmetic (row_merge.cc): a lone operand is the
  // sum; a later one is added to it. The sums go one after another into
  // put_sums, which Publish copies into the cache without computing them
  // again.
  const RowFormat& f = d.entry->format;
  const size_t offset = put_sums->size();
  if (cached.written) {
    put_sums->append(cached.sum);
    AddDenseUnaligned(f.type, put_sums->data() + offset, d.bytes.data(), f.width);
  } else {
    put_sums->append(d.bytes.data(), d.bytes.size());
  }
  op->put = static_cast<int64_t>(offset);
  return put_sums->data() + offset;
}

Status ShardStore::Impl::CommitLocked(const AdmittedGroup& group, const std::vector<CacheOp>& ops,
                                      const std::string& put_sums) {
  // One write for the whole group, then make it visible.
  rocksdb::WriteBatch& batch = batch_;
  Status written =
      FromRocks(WriterDb()->Write(write_options_, &batch),
                "apply a group of " + std::to_string(group.clocks.size()) + " batch(es)");
  if (!written.ok()) {
    batch = rocksdb::WriteBatch();  // nothing kept after a failure
    write_batch_bytes_.store(batch.Data().capacity(), std::memory_order_relaxed);
    return MarkFailedLocked(written, "ApplyBatches");
  }
  const size_t batch_bytes = batch.GetDataSize();
  TrimWriteBatchLocked();
  Publish(ops, put_sums, group.clocks);
  MaybeSwitchMemtableLocked(batch_bytes);
  return Status::OK();
}

void ShardStore::Impl::TrimWriteBatchLocked() {
  // Kept up to retained_write_batch_mb and never more than the memtable budget,
  // so a store sized from a memory budget (small write buffers) keeps little.
  const size_t retain_mb =
      std::min<size_t>(options_.retained_write_batch_mb,
                       options_.write_buffer_mb *
                           static_cast<size_t>(std::max(1, options_.max_write_buffer_number)));
  if (batch_.Data().capacity() > (retain_mb << 20)) batch_ = rocksdb::WriteBatch();
  batch_.Clear();
  write_batch_bytes_.store(batch_.Data().capacity(), std::memory_order_relaxed);
}

void ShardStore::Impl::MaybeSwitchMemtableLocked(size_t group_bytes) {
  // Every clock writes each row it changed again (a Put of the new sum, or a
  // merge operand), and without in-place updates (they ignore snapshots) each
  // is a new skip-list entry next to the row's older ones. A memtable holding
  // many clocks' versions of the same rows makes every insert walk past
  // them, out of cache: with a 64 MiB memtable and 380 KB groups (the
  // push-latency job: 10k x 4k, rank 16) inserting 4.5k rows took 10-20 ms
  // of the writer's 12-22 ms per group, and pushes wait for it. So once the
  // active memtable holds more than memtable_switch_groups groups of this
  // size, it is switched (flushed in the background: the flush keeps only the newest
  // version of each row). Groups larger than write_buffer_mb divided by that
  // (model scale) never trigger it: RocksDB's own size limit applies.
  // Skipped while an earlier memtable is still being flushed, so it never
  // adds a write stall.
  if (options_.memtable_switch_groups == 0) return;
  constexpr size_t kMinSwitchBytes = size_t{1} << 20;
  const size_t limit = std::max(kMinSwitchBytes, options_.memtable_switch_groups * group_bytes);
  if (limit >= (options_.write_buffer_mb << 20)) return;
  uint64_t active = 0, immutable = 0;
  rocksdb::DB* db = WriterDb();
  if (!db->GetIntProperty(rocksdb::DB::Properties::kCurSizeActiveMemTable, &active) ||
      active < limit) {
    return;
  }
  if (!db->GetIntProperty(rocksdb::DB::Properties::kNumImmutableMemTable, &immutable) ||
      immutable > 0) {
    return;
  }
  rocksdb::FlushOptions fo;
  fo.wait = false;
  fo.allow_write_stall = true;  // checked above: no memtable is waiting for a flush
  rocksdb::Status s = db->Flush(fo);
  if (!s.ok()) VLOG(1) << dir_ << ": switching the memtable failed: " << s.ToString();
}

bool AddToCachedRow(const RowFormat& f, CachedRow* c, std::string_view delta) {
  if (!c->written) {
    c->sum.assign(delta.data(), delta.size());
    c->written = true;
    return true;
  }
  if (f.kind == RowKind::kDense) {
    AddDenseUnaligned(f.type, c->sum.data(), delta.data(), f.width);
    return false;
  }
  AddRowUnchecked(f, &c->sum, delta);
  return true;
}

void ShardStore::Impl::Publish(const std::vector<CacheOp>& ops, const std::string& put_sums,
                               const std::vector<ClockUpdate>& clocks) {
  ViewWriterLock view_lock(&view_mu_);
  RefreshSnapshotLocked();
  for (const ClockUpdate& c : clocks) SetClockState(c);
  if (row_cache_ == nullptr) return;
  MutexLock cache_lock(&cache_mu_);
  // Every cached row the group touches gets its deltas in WriteBatch order with
  // the merge operator's arithmetic; a Put row takes the sum its Put holds
  // (computed from the published state, which a row cached meanwhile by a
  // reader also holds). Recharging may evict: only after every update is in.
  std::vector<size_t> grown;
  for (size_t i = 0; i < ops.size(); ++i) {
    const CacheOp& op = ops[i];
    CachedRow* c = row_cache_->Peek(op.table, op.row);
    if (c == nullptr) continue;
    const RowFormat& f = op.entry->format;
    if (op.put >= 0) {
      // Same size as the cached sum when it is written: no reallocation.
      if (!c->written) grown.push_back(i);
      c->sum.assign(put_sums.data() + op.put, op.bytes.size());
      c->written = true;
    } else if (AddToCachedRow(f, c, op.bytes)) {
      grown.push_back(i);
    }
  }
  for (size_t i : grown) row_cache_->Recharge(ops[i].table, ops[i].row);
}

// --- Reads --------------------------------------------------------------------

StatusOr<std::string> ShardStore::Impl::LastImport() const {
  PACE_CHECK_STORE_THREAD("LastImport");
  ReaderLock db_lock(&db_mu_);
  if (db_ == nullptr) return Status::Unavailable("the store in " + dir_ + " is being reopened");
  std::string v;
  rocksdb::Status s = db_->Get(rocksdb::ReadOptions(), sf::kLastImportKey, &v);
  if (s.IsNotFound()) return std::string();
  RETURN_IF_ERROR(FromRocks(s, "read the last import of " + dir_));
  return v;
}

namespace {

// The cache entry of a row read from the store (payload: its validated stored
// sum, or nullptr when it has no record). The initializer's value is not
// computed here: a row without a record is a small entry (the writer finds it
// when the row's first delta comes, without reading RocksDB), and a written
// row gets it when a read first composes it (ComposeCachedRow).
CachedRow MakeCachedRow(const std::string_view* payload) {
  CachedRow c;
  if (payload != nullptr) {
    c.written = true;
    c.sum.assign(payload->data(), payload->size());
  }
  return c;
}

// Dense tables with a nonzero initializer: a value is the initializer plus the sum.
bool HasInitializer(const TableSchema& s) {
  return s.kind == RowKind::kDense && s.init.kind != InitKind::kZeros;
}

// What ComposeRow returns for the stored state `c` holds, computed the same
// way. A written row of a table with an initializer keeps the initializer's
// value in its entry from its first read on (returns true: the entry grew and
// must be recharged); a row without a record is composed without keeping it.
bool ComposeCachedRow(const TableSchema& s, uint64_t row, CachedRow* c, std::string* out) {
  if (!c->written) {
    InitRow(s, row, out);
    return false;
  }
  if (!HasInitializer(s)) {
    out->assign(c->sum);
    return false;
  }
  const bool grew = c->init.empty();
  if (grew) InitRow(s, row, &c->init);
  out->assign(c->init);
  AddDenseUnaligned(s.type, out->data(), c->sum.data(), s.width);
  return grew;
}

// Composes `c` into values[i], or marks the row absent (when `absent` is set
// and the row has no record). Returns ComposeCachedRow's "grew".
bool ComposeOrMarkAbsent(const TableSchema& s, uint64_t row, CachedRow* c, size_t i,
                         std::string* values, uint8_t* absent) {
  if (absent != nullptr && !c->written) {
    absent[i] = 1;
    values[i].clear();
    return false;
  }
  return ComposeCachedRow(s, row, c, &values[i]);
}

}  // namespace

Status ShardStore::Impl::ReadFromStore(const TableEntry& e, const uint64_t* rows, size_t n,
                                       std::string* values, std::vector<CachedRow>* fill,
                                       uint8_t* absent) const {
  if (fill != nullptr) fill->resize(n);
  if (n == 0) return Status::OK();
  const TableSchema& schema = e.schema;
  rocksdb::DB* db = ViewDb();
  if (db == nullptr) {
    return Status::Unavailable("the store in " + dir_ + " is being reopened after a failed write");
  }
  rocksdb::ReadOptions ro;
  ro.snapshot = snapshot_;  // not a write that is still being published
  // RocksDB's MultiGet keeps up to kBatch keys' contexts inline and grows a
  // vector (without reserving it) for more: reads of thousands of rows spent
  // a quarter of the shard readers' time reallocating it and faulting in its
  // pages (8a, clock 0). So rows are read kBatch at a time, all on the stack.
  constexpr size_t kBatch = 32;  // rocksdb::MultiGetContext::MAX_BATCH_SIZE
  char key_bytes[kBatch * sf::kRowKeySize];
  rocksdb::Slice keys[kBatch];
  rocksdb::PinnableSlice stored[kBatch];
  rocksdb::Status statuses[kBatch];
  for (size_t at = 0; at < n; at += kBatch) {
    const size_t m = std::min(kBatch, n - at);
    for (size_t j = 0; j < m; ++j) {
      char* k = key_bytes + j * sf::kRowKeySize;
      sf::EncodeRowKey(schema.id, rows[at + j], k);
      keys[j] = rocksdb::Slice(k, sf::kRowKeySize);
      stored[j].Reset();
    }
    db->MultiGet(ro, db->DefaultColumnFamily(), m, keys, stored, statuses);
    for (size_t j = 0; j < m; ++j) {
      const size_t i = at + j;
      std::string_view payload;
      const std::string_view* p = nullptr;
      if (!statuses[j].IsNotFound()) {
        std::string where = "row " + std::to_string(rows[i]) + " of table '" + schema.name + "'";
        RETURN_IF_ERROR(FromRocks(statuses[j], "read " + where));
        RETURN_IF_ERROR(ParseStoredRow(e.format, SliceView(stored[j]), &payload).WithPrefix(where));
        p = &payload;
      }
      if (fill != nullptr) {
        (*fill)[i] = MakeCachedRow(p);
      } else if (p == nullptr && absent != nullptr) {
        absent[i] = 1;
        values[i].clear();
      } else {
        ComposeRow(schema, rows[i], p, &values[i]);
      }
    }
  }
  return Status::OK();
}

Status ShardStore::Impl::CachedRead(const TableEntry& e, const uint64_t* rows, size_t n,
                                    std::string* values, uint8_t* absent) const {
  const TableSchema& schema = e.schema;
  const uint32_t table = schema.id;
  std::vector<size_t> missing;
  {
    MutexLock cache_lock(&cache_mu_);
    for (size_t i = 0; i < n; ++i) {
      CachedRow* c = row_cache_->Lookup(table, rows[i]);
      if (c == nullptr || c->delta_only) {
        missing.push_back(i);
      } else if (ComposeOrMarkAbsent(schema, rows[i], c, i, values, absent)) {
        row_cache_->Recharge(table, rows[i]);
      }
    }
  }
  if (missing.empty()) return Status::OK();

  // Misses are read at the view's snapshot, which a group being written does
  // not change (its records are newer), and Publish adds that group to every
  // row cached by then. A row some other reader cached meanwhile is taken
  // from the cache; both describe the view's state. A delta-only row (its
  // deltas not yet written back, docs/storage-format.md section 15) becomes
  // whole: RocksDB's value plus its pending sum, with the merge operator's
  // arithmetic, which is what its write-back will store.
  std::vector<uint64_t> ids(missing.size());
  for (size_t j = 0; j < missing.size(); ++j) ids[j] = rows[missing[j]];
  std::vector<CachedRow> fill;
  RETURN_IF_ERROR(ReadFromStore(e, ids.data(), ids.size(), nullptr, &fill, nullptr));
  MutexLock cache_lock(&cache_mu_);
  for (size_t j = 0; j < missing.size(); ++j) {
    CachedRow* c = row_cache_->Peek(table, ids[j]);
    if (c != nullptr && c->delta_only) {
      if (c->written) AddToCachedRow(e.format, &fill[j], c->sum);
      *c = std::move(fill[j]);
      ComposeOrMarkAbsent(schema, ids[j], c, missing[j], values, absent);
      row_cache_->Recharge(table, ids[j]);
    } else if (c != nullptr) {
      if (ComposeOrMarkAbsent(schema, ids[j], c, missing[j], values, absent)) {
        row_cache_->Recharge(table, ids[j]);
      }
    } else {
      ComposeOrMarkAbsent(schema, ids[j], &fill[j], missing[j], values, absent);
      row_cache_->Insert(table, ids[j], std::move(fill[j]));
    }
  }
  return Status::OK();
}

Status ShardStore::Impl::ReadRows(uint32_t table, const uint64_t* rows, size_t n,
                                  std::string* values, uint8_t* absent) const {
  ASSIGN_OR_RETURN(std::shared_ptr<const TableEntry> e, Lookup(table));
  if (e->dropped.load(std::memory_order_relaxed)) {
    return Status::NotFound("unknown table id " + std::to_string(table));
  }
  if (absent != nullptr) std::fill(absent, absent + n, uint8_t{0});
  if (row_cache_ != nullptr) return CachedRead(*e, rows, n, values, absent);
  return ReadFromStore(*e, rows, n, values, nullptr, absent);
}

Status ShardStore::Impl::Get(uint32_t table, uint64_t row, std::string* value) const {
  PACE_CHECK_STORE_THREAD("Get");
  ViewReaderLock view_lock(&view_mu_);
  return ReadRows(table, &row, 1, value);
}

Status ShardStore::Impl::MultiGet(uint32_t table, const std::vector<uint64_t>& rows,
                                  std::vector<std::string>* values) const {
  PACE_CHECK_STORE_THREAD("MultiGet");
  values->resize(rows.size());
  ViewReaderLock view_lock(&view_mu_);
  return ReadRows(table, rows.data(), rows.size(), values->data());
}

RowCacheStats ShardStore::Impl::row_cache_stats() const {
  RowCacheStats st;
  if (row_cache_ == nullptr) return st;
  MutexLock cache_lock(&cache_mu_);
  st.capacity_bytes = row_cache_->capacity();
  st.bytes = row_cache_->bytes();
  st.entries = row_cache_->entries();
  st.hits = row_cache_->counters().hits;
  st.misses = row_cache_->counters().misses;
  st.evictions = row_cache_->counters().evictions;
  return st;
}

StoreMemoryStats ShardStore::Impl::memory_stats() const {
  // In-memory properties only (no I/O): callable from any thread. RocksDB's
  // figures are 0 while the store is being reopened (never waits for it).
  StoreMemoryStats st;
  if (db_mu_.TryReaderLock()) {
    uint64_t v = 0;
    if (db_ != nullptr) {
      if (db_->GetIntProperty(rocksdb::DB::Properties::kSizeAllMemTables, &v)) {
        st.memtable_bytes = v;
      }
      if (db_->GetIntProperty(rocksdb::DB::Properties::kEstimateTableReadersMem, &v)) {
        st.table_reader_bytes = v;
      }
    }
    db_mu_.ReaderUnlock();
  }
  if (block_cache_ != nullptr) {
    st.block_cache_bytes = block_cache_->GetUsage();
    st.block_cache_capacity = block_cache_->GetCapacity();
  }
  if (row_cache_ != nullptr) {
    MutexLock cache_lock(&cache_mu_);
    st.row_cache_bytes = row_cache_->bytes();
    st.row_cache_capacity = row_cache_->capacity();
  }
  st.write_batch_bytes = write_batch_bytes_.load(std::memory_order_relaxed);
  return st;
}

Status ShardStore::Impl::Scan(uint32_t table, uint64_t start_row,
                              const std::function<bool(uint64_t, std::string_view)>& fn) const {
  PACE_CHECK_STORE_THREAD("Scan");
  ReaderLock db_lock(&db_mu_);
  if (db_ == nullptr) return Status::Unavailable("the store in " + dir_ + " is being reopened");
  ASSIGN_OR_RETURN(std::shared_ptr<const TableEntry> e, Lookup(table));
  // The iterator reads one consistent state (its own snapshot): whole groups
  // or none of them. The rows held in memory and not yet written back (the
  // row cache's dirty rows, docs/storage-format.md section 15) are newer than
  // RocksDB's; they are copied under the same view and merged in row order.
  const TableSchema& schema = e->schema;
  const bool zero_init = schema.init.kind == InitKind::kZeros || schema.kind == RowKind::kSparse;
  std::string end = sf::TableRowsEnd(table);
  rocksdb::Slice upper(end);
  rocksdb::ReadOptions ro;
  ro.iterate_upper_bound = &upper;
  ro.readahead_size = 2 << 20;
  // (row, stored sum), sorted; for a delta-only row the sum of its pending
  // deltas, added to RocksDB's value.
  struct DirtyRow {
    uint64_t row;
    std::string sum;
    bool delta_only;
  };
  std::vector<DirtyRow> dirty;
  const rocksdb::Snapshot* snapshot = nullptr;
  {
    ViewReaderLock view_lock(&view_mu_);
    snapshot = db_->GetSnapshot();
    if (row_cache_ != nullptr) {
      MutexLock cache_lock(&cache_mu_);
      row_cache_->ForEachDirty([&](uint32_t t, uint64_t row, const CachedRow& v) {
        if (t == table && v.written && row >= start_row) {
          dirty.push_back(DirtyRow{row, v.sum, v.delta_only});
        }
      });
    }
  }
  struct SnapshotReleaser {
    rocksdb::DB* db;
    const rocksdb::Snapshot* s;
    ~SnapshotReleaser() { db->ReleaseSnapshot(s); }
  } releaser{db_.get(), snapshot};
  ro.snapshot = snapshot;
  std::sort(dirty.begin(), dirty.end(),
            [](const DirtyRow& a, const DirtyRow& b) { return a.row < b.row; });
  size_t next_dirty = 0;
  std::unique_ptr<rocksdb::Iterator> it(db_->NewIterator(ro));
  std::string composed;
  auto emit = [&](uint64_t row, std::string_view payload) {
    if (zero_init) return fn(row, payload);
    ComposeRow(schema, row, &payload, &composed);
    return fn(row, composed);
  };
  for (it->Seek(sf::MakeRowKey(table, start_row)); it->Valid(); it->Next()) {
    uint32_t key_table;
    uint64_t row;
    if (!sf::DecodeRowKey(SliceView(it->key()), &key_table, &row) || key_table != table) {
      return Status::Corruption("malformed row key in table '" + schema.name + "'");
    }
    for (; next_dirty < dirty.size() && dirty[next_dirty].row < row; ++next_dirty) {
      if (!emit(dirty[next_dirty].row, dirty[next_dirty].sum)) return Status::OK();
    }
    const bool is_dirty = next_dirty < dirty.size() && dirty[next_dirty].row == row;
    if (is_dirty && !dirty[next_dirty].delta_only) {
      if (!emit(row, dirty[next_dirty].sum)) return Status::OK();
      ++next_dirty;
      continue;
    }
    std::string_view payload;
    RETURN_IF_ERROR(
        ParseStoredRow(e->format, SliceView(it->value()), &payload)
            .WithPrefix("row " + std::to_string(row) + " of table '" + schema.name + "'"));
    if (is_dirty) {
      CachedRow whole;
      whole.written = true;
      whole.sum.assign(payload);
      AddToCachedRow(e->format, &whole, dirty[next_dirty++].sum);
      if (!emit(row, whole.sum)) return Status::OK();
      continue;
    }
    if (!emit(row, payload)) return Status::OK();
  }
  RETURN_IF_ERROR(FromRocks(it->status(), "scan table '" + schema.name + "'"));
  for (; next_dirty < dirty.size(); ++next_dirty) {
    if (!emit(dirty[next_dirty].row, dirty[next_dirty].sum)) return Status::OK();
  }
  return Status::OK();
}

// --- Checkpoints and maintenance ---------------------------------------------

Status ShardStore::Impl::CreateCheckpoint(const std::string& dir) {
  PACE_CHECK_STORE_THREAD("CreateCheckpoint");
  RETURN_IF_ERROR(CheckWritable("CreateCheckpoint"));
  // The checkpoint must hold every row: the rows held in memory are written
  // back first, and no group is committed until the checkpoint is taken.
  MutexLock write_lock(&write_mu_);
  if (log_mode_) {
    if (!failed_.ok()) return failed_;
    RETURN_IF_ERROR(WriteBackLocked("checkpoint"));
  }
  ReaderLock db_lock(&db_mu_);
  if (db_ == nullptr) return Status::Unavailable("the store in " + dir_ + " is being reopened");
  std::error_code ec;
  if (fs::exists(dir, ec)) return CheckpointDirExists(dir);
  // Built in DIR.partial and renamed into place with its manifest, so a
  // process killed meanwhile leaves no DIR, only a DIR.partial that the next
  // checkpoint into DIR removes.
  const std::string staging = CheckpointStagingDir(dir);
  fs::remove_all(staging, ec);
  rocksdb::Checkpoint* raw = nullptr;
  RETURN_IF_ERROR(FromRocks(rocksdb::Checkpoint::Create(db_.get(), &raw), "checkpoint"));
  std::unique_ptr<rocksdb::Checkpoint> cp(raw);
  RETURN_IF_ERROR(FromRocks(cp->CreateCheckpoint(staging), "create checkpoint in " + staging));

  // Describe what the checkpoint holds by reading it back, so the manifest is
  // exact even while batches keep arriving.
  auto cleanup_on_error = [&staging](Status s) {
    if (!s.ok()) {
      std::error_code rm_ec;
      fs::remove_all(staging, rm_ec);
    }
    return s;
  };
  RETURN_IF_ERROR(cleanup_on_error(CopyUndoFilesLocked(staging)));
  CheckpointManifest m;
  {
    std::unique_ptr<ShardStore> snapshot;
    RETURN_IF_ERROR(cleanup_on_error(ShardStore::OpenForInspection(staging, 1, &snapshot)));
    m.format_version = kStorageFormatVersion;
    m.identity = snapshot->identity();
    m.tables = snapshot->ListTables();
    m.applied_clocks = snapshot->AppliedClocks();
    m.shard_clock = snapshot->ShardClock();
  }
  m.created_unix_ms = std::chrono::duration_cast<std::chrono::milliseconds>(
                          std::chrono::system_clock::now().time_since_epoch())
                          .count();
  RETURN_IF_ERROR(cleanup_on_error(WriteCheckpointManifest(staging, m)));
  RETURN_IF_ERROR(cleanup_on_error(PublishCheckpointDir(staging, dir)));
  LOG(INFO) << "checkpoint of " << dir_ << " written to " << dir << " at shard clock "
            << m.shard_clock;
  return Status::OK();
}

Status ShardStore::Impl::VerifyChecksums() const {
  ReaderLock db_lock(&db_mu_);
  if (db_ == nullptr) return Status::Unavailable("the store in " + dir_ + " is not open");
  return FromRocks(db_->VerifyChecksum(), "verify the checksums of " + dir_);
}

namespace {

// The SST files verified at an earlier open (data dir file kVerifiedFileName):
// one "<name> <size>" line each. SST files never change once written, so a
// file of the same name and size needs no second read.
constexpr char kVerifiedFileName[] = "VERIFIED-SSTS";

std::set<std::pair<std::string, uint64_t>> ReadVerified(const std::string& path) {
  std::set<std::pair<std::string, uint64_t>> out;
  std::ifstream in(path);
  std::string name;
  uint64_t size = 0;
  while (in >> name >> size) out.emplace(name, size);
  return out;
}

}  // namespace

Status ShardStore::Impl::VerifyNewChecksums(size_t* verified, size_t* skipped) const {
  ReaderLock db_lock(&db_mu_);
  if (db_ == nullptr) return Status::Unavailable("the store in " + dir_ + " is not open");
  // A compaction finishing meanwhile must not delete a file being read.
  RETURN_IF_ERROR(FromRocks(db_->DisableFileDeletions(), "verify the checksums of " + dir_));
  struct Reenable {
    rocksdb::DB* db;
    ~Reenable() { db->EnableFileDeletions(/*force=*/false).PermitUncheckedError(); }
  } reenable{db_.get()};
  std::vector<rocksdb::LiveFileMetaData> files;
  db_->GetLiveFilesMetaData(&files);
  const std::string list = dir_ + "/" + kVerifiedFileName;
  const std::set<std::pair<std::string, uint64_t>> before = ReadVerified(list);
  const rocksdb::Options options = db_->GetOptions();
  std::ostringstream now;
  *verified = 0;
  *skipped = 0;
  for (const rocksdb::LiveFileMetaData& f : files) {
    std::string name = f.name;
    if (!name.empty() && name[0] == '/') name.erase(0, 1);
    if (before.count({name, f.size}) == 0) {
      rocksdb::SstFileReader reader(options);
      const std::string path = dir_ + "/" + name;
      rocksdb::Status s = reader.Open(path);
      if (s.ok()) s = reader.VerifyChecksum();
      if (!s.ok()) {
        return FromRocks(s, "verify the checksums of " + path);
      }
      ++*verified;
    } else {
      ++*skipped;
    }
    now << name << " " << f.size << "\n";
  }
  // The same files as the list holds: nothing to rewrite.
  if (*verified == 0 && *skipped == before.size()) return Status::OK();
  // Best effort, not synced: without the list (or with a stale one) the next
  // open reads every file again.
  ReplaceFile(list, now.str(), FileSync::kNone).IgnoreError();
  return Status::OK();
}

Status ShardStore::Impl::Flush() {
  PACE_CHECK_STORE_THREAD("Flush");
  RETURN_IF_ERROR(CheckWritable("Flush"));
  RETURN_IF_ERROR(WriteBack());  // the rows held in memory first
  ReaderLock db_lock(&db_mu_);
  if (db_ == nullptr) return Status::Unavailable("the store in " + dir_ + " is being reopened");
  return FromRocks(db_->Flush(rocksdb::FlushOptions()), "flush " + dir_);
}

Status ShardStore::Impl::ApproximateSize(uint64_t* disk_bytes, uint64_t* estimated_keys) const {
  PACE_CHECK_STORE_THREAD("ApproximateSize");
  ReaderLock db_lock(&db_mu_);
  if (db_ == nullptr) return Status::Unavailable("the store in " + dir_ + " is being reopened");
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
  *disk_bytes += DirtyRowBytes(0, true);  // rows held in memory, not yet in RocksDB
  return Status::OK();
}

uint64_t ShardStore::Impl::DirtyRowBytes(uint32_t table, bool all_tables) const {
  if (row_cache_ == nullptr) return 0;
  uint64_t bytes = 0;
  MutexLock cache_lock(&cache_mu_);
  row_cache_->ForEachDirty([&](uint32_t t, uint64_t, const CachedRow& v) {
    if (v.written && (all_tables || t == table)) bytes += sf::kRowKeySize + 1 + v.sum.size();
  });
  return bytes;
}

bool ShardStore::Impl::GetIntProperty(const std::string& name, uint64_t* value) const {
  // False while the store is being reopened (never waits for it).
  if (!db_mu_.TryReaderLock()) return false;
  const bool ok = db_ != nullptr && db_->GetIntProperty(name, value);
  db_mu_.ReaderUnlock();
  return ok;
}

Status ShardStore::Impl::ApproximateTableSize(uint32_t table, uint64_t* bytes) const {
  PACE_CHECK_STORE_THREAD("ApproximateTableSize");
  ReaderLock db_lock(&db_mu_);
  if (db_ == nullptr) return Status::Unavailable("the store in " + dir_ + " is being reopened");
  ASSIGN_OR_RETURN(std::shared_ptr<const TableEntry> e, Lookup(table));
  std::string begin = sf::TableRowsBegin(table);
  std::string end = sf::TableRowsEnd(table);
  rocksdb::Range range(begin, end);
  rocksdb::SizeApproximationOptions so;
  so.include_memtables = true;
  so.include_files = true;
  RETURN_IF_ERROR(
      FromRocks(db_->GetApproximateSizes(so, db_->DefaultColumnFamily(), &range, 1, bytes),
                "approximate size of table '" + e->schema.name + "'"));
  *bytes += DirtyRowBytes(table, false);  // rows held in memory, not yet in RocksDB
  return Status::OK();
}

}  // namespace pace
