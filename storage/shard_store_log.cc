// ShardStore: the clock-log write path (docs/storage-format.md section 15).
//
// A group commit appends one record of the group's deltas to the clock log,
// then writes the group's applied clocks and the log's new end to RocksDB
// (the commit point), then adds the deltas to the rows held in memory (the
// row cache's dirty rows). A row write-back puts every dirty row into one SST
// file that RocksDB ingests together with the log's next state, then starts
// the next log file. Recovery = the rows RocksDB holds + the committed log
// records after them.
#include <glog/logging.h>
#include <rocksdb/env.h>
#include <rocksdb/options.h>
#include <rocksdb/sst_file_writer.h>

#include <algorithm>
#include <chrono>
#include <cstring>
#include <filesystem>
#include <memory>
#include <string>
#include <vector>

#include "storage/key_format.h"
#include "storage/rocks_status.h"
#include "storage/row_merge.h"
#include "storage/shard_store.h"
#include "storage/shard_store_impl.h"

namespace pace {

namespace fs = std::filesystem;
namespace sf = storage_format;

namespace {

constexpr size_t kLogStateBytes = 32;

std::string EncodeLogState(uint64_t number, uint64_t end, uint64_t first_seq, uint64_t next_seq) {
  std::string v(kLogStateBytes, '\0');
  std::memcpy(v.data(), &number, 8);
  std::memcpy(v.data() + 8, &end, 8);
  std::memcpy(v.data() + 16, &first_seq, 8);
  std::memcpy(v.data() + 24, &next_seq, 8);
  return v;
}

// Rows handled under one hold of the cache lock, so readers filling the
// cache are not kept out for a whole model-scale group.
constexpr size_t kRowsPerCacheLock = 256;

double MsSince(std::chrono::steady_clock::time_point t) {
  return std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t).count();
}

}  // namespace

uint64_t ShardStore::Impl::LogLimitBytes(uint64_t dirty) const {
  if (options_.clock_log_mb > 0) return uint64_t{options_.clock_log_mb} << 20;
  // Eight times the rows the log changed, at least 64 MiB and at most four
  // times the row cache's budget. A write-back writes the dirty rows (an
  // eighth of the log's bytes at most, above the floor) and spares a restart
  // the replay of the whole log: a small model trained for many clocks (1.7
  // MB of rows, 2 MB of log a clock) would otherwise grow its log to the cap
  // (2 GiB by default), on disk and to replay. Four times would write the
  // dense shape's rows back in its third clock (8c: 305 MB of rows, 1.2 GB
  // of log; 1.9 s on the writer, the job at 0.17 of the baseline, not 0.25).
  const uint64_t floor = uint64_t{64} << 20;
  const uint64_t cap = std::max(floor, uint64_t{options_.row_cache_mb} << 22);
  return std::clamp<uint64_t>(8 * dirty, floor, cap);
}

uint64_t ShardStore::Impl::DirtyLimitBytes() const {
  // The row cache's budget; a store without one keeps up to 16 MiB of rows.
  return options_.row_cache_mb > 0 ? uint64_t{options_.row_cache_mb} << 20 : uint64_t{16} << 20;
}

Status ShardStore::Impl::ReadLogState(LogState* st) const {
  *st = LogState();
  // The state of the last group commit, and the one the last write-back
  // ingested: a write-back starts the next log file, so the higher file
  // number is the newer state (the next commit rewrites kClockLogKey).
  for (std::string_view key : {sf::kClockLogKey, sf::kWriteBackLogKey}) {
    std::string v;
    rocksdb::Status s = WriterDb()->Get(rocksdb::ReadOptions(), key, &v);
    if (s.IsNotFound()) continue;
    RETURN_IF_ERROR(FromRocks(s, "read the clock log state of " + dir_));
    if (v.size() != kLogStateBytes) {
      return Status::Corruption("the store in " + dir_ + " has a clock log record of " +
                                std::to_string(v.size()) + " bytes (expected " +
                                std::to_string(kLogStateBytes) + ")");
    }
    LogState read;
    std::memcpy(&read.number, v.data(), 8);
    std::memcpy(&read.end, v.data() + 8, 8);
    std::memcpy(&read.first_seq, v.data() + 16, 8);
    std::memcpy(&read.next_seq, v.data() + 24, 8);
    if (read.next_seq < read.first_seq || (read.end == 0) != (read.next_seq == read.first_seq)) {
      return Status::Corruption("the store in " + dir_ + " has an inconsistent clock log record");
    }
    if (key == sf::kClockLogKey || read.number > st->number) *st = read;
  }
  return Status::OK();
}

Status ShardStore::Impl::PinRowsLocked(const std::vector<ClockLogEntry>& deltas,
                                       std::vector<uint32_t>* handles) {
  constexpr uint32_t kNone = RowCache::kNoHandle;
  handles->assign(deltas.size(), kNone);
  ViewReaderLock view_lock(&view_mu_);
  std::vector<uint64_t> missing;
  std::vector<size_t> missing_at;  // the first delta of each missing row
  std::vector<CachedRow> fill;
  uint64_t read = 0;
  uint64_t delta_only = 0;
  constexpr size_t kAhead = 8;  // rows whose hash slot is being loaded
  for (size_t i = 0; i < deltas.size();) {
    const uint32_t table = deltas[i].table;
    size_t j = i;
    while (j < deltas.size() && deltas[j].table == table) ++j;
    ASSIGN_OR_RETURN(std::shared_ptr<const TableEntry> e, Lookup(table));
    missing.clear();
    missing_at.clear();
    for (size_t k = i; k < j;) {
      MutexLock cache_lock(&cache_mu_);
      const size_t stop = std::min(j, k + kRowsPerCacheLock);
      for (size_t p = k; p < std::min(stop, k + kAhead); ++p) {
        row_cache_->PrefetchKey(table, deltas[p].row);
      }
      for (; k < stop; ++k) {
        if (k + kAhead < stop) row_cache_->PrefetchKey(table, deltas[k + kAhead].row);
        // Second stage: the node of a row whose slot has loaded (PinDirty's
        // first touch of it was most of its time).
        if (k + kAhead / 2 < stop) {
          const uint32_t ahead = row_cache_->HandleOf(table, deltas[k + kAhead / 2].row);
          if (ahead != RowCache::kNoHandle) row_cache_->PrefetchDirty(ahead);
        }
        if (k > i && deltas[k].row == deltas[k - 1].row) continue;
        (*handles)[k] = row_cache_->PinDirty(table, deltas[k].row);
        if ((*handles)[k] != kNone) {
          // A cached row without bytes (read as absent) takes its first delta
          // as its sum when the group is published under the view lock: its
          // buffer is sized here instead, a few hundred rows per hold of the
          // cache lock. (At model scale a clock's new rows are ~270k: their
          // allocations in the publish held the view lock ~0.7 s while every
          // thread of the process took turns on malloc's lock.)
          CachedRow* c = row_cache_->DirtyRow((*handles)[k]);
          if (!c->written) c->sum.reserve(deltas[k].bytes.size());
          continue;
        }
        if (options_.delta_only_rows) {
          // Not read: the group's deltas are summed apart from the row.
          CachedRow pending;
          pending.delta_only = true;
          // Sized here, not when the group is published under the view lock.
          pending.sum.reserve(deltas[k].bytes.size());
          (*handles)[k] = row_cache_->InsertDirty(table, deltas[k].row, std::move(pending));
          ++delta_only;
        } else {
          missing.push_back(deltas[k].row);
          missing_at.push_back(k);
        }
      }
    }
    if (!missing.empty()) {
      RETURN_IF_ERROR(ReadFromStore(*e, missing.data(), missing.size(), nullptr, &fill));
      read += missing.size();
      MutexLock cache_lock(&cache_mu_);
      for (size_t m = 0; m < missing.size(); ++m) {
        // A reader may have cached it meanwhile (the same published state).
        uint32_t h = row_cache_->PinDirty(table, missing[m]);
        if (h == kNone) h = row_cache_->InsertDirty(table, missing[m], std::move(fill[m]));
        (*handles)[missing_at[m]] = h;
      }
    }
    // Repeats of a row (consecutive: sorted) share its first delta's handle.
    for (size_t k = i + 1; k < j; ++k) {
      if (deltas[k].row == deltas[k - 1].row) (*handles)[k] = (*handles)[k - 1];
    }
    i = j;
  }
  MutexLock l(&stats_mu_);
  path_stats_.rows_read_for_write += read;
  path_stats_.delta_only_rows += delta_only;
  return Status::OK();
}

Status ShardStore::Impl::AddToPinnedRowsLocked(const std::vector<ClockLogEntry>& deltas,
                                               const std::vector<uint32_t>& handles,
                                               bool validate) {
  std::shared_ptr<const TableEntry> e;
  std::vector<size_t> grown;
  MutexLock cache_lock(&cache_mu_);
  // Two-stage software pipeline over rows in random memory order: the node
  // of row i + 2k is loaded while row i + k's sum is, while row i is added.
  constexpr size_t kAhead = 4;
  const size_t n = deltas.size();
  for (size_t i = 0; i < std::min(n, 2 * kAhead); ++i) row_cache_->PrefetchDirty(handles[i]);
  for (size_t i = 0; i < std::min(n, kAhead); ++i) {
    row_cache_->PrefetchDirtySum(handles[i]);
    PrefetchBytes(deltas[i].bytes);
  }
  for (size_t i = 0; i < n; ++i) {
    if (i + 2 * kAhead < n) row_cache_->PrefetchDirty(handles[i + 2 * kAhead]);
    if (i + kAhead < n) {
      row_cache_->PrefetchDirtySum(handles[i + kAhead]);
      PrefetchBytes(deltas[i + kAhead].bytes);  // scattered too: a group's deltas in row order
    }
    const ClockLogEntry& d = deltas[i];
    if (e == nullptr || e->schema.id != d.table) {
      ASSIGN_OR_RETURN(e, Lookup(d.table));
    }
    if (validate) {
      RETURN_IF_ERROR(ValidateRow(e->format, d.bytes)
                          .WithPrefix("clock log entry for row " + std::to_string(d.row) +
                                      " of table '" + e->schema.name + "'"));
    }
    if (AddToCachedRow(e->format, row_cache_->DirtyRow(handles[i]), d.bytes)) grown.push_back(i);
  }
  for (size_t i : grown) row_cache_->RechargeDirty(handles[i]);
  return Status::OK();
}

Status ShardStore::Impl::ApplyToDirtyRowsLocked(const std::vector<ClockLogEntry>& deltas) {
  std::vector<uint32_t> handles;
  RETURN_IF_ERROR(PinRowsLocked(deltas, &handles));
  return AddToPinnedRowsLocked(deltas, handles, /*validate=*/true);
}

Status ShardStore::Impl::ReplayLogLocked(const LogState& st, uint64_t seq) {
  // The reader checks sequence numbers from the file's first record, so the
  // records before `seq` are read (and skipped) too.
  uint64_t replayed = 0;
  Status s = ReadClockLog(dir_, st.number, st.end, st.first_seq,
                          [&](uint64_t rec_seq, const std::vector<ClockLogEntry>& entries)
                              REQUIRES(write_mu_) {
                                if (rec_seq < seq) return Status::OK();
                                ++replayed;
                                return ApplyToDirtyRowsLocked(entries);
                              });
  if (!s.ok()) return s.WithPrefix("replaying the clock log of " + dir_);
  MutexLock l(&stats_mu_);
  path_stats_.replayed_records += replayed;
  return Status::OK();
}

Status ShardStore::Impl::OpenClockLog() {
  MutexLock write_lock(&write_mu_);
  LogState st;
  RETURN_IF_ERROR(ReadLogState(&st));
  log_state_ = st;
  if (st.end > 0) {
    Status r = ReplayLogLocked(st, st.first_seq);
    if (!r.ok()) {
      std::error_code ec;
      const bool file_moved = !fs::exists(ClockLogPath(dir_, st.number), ec);
      if (options_.read_only && file_moved &&
          (r.code() == StatusCode::kNotFound || r.code() == StatusCode::kCorruption)) {
        // Its writer wrote the rows back and reused the file (renamed to the
        // next number) since this open read the log's state: not damage.
        return Status::Unavailable(r.message() + " (the store changed during the open; retry)");
      }
      if (r.code() == StatusCode::kCorruption || r.code() == StatusCode::kNotFound) {
        return Status::Corruption(
            r.message() +
            ": the committed updates it holds cannot be recovered from this store; restore the "
            "last checkpoint (pacectl checkpoint restore) and resume the job from it");
      }
      return r;
    }
    LOG(INFO) << dir_ << ": replayed " << (st.next_seq - st.first_seq) << " clock log record(s), "
              << st.end << " bytes";
  }
  if (options_.read_only) return Status::OK();

  // Leftovers of an interrupted write-back or log restart.
  std::error_code ec;
  for (const auto& f : fs::directory_iterator(dir_, ec)) {
    const std::string name = f.path().filename().string();
    uint64_t number;
    const bool stale_log = ParseClockLogName(name, &number) && number != st.number;
    const bool stale_sst = name.rfind("writeback-", 0) == 0;
    if (stale_log || stale_sst) fs::remove(f.path(), ec);
  }
  RETURN_IF_ERROR(log_.Open(dir_, st.number, st.end));
  log_mode_ = true;
  if (st.end > 0) RETURN_IF_ERROR(WriteBackLocked("open"));
  if (identity_.format_version != kStorageFormatVersion) {
    rocksdb::WriteBatch b;
    b.Put(sf::kFormatVersionKey, sf::EncodeFixed32(kStorageFormatVersion));
    b.Put(sf::kClockLogKey, EncodeLogState(log_state_.number, log_state_.end, log_state_.first_seq,
                                           log_state_.next_seq));
    rocksdb::WriteOptions wo;
    wo.sync = true;
    RETURN_IF_ERROR(FromRocks(WriterDb()->Write(wo, &b), "upgrade the store format of " + dir_));
    LOG(INFO) << dir_ << ": storage format " << identity_.format_version << " upgraded to "
              << kStorageFormatVersion;
    identity_.format_version = kStorageFormatVersion;
  }
  log_mode_ = options_.clock_log;
  MutexLock l(&stats_mu_);
  path_stats_.clock_log = log_mode_;
  return Status::OK();
}

Status ShardStore::Impl::WriteGroupToLogLocked(const std::vector<ClockLogEntry>& deltas,
                                               const std::vector<ClockUpdate>& clocks,
                                               const std::string* import_record, UndoWrites* undo) {
  const auto t_start = std::chrono::steady_clock::now();
  // 1. Every row the group changes is held in memory, pinned.
  std::vector<uint32_t>& handles = pinned_handles_;
  RETURN_IF_ERROR(PinRowsLocked(deltas, &handles));
  const auto t_pinned = std::chrono::steady_clock::now();

  // 2. The log record. A failed append leaves the committed end as it was.
  // (Not written with durability off: ShardStoreOptions::durable.)
  const uint64_t before = log_.offset();
  if (options_.durable) {
    ClockLogWriter::Payload payload;
    Status appended = log_.Append(
        log_state_.next_seq, deltas.size(), [&deltas](size_t i) { return deltas[i]; },
        options_.sync, &payload);
    if (!appended.ok()) return MarkFailedLocked(appended, "ApplyBatches (clock log)");
    // A part kept for undo whose record is this one (UndoInLogLocked).
    for (UndoWrites::Put& put : undo->puts) {
      if (!put.log.in_log) continue;
      put.log.bytes = payload.bytes;
      put.log.crc = payload.crc;
      put.log.log_number = log_.number();
      put.log.log_offset = before;
      put.log.log_seq = log_state_.next_seq;
    }
  }
  const auto t_logged = std::chrono::steady_clock::now();

  // 3. The commit: the applied clocks and the log's new end, in one write.
  LogState next = log_state_;
  if (options_.durable) {
    next.end = log_.offset();
    ++next.next_seq;
  }
  rocksdb::WriteBatch& batch = batch_;
  batch.Clear();
  for (const ClockUpdate& c : clocks) {
    rocksdb::Status s = batch.Put(sf::ClockKey(c.client), sf::EncodeClock(c.applied, c.parts));
    if (!s.ok()) return FromRocks(s, "build batch");
  }
  if (import_record != nullptr) {
    rocksdb::Status s = batch.Put(sf::kLastImportKey, *import_record);
    if (!s.ok()) return FromRocks(s, "build batch");
  }
  {
    rocksdb::Status s = AddUndoWrites(*undo, &batch);
    if (!s.ok()) return FromRocks(s, "build batch");
  }
  rocksdb::Status put = batch.Put(
      sf::kClockLogKey, EncodeLogState(next.number, next.end, next.first_seq, next.next_seq));
  if (!put.ok()) return FromRocks(put, "build batch");
  Status written = FromRocks(WriterDb()->Write(write_options_, &batch),
                             "apply a group of " + std::to_string(clocks.size()) + " batch(es)");
  const size_t batch_bytes = batch.GetDataSize();
  TrimWriteBatchLocked();  // it holds the group's undo records, if any
  if (!written.ok()) return MarkFailedLocked(written, "ApplyBatches");
  log_state_ = next;
  const auto t_committed = std::chrono::steady_clock::now();

  // 4. Visible: the applied clocks and the rows.
  {
    ViewWriterLock view_lock(&view_mu_);
    for (const ClockUpdate& c : clocks) SetClockState(c);
    // Validated at admission and pinned above: cannot fail.
    Status added = AddToPinnedRowsLocked(deltas, handles, /*validate=*/false);
    CHECK(added.ok()) << added.ToString();
  }
  {
    MutexLock l(&stats_mu_);
    ++path_stats_.log_records;
    path_stats_.log_bytes += log_.offset() - before;
    path_stats_.log_offset = log_state_.end;
    path_stats_.rocksdb_write_bytes += batch_bytes;
  }
  if (VLOG_IS_ON(2)) {
    VLOG(2) << dir_ << ": group of " << clocks.size() << " batch(es), " << deltas.size()
            << " deltas, log record " << (log_.offset() - before) << " bytes: pin "
            << std::chrono::duration<double, std::milli>(t_pinned - t_start).count() << " ms, log "
            << std::chrono::duration<double, std::milli>(t_logged - t_pinned).count()
            << " ms, commit "
            << std::chrono::duration<double, std::milli>(t_committed - t_logged).count()
            << " ms, publish " << MsSince(t_committed) << " ms";
  }

  // 5. Rows back to RocksDB once the memory or the log is at its budget. The
  // group is committed whatever happens here.
  uint64_t dirty;
  {
    MutexLock cache_lock(&cache_mu_);
    dirty = row_cache_->dirty_bytes();
  }
  const bool every = options_.writeback_every_groups > 0 &&
                     log_state_.next_seq - log_state_.first_seq >= options_.writeback_every_groups;
  // A log past its bound is written back at the end of a clock, when no
  // client has parts kept for undo: a kept part's undo record is its log
  // record, and the write-back would first copy those out of the log into
  // files (the clock so far: most of a 2.8 s write-back of the dense shape,
  // whose clocks are 12 parts). At twice its bound it is written back
  // whatever the parts (clients whose clocks overlap may always have some).
  const uint64_t log_limit = LogLimitBytes(dirty);
  const bool log_due =
      log_state_.end > log_limit && (log_state_.end > 2 * log_limit || !AnyPartsKeptLocked());
  if (dirty > DirtyLimitBytes() || log_due || every) {
    Status wb = WriteBackLocked(dirty > DirtyLimitBytes() ? "row budget"
                                : log_due                 ? "log budget"
                                                          : "group count");
    if (!wb.ok()) LOG(WARNING) << dir_ << ": row write-back failed: " << wb.ToString();
  }
  return Status::OK();
}

std::vector<ShardStore::Impl::DirtyKey> ShardStore::Impl::SortedDirtyKeys() const {
  std::vector<DirtyKey> keys;
  {
    MutexLock cache_lock(&cache_mu_);
    keys.reserve(row_cache_->dirty_entries());
    row_cache_->ForEachDirty([&keys](uint32_t table, uint64_t row, const CachedRow& v) {
      if (v.written) keys.push_back(DirtyKey{table, row});
    });
  }
  std::sort(keys.begin(), keys.end(), [](const DirtyKey& a, const DirtyKey& b) {
    return a.table != b.table ? a.table < b.table : a.row < b.row;
  });
  return keys;
}

Status ShardStore::Impl::WriteBackLocked(const char* why) {
  if (!failed_.ok()) return failed_;
  const auto t_start = std::chrono::steady_clock::now();
  const std::vector<DirtyKey> items = SortedDirtyKeys();
  if (items.empty() && log_state_.end == 0) {
    ViewWriterLock view_lock(&view_mu_);
    MutexLock cache_lock(&cache_mu_);
    row_cache_->CleanAll();
    return Status::OK();
  }
  // The log's bytes are reused after the restart below: parts whose undo
  // record is a log record get a file first.
  RETURN_IF_ERROR(MoveUndoOutOfLogLocked());
  LogState next{log_state_.number + 1, 0, log_state_.next_seq, log_state_.next_seq};

  // One SST file: the log's next state (kWriteBackLogKey, sorted before the
  // rows; no key the memtable holds is in the file's range, so the ingestion
  // flushes nothing), then every dirty row in key order: a
  // Put of its stored value, or for a delta-only row a merge operand of its
  // pending sum (pace.RowAdd adds it to what RocksDB holds).
  const std::string path = dir_ + "/writeback-" + std::to_string(next.first_seq) + ".sst";
  rocksdb::Options o = MakeRocksOptions();
  rocksdb::SstFileWriter writer(rocksdb::EnvOptions(), o);
  auto fail = [&](const rocksdb::Status& s, const char* what) REQUIRES(write_mu_) {
    std::error_code ec;
    fs::remove(path, ec);
    return MarkFailedLocked(FromRocks(s, std::string(what) + " " + path), "row write-back");
  };
  rocksdb::Status s = writer.Open(path);
  if (!s.ok()) return fail(s, "create");
  s = writer.Put(sf::kWriteBackLogKey,
                 EncodeLogState(next.number, next.end, next.first_seq, next.next_seq));
  if (!s.ok()) return fail(s, "write");
  std::string values;
  std::vector<size_t> ends;
  // Per row: a merge operand (a delta-only row), read with its value (a
  // reader may meanwhile have read the row and made it whole).
  std::vector<char> operand;
  uint64_t operands = 0;
  char key[sf::kRowKeySize];
  std::shared_ptr<const TableEntry> e;
  for (size_t i = 0; i < items.size();) {
    const size_t stop = std::min(items.size(), i + kRowsPerCacheLock);
    values.clear();
    ends.clear();
    operand.clear();
    {
      MutexLock cache_lock(&cache_mu_);
      for (size_t k = i; k < stop; ++k) {
        if (e == nullptr || e->schema.id != items[k].table) {
          auto found = Lookup(items[k].table);
          if (!found.ok()) return MarkFailedLocked(found.status(), "row write-back");
          e = *found;
        }
        const CachedRow* c = row_cache_->Peek(items[k].table, items[k].row);
        CHECK(c != nullptr) << "a dirty row left the row cache";
        values.push_back(e->tag);
        values.append(c->sum);
        ends.push_back(values.size());
        operand.push_back(c->delta_only);
        operands += c->delta_only;
      }
    }
    size_t begin = 0;
    for (size_t k = i; k < stop; ++k) {
      sf::EncodeRowKey(items[k].table, items[k].row, key);
      const size_t end = ends[k - i];
      const rocksdb::Slice row_key(key, sf::kRowKeySize);
      const rocksdb::Slice value(values.data() + begin, end - begin);
      s = operand[k - i] ? writer.Merge(row_key, value) : writer.Put(row_key, value);
      if (!s.ok()) return fail(s, "write");
      begin = end;
    }
    i = stop;
  }
  rocksdb::ExternalSstFileInfo info;
  s = writer.Finish(&info);
  if (!s.ok()) return fail(s, "finish");
  const auto t_written = std::chrono::steady_clock::now();
  rocksdb::IngestExternalFileOptions io;
  io.move_files = true;
  io.allow_global_seqno = true;
  io.allow_blocking_flush = true;
  s = WriterDb()->IngestExternalFile({path}, io);
  if (!s.ok()) return fail(s, "ingest");
  {
    std::error_code ec;
    fs::remove(path, ec);  // the store holds its own link
  }
  log_state_ = next;
  {
    ViewWriterLock view_lock(&view_mu_);
    RefreshSnapshotLocked();
    MutexLock cache_lock(&cache_mu_);
    row_cache_->CleanAll();
  }
  Status restarted = log_.Restart(next.number);
  if (!restarted.ok()) return MarkFailedLocked(restarted, "clock log restart");
  {
    MutexLock l(&stats_mu_);
    ++path_stats_.writebacks;
    path_stats_.log_offset = 0;
    path_stats_.writeback_rows += items.size();
    path_stats_.writeback_operands += operands;
    path_stats_.writeback_bytes += info.file_size;
  }
  VLOG(1) << dir_ << ": wrote back " << items.size() << " rows (" << info.file_size << " bytes, "
          << why << ") in " << MsSince(t_start) << " ms (ingest " << MsSince(t_written)
          << " ms); clock log " << next.number << " started";
  return Status::OK();
}

Status ShardStore::Impl::ResyncLogLocked() {
  LogState stored;
  RETURN_IF_ERROR(ReadLogState(&stored));
  if (stored.number != log_state_.number) {
    // A write-back was ingested before the failure: the dirty rows are stored.
    ViewWriterLock view_lock(&view_mu_);
    MutexLock cache_lock(&cache_mu_);
    row_cache_->CleanAll();
  }
  if (stored.number != log_state_.number || stored.end != log_state_.end) {
    const bool same_file = stored.number == log_state_.number;
    const uint64_t from_seq = same_file ? log_state_.next_seq : stored.first_seq;
    RETURN_IF_ERROR(ReplayLogLocked(stored, from_seq));
    LOG(WARNING) << dir_ << ": a group reported as failed was committed; "
                 << (stored.next_seq - from_seq) << " clock log record(s) applied again";
  }
  log_state_ = stored;
  return log_.Open(dir_, stored.number, stored.end);
}

Status ShardStore::Impl::WriteBack() {
  PACE_CHECK_STORE_THREAD("WriteBack");
  RETURN_IF_ERROR(CheckWritable("WriteBack"));
  MutexLock write_lock(&write_mu_);
  if (!log_mode_) return Status::OK();
  if (!failed_.ok()) return failed_;
  return WriteBackLocked("requested");
}

DataPathStats ShardStore::Impl::data_path_stats() const {
  DataPathStats st;
  {
    MutexLock l(&stats_mu_);
    st = path_stats_;
  }
  if (row_cache_ != nullptr) {
    MutexLock cache_lock(&cache_mu_);
    st.dirty_rows = row_cache_->dirty_entries();
    st.dirty_bytes = row_cache_->dirty_bytes();
  }
  return st;
}

}  // namespace pace
