// ShardStore: opening, the format/identity records, the catalog and clocks.
// Batches, reads and checkpoints live in shard_store_data.cc.
#include "storage/shard_store.h"

#include <fcntl.h>
#include <glog/logging.h>
#include <rocksdb/filter_policy.h>
#include <rocksdb/iterator.h>
#include <rocksdb/slice_transform.h>
#include <rocksdb/table.h>
#include <rocksdb/write_batch.h>
#include <stdlib.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <filesystem>
#include <thread>
#include <utility>

#include "common/thread_role.h"
#include "common/token_file.h"
#include "storage/checkpoint.h"
#include "storage/key_format.h"
#include "storage/rocks_status.h"
#include "storage/row_merge.h"
#include "storage/shard_store_impl.h"

namespace pace {

namespace fs = std::filesystem;
namespace sf = storage_format;

namespace {

// A store created without a job name: kAutoJobPrefix + 16 random hex digits.
Status NewAutoJobId(std::string* job) {
  std::string hex;
  RETURN_IF_ERROR(RandomHex(8, &hex));
  *job = kAutoJobPrefix + hex;
  return Status::OK();
}

Status ValidateOptions(const ShardStoreOptions& o) {
  if (o.num_shards == 0 || o.shard_id >= o.num_shards) {
    return Status::InvalidArgument("shard_id " + std::to_string(o.shard_id) +
                                   " is not in [0, num_shards=" + std::to_string(o.num_shards) +
                                   ")");
  }
  if (o.num_clients == 0 || o.num_clients > kMaxStoreClients) {
    return Status::InvalidArgument("num_clients must be in [1, " +
                                   std::to_string(kMaxStoreClients) + "], got " +
                                   std::to_string(o.num_clients));
  }
  if (o.write_buffer_mb == 0 || o.write_buffer_mb > (64u << 10)) {
    return Status::InvalidArgument("write_buffer_mb must be in [1, 65536], got " +
                                   std::to_string(o.write_buffer_mb));
  }
  if (o.max_write_buffer_number < 1 || o.max_write_buffer_number > 64) {
    return Status::InvalidArgument("max_write_buffer_number must be in [1, 64], got " +
                                   std::to_string(o.max_write_buffer_number));
  }
  if (o.block_cache_mb > (1u << 24)) {
    return Status::InvalidArgument("block_cache_mb is too large: " +
                                   std::to_string(o.block_cache_mb));
  }
  if (!o.job.empty()) RETURN_IF_ERROR(CheckStoredJobId(o.job, "ShardStoreOptions::job"));
  if (o.row_cache_mb > (1u << 24)) {
    return Status::InvalidArgument("row_cache_mb is too large: " + std::to_string(o.row_cache_mb));
  }
  return Status::OK();
}

std::string DescribeIdentity(uint32_t shard_id, uint32_t num_shards, uint32_t num_clients) {
  return "shard " + std::to_string(shard_id) + " of " + std::to_string(num_shards) + " with " +
         std::to_string(num_clients) + " clients";
}

// The memtable insert-hint prefix of a row key: its table (key space byte +
// table id). Only whole row keys are in the domain. That matters: RocksDB 7.8
// shares a prefix's hint between point keys and range tombstones (later
// releases use hints for point keys only), so the 5-byte start key of
// DropTable's DeleteRange, were it in the domain, would be inserted into the
// range-deletion skip list with a position from the point-key skip list.
class RowKeyTablePrefix : public rocksdb::SliceTransform {
 public:
  const char* Name() const override { return "pace.RowKeyTablePrefix"; }
  rocksdb::Slice Transform(const rocksdb::Slice& key) const override {
    return rocksdb::Slice(key.data(), sf::kTablePrefixSize);
  }
  bool InDomain(const rocksdb::Slice& key) const override {
    return key.size() == sf::kRowKeySize && key[0] == sf::kRowPrefix;
  }
};

int64_t NowUnixMs() {
  return std::chrono::duration_cast<std::chrono::milliseconds>(
             std::chrono::system_clock::now().time_since_epoch())
      .count();
}

}  // namespace

// --- Impl: open ---------------------------------------------------------------

ShardStore::Impl::Impl(const ShardStoreOptions& options, std::string dir, ShardIdentity identity)
    : options_(options),
      dir_(std::move(dir)),
      identity_(identity),
      row_cache_(options.row_cache_mb > 0 || options.clock_log || options.read_only
                     ? std::make_unique<RowCache>(std::max<size_t>(options.row_cache_mb << 20, 1))
                     : nullptr),
      // The log's two staging buffers take an eighth of the row cache's
      // budget (16 MiB from a 128 MiB row cache on): a store sized from a
      // small memory budget does not hold 16 MiB beside it.
      log_((options.row_cache_mb << 20) / 16) {
  write_options_.sync = options_.sync && options_.durable;
  write_options_.disableWAL = !options_.durable;
}

ViewLock::ViewLock() {
  pthread_rwlockattr_t attr;
  pthread_rwlockattr_init(&attr);
#if defined(__GLIBC__)
  pthread_rwlockattr_setkind_np(&attr, PTHREAD_RWLOCK_PREFER_WRITER_NONRECURSIVE_NP);
#endif
  CHECK_EQ(pthread_rwlock_init(&rw_, &attr), 0);
  pthread_rwlockattr_destroy(&attr);
}
ViewLock::~ViewLock() { pthread_rwlock_destroy(&rw_); }
void ViewLock::Lock() { CHECK_EQ(pthread_rwlock_wrlock(&rw_), 0); }
void ViewLock::Unlock() { CHECK_EQ(pthread_rwlock_unlock(&rw_), 0); }
void ViewLock::ReaderLock() { CHECK_EQ(pthread_rwlock_rdlock(&rw_), 0); }
void ViewLock::ReaderUnlock() { CHECK_EQ(pthread_rwlock_unlock(&rw_), 0); }

void CheckNotTransportThread(const char* method) {
  if (IsTransportThread()) {
    LOG(FATAL) << "ShardStore::" << method
               << " called on a transport thread: transport threads only move frames and never "
                  "call RocksDB (docs/design.md, Threads); hand the work to the shard's writer or "
                  "reader threads";
  }
}

ShardStore::Impl::~Impl() {
  if (db_ != nullptr && !options_.read_only && !failed() && log_mode_) {
    // The rows held in memory go to RocksDB, so the next open replays no log.
    MutexLock write_lock(&write_mu_);
    Status s = WriteBackLocked("close");
    if (!s.ok())
      LOG(WARNING) << "writing back the rows of " << dir_ << " on close: " << s.ToString();
  }
  if (db_ != nullptr && !options_.read_only && !failed()) {
    // A clean close leaves no WAL to replay: the next open (pacectl, a
    // restart) is then fast however much was written since the last flush.
    rocksdb::FlushOptions fo;
    fo.wait = true;
    rocksdb::Status s = db_->Flush(fo);
    if (!s.ok()) LOG(WARNING) << "flushing " << dir_ << " on close: " << s.ToString();
    if (s.ok() && marked_undurable_) {
      // Everything is in RocksDB's files now: the store is whole again.
      rocksdb::WriteOptions wo;
      wo.sync = true;
      s = db_->Delete(wo, sf::kUndurableKey);
      if (!s.ok()) LOG(WARNING) << "unmarking " << dir_ << " on close: " << s.ToString();
    }
  }
  {
    ViewWriterLock view_lock(&view_mu_);
    if (snapshot_ != nullptr) db_->ReleaseSnapshot(snapshot_);
    snapshot_ = nullptr;
  }
  if (db_ != nullptr) {
    rocksdb::Status s = db_->Close();
    if (!s.ok()) LOG(WARNING) << "closing RocksDB in " << dir_ << ": " << s.ToString();
    db_.reset();
  }
  if (!secondary_dir_.empty()) {
    std::error_code ec;
    fs::remove_all(secondary_dir_, ec);
  }
}

rocksdb::Options ShardStore::Impl::MakeRocksOptions() const {
  rocksdb::Options o;
  o.create_if_missing = true;  // Open() decides whether creating is allowed.
  o.merge_operator = NewRowAddMergeOperator();
  o.write_buffer_size = options_.write_buffer_mb << 20;
  o.max_write_buffer_number = options_.max_write_buffer_number;
  // ApplyBatch writes each batch's row keys in key order; a per-table insert
  // hint makes each memtable insert start from the previous one's position.
  o.memtable_insert_with_hint_prefix_extractor = std::make_shared<RowKeyTablePrefix>();
  // No inplace_update_support: an in-place update ignores snapshots (a read
  // at a snapshot then sees later merges too), and readers rely on the view's
  // snapshot (docs/storage-format.md section 14).
  o.level_compaction_dynamic_level_bytes = true;
  // Level sizes scaled to the memtables (RocksDB's tuning guide: the base
  // level about the size of L0 at its compaction trigger). With the default
  // 64 MiB memtables these are RocksDB's defaults (trigger 4, base 256 MiB,
  // files of 64 MiB). With the small memtables of a small budget (1 MiB each
  // in pace_mf --memory_mb=64) RocksDB's defaults made the base level the
  // whole store, and every L0 compaction of four 1 MiB files rewrote most of
  // it (rows are spread by hash, so each L0 file overlaps every base file);
  // a 16 MiB base level of 4 MiB files and a trigger of 8 halve what
  // compactions write and make that job ~25-40% faster (BENCHMARKS.md,
  // "Model scale at a small budget").
  const uint64_t memtable_bytes = uint64_t{options_.write_buffer_mb} << 20;
  o.level0_file_num_compaction_trigger = memtable_bytes < (uint64_t{16} << 20) ? 8 : 4;
  o.max_bytes_for_level_base =
      std::max<uint64_t>(uint64_t{16} << 20, memtable_bytes * o.level0_file_num_compaction_trigger);
  o.target_file_size_base = o.max_bytes_for_level_base / 4;
  // L0 and the base level uncompressed, deeper levels Snappy: model rows are
  // floats, which Snappy barely shrinks, and a model-scale clock flushes and
  // compacts ~130 MB; integer tables get compressed once they reach the
  // deeper levels (docs/storage-format.md section 8).
  o.compression_per_level = {rocksdb::kNoCompression, rocksdb::kNoCompression,
                             rocksdb::kSnappyCompression};
  o.max_background_jobs = 2;
  // Compactions read their input files in 256 KiB reads instead of a read
  // per 4 KiB block (RocksDB 7.8 reads block by block unless this is set):
  // out of core (pace_mf --memory_mb=64 in a 192 MB cgroup) compactions
  // read ~2.6 GB in a 3-clock job, ~640k reads of one block each. A buffer
  // per compaction input file: a few MiB at most.
  o.compaction_readahead_size = 256 << 10;
  o.keep_log_file_num = 4;
  o.max_log_file_size = 16 << 20;
  rocksdb::BlockBasedTableOptions t;
  if (block_cache_ != nullptr) {
    t.block_cache = block_cache_;
    t.cache_index_and_filter_blocks = true;
    t.pin_l0_filter_and_index_blocks_in_cache = true;
  } else {
    t.no_block_cache = true;
  }
  t.filter_policy.reset(rocksdb::NewBloomFilterPolicy(10));
  t.format_version = 5;
  // XXH3 block checksums: the RocksDB build here has only software CRC32c,
  // which was ~5% of a model-scale clock's CPU in flushes and compactions.
  // Each SST records its checksum type, so files with CRC32c (written before)
  // read as before; the WAL keeps CRC32c (RocksDB fixes it).
  t.checksum = rocksdb::kXXH3;
  o.table_factory.reset(rocksdb::NewBlockBasedTableFactory(t));
  return o;
}

namespace {

// Which MANIFEST is current and how long it is. A flush or compaction of a
// live writer appends to the MANIFEST (or starts a new one) before it deletes
// any WAL, so an unchanged state around a read-only open proves the open saw
// one consistent version: no WAL it needed can have vanished meanwhile.
struct ManifestState {
  std::string current;
  uint64_t size = 0;
  bool operator==(const ManifestState& o) const { return current == o.current && size == o.size; }
};

bool ReadManifestState(const std::string& dir, ManifestState* st) {
  std::FILE* f = std::fopen((dir + "/CURRENT").c_str(), "rb");
  if (f == nullptr) return false;
  char buf[256];
  size_t n = std::fread(buf, 1, sizeof(buf), f);
  std::fclose(f);
  st->current.assign(buf, n);
  while (!st->current.empty() && st->current.back() == '\n') st->current.pop_back();
  std::error_code ec;
  st->size = fs::file_size(fs::path(dir) / st->current, ec);
  return !ec;
}

// The process that holds RocksDB's lock on `dir` (an fcntl lock on
// DIR/LOCK), or 0 if none is known.
pid_t LockHolder(const std::string& dir) {
  const int fd = ::open((dir + "/LOCK").c_str(), O_RDWR | O_CLOEXEC);
  if (fd < 0) return 0;
  struct flock fl = {};
  fl.l_type = F_WRLCK;
  fl.l_whence = SEEK_SET;
  const bool got = ::fcntl(fd, F_GETLK, &fl) == 0;
  ::close(fd);
  return got && fl.l_type != F_UNLCK ? fl.l_pid : 0;
}

// RocksDB's "While lock file: DIR/LOCK: Resource temporarily unavailable" in
// words: who holds the store and what to do.
Status InUseError(const std::string& dir, const rocksdb::Status& s) {
  const pid_t holder = LockHolder(dir);
  const bool self = s.ToString().find("current process") != std::string::npos;
  return Status::FailedPrecondition(
      dir + " is in use by " +
      (self         ? "this process (opened twice)"
       : holder > 0 ? "another process (pid " + std::to_string(holder) +
                          ", a paced or an app's embedded "
                          "shard)"
                    : "another process (a paced or an app's embedded shard)") +
      ": stop it first, or give this one its own --data_dir (pacectl reads a store in use with "
      "--data_dir, or a running paced with --server)");
}

}  // namespace

Status ShardStore::Impl::OpenRocks(const rocksdb::Options& ro) {
  rocksdb::DB* raw = nullptr;
  if (!options_.read_only) {
    rocksdb::Status s = rocksdb::DB::Open(ro, dir_, &raw);
    if (s.IsIOError() && s.ToString().find("lock") != std::string::npos) {
      return InUseError(dir_, s);
    }
    if (s.IsCorruption()) return DescribeOpenCorruption(dir_, s);
    if (!s.ok()) return FromRocks(s, "open RocksDB in " + dir_);
    db_.reset(raw);
    return Status::OK();
  }
  // Read-only beside a live writer: RocksDB's read-only mode does not lock,
  // but a flush during the open can make it miss a WAL (a silently stale,
  // inconsistent view) or fail on a vanished file. So each attempt is
  // validated with the MANIFEST state and retried with a short backoff;
  // later attempts use a secondary instance, RocksDB's mode for following a
  // live primary.
  constexpr int kAttempts = 16;
  std::string last_error;
  for (int attempt = 0; attempt < kAttempts; ++attempt) {
    if (attempt > 0) {
      std::this_thread::sleep_for(std::chrono::milliseconds(1 << std::min(attempt, 6)));
    }
    const bool secondary = attempt >= kAttempts / 2;
    if (secondary && secondary_dir_.empty()) {
      std::string tmpl = (fs::temp_directory_path() / "pace-secondary-XXXXXX").string();
      if (::mkdtemp(tmpl.data()) == nullptr) {
        return Status::IOError("cannot create a temp dir for a secondary instance of " + dir_);
      }
      secondary_dir_ = tmpl;
    }
    ManifestState before, after;
    if (!ReadManifestState(dir_, &before)) {
      last_error = "cannot read CURRENT/MANIFEST";
      continue;
    }
    rocksdb::Status s = secondary ? rocksdb::DB::OpenAsSecondary(ro, dir_, secondary_dir_, &raw)
                                  : rocksdb::DB::OpenForReadOnly(ro, dir_, &raw);
    std::unique_ptr<rocksdb::DB> db(s.ok() ? raw : nullptr);
    bool stable = ReadManifestState(dir_, &after) && before == after;
    if (s.ok() && stable) {
      db_ = std::move(db);
      return Status::OK();
    }
    if (!s.ok() && stable) {
      // Nothing changed under us: the failure is real, not a race.
      return FromRocks(s, "open " + dir_ + " read-only");
    }
    last_error = s.ok() ? "the store changed during the open" : s.ToString();
    if (db != nullptr) db->Close().PermitUncheckedError();
    VLOG(1) << "read-only open of " << dir_ << " raced with its writer: " << last_error;
  }
  return Status::Unavailable("could not open " + dir_ +
                             " read-only: its writer kept changing it (last: " + last_error + ")");
}

Status ShardStore::Impl::CheckDurableMark() {
  std::string v;
  rocksdb::Status s = WriterDb()->Get(rocksdb::ReadOptions(), sf::kUndurableKey, &v);
  if (s.ok()) {
    return Status::Corruption(
        "the store in " + dir_ +
        " ran with durability off (--benchmark_no_durability) and was not closed cleanly: "
        "updates it acknowledged since its last write-back are lost; restore a checkpoint "
        "(pacectl checkpoint restore) or start the job over");
  }
  if (!s.IsNotFound()) return FromRocks(s, "read the durability mark of " + dir_);
  if (options_.durable || options_.read_only) return Status::OK();
  rocksdb::WriteOptions wo;
  wo.sync = true;
  RETURN_IF_ERROR(
      FromRocks(WriterDb()->Put(wo, sf::kUndurableKey, "1"), "mark " + dir_ + " as undurable"));
  marked_undurable_ = true;
  return Status::OK();
}

Status ShardStore::Impl::InitOrCheckMeta() {
  rocksdb::ReadOptions ro;
  std::string v;
  rocksdb::Status s = WriterDb()->Get(ro, sf::kFormatVersionKey, &v);
  if (s.IsNotFound()) {
    std::unique_ptr<rocksdb::Iterator> it(WriterDb()->NewIterator(ro));
    it->SeekToFirst();
    RETURN_IF_ERROR(FromRocks(it->status(), "scan " + dir_));
    if (it->Valid()) {
      return Status::Corruption(dir_ +
                                " holds a RocksDB database that is not a PaceDB store "
                                "(it has no format version record)");
    }
    if (options_.read_only) return Status::NotFound("the store in " + dir_ + " is empty");
    identity_.job = options_.job;
    if (identity_.job.empty()) RETURN_IF_ERROR(NewAutoJobId(&identity_.job));
    rocksdb::WriteBatch b;
    b.Put(sf::kJobKey, identity_.job);
    b.Put(sf::kFormatVersionKey, sf::EncodeFixed32(kStorageFormatVersion));
    b.Put(sf::kIdentityKey,
          sf::EncodeIdentity({identity_.shard_id, identity_.num_shards, identity_.num_clients}));
    b.Put(sf::kNextTableIdKey, sf::EncodeFixed64(1));
    b.Put(sf::kCreatedKey, sf::EncodeFixed64(static_cast<uint64_t>(NowUnixMs())));
    rocksdb::WriteOptions wo;
    wo.sync = true;
    RETURN_IF_ERROR(FromRocks(WriterDb()->Write(wo, &b), "initialize store in " + dir_));
    WriterLock catalog_lock(&catalog_mu_);
    next_table_id_ = 1;
    VLOG(1) << "created PaceDB store in " << dir_ << " for "
            << DescribeIdentity(identity_.shard_id, identity_.num_shards, identity_.num_clients);
    return Status::OK();
  }
  RETURN_IF_ERROR(FromRocks(s, "read format version of " + dir_));
  uint32_t format;
  RETURN_IF_ERROR(sf::DecodeFixed32(v, "format version", &format).WithPrefix(dir_));
  if (format < kOldestStorageFormatVersion || format > kStorageFormatVersion) {
    return Status::Incompatible("the store in " + dir_ + " has storage format version " +
                                std::to_string(format) + "; this build of PaceDB reads versions " +
                                std::to_string(kOldestStorageFormatVersion) + " to " +
                                std::to_string(kStorageFormatVersion));
  }
  s = WriterDb()->Get(ro, sf::kIdentityKey, &v);
  if (s.IsNotFound()) return Status::Corruption("the store in " + dir_ + " has no identity record");
  RETURN_IF_ERROR(FromRocks(s, "read identity of " + dir_));
  sf::IdentityRecord rec;
  RETURN_IF_ERROR(sf::DecodeIdentity(v, &rec).WithPrefix(dir_));
  if (options_.check_identity &&
      (rec.shard_id != identity_.shard_id || rec.num_shards != identity_.num_shards ||
       rec.num_clients != identity_.num_clients)) {
    return Status::InvalidArgument(
        "the store in " + dir_ + " was created for " +
        DescribeIdentity(rec.shard_id, rec.num_shards, rec.num_clients) + ", but " +
        DescribeIdentity(identity_.shard_id, identity_.num_shards, identity_.num_clients) +
        " was requested");
  }
  identity_ = ShardIdentity{format, rec.shard_id, rec.num_shards, rec.num_clients};
  RETURN_IF_ERROR(LoadJob());
  s = WriterDb()->Get(ro, sf::kNextTableIdKey, &v);
  if (s.IsNotFound()) return Status::Corruption("the store in " + dir_ + " has no next table id");
  RETURN_IF_ERROR(FromRocks(s, "read next table id of " + dir_));
  WriterLock catalog_lock(&catalog_mu_);
  RETURN_IF_ERROR(sf::DecodeFixed64(v, "next table id", &next_table_id_).WithPrefix(dir_));
  return Status::OK();
}

Status ShardStore::Impl::LoadJob() {
  std::string v;
  rocksdb::Status s = WriterDb()->Get(rocksdb::ReadOptions(), sf::kJobKey, &v);
  if (s.ok()) {
    if (options_.check_identity && !options_.job.empty() && options_.job != v) {
      return Status::InvalidArgument("the store in " + dir_ + " belongs to job '" + v +
                                     "', but job '" + options_.job + "' was requested");
    }
    identity_.job = v;
    return Status::OK();
  }
  if (!s.IsNotFound()) return FromRocks(s, "read the job id of " + dir_);
  if (options_.read_only) return Status::OK();  // an older store: no job id to report
  // A store of an older build: record its job now.
  identity_.job = options_.job;
  if (identity_.job.empty()) RETURN_IF_ERROR(NewAutoJobId(&identity_.job));
  rocksdb::WriteOptions wo;
  wo.sync = true;
  RETURN_IF_ERROR(
      FromRocks(WriterDb()->Put(wo, sf::kJobKey, identity_.job), "record job id in " + dir_));
  LOG(INFO) << "recorded job id '" << identity_.job << "' in " << dir_
            << " (a store created before job ids)";
  return Status::OK();
}

Status ShardStore::Impl::LoadCatalog() {
  std::string begin = sf::CatalogKey(0);
  std::string end = sf::KeySpaceEnd(sf::kCatalogPrefix);
  rocksdb::Slice upper(end);
  rocksdb::ReadOptions ro;
  ro.iterate_upper_bound = &upper;
  WriterLock catalog_lock(&catalog_mu_);
  std::unique_ptr<rocksdb::Iterator> it(WriterDb()->NewIterator(ro));
  for (it->Seek(begin); it->Valid(); it->Next()) {
    uint32_t id;
    if (!sf::DecodeCatalogKey(std::string_view(it->key().data(), it->key().size()), &id)) {
      return Status::Corruption("malformed catalog key in " + dir_);
    }
    TableSchema schema;
    RETURN_IF_ERROR(
        sf::DecodeSchema(std::string_view(it->value().data(), it->value().size()), &schema)
            .WithPrefix(dir_ + ": catalog record " + std::to_string(id)));
    if (schema.id != id || id == 0) {
      return Status::Corruption(dir_ + ": catalog record " + std::to_string(id) +
                                " holds table id " + std::to_string(schema.id));
    }
    if (by_name_.count(schema.name) != 0) {
      return Status::Corruption(dir_ + ": two catalog records name table '" + schema.name + "'");
    }
    if (next_table_id_ <= id) next_table_id_ = uint64_t{id} + 1;
    AddEntryLocked(schema);
  }
  return FromRocks(it->status(), "read catalog of " + dir_);
}

Status ShardStore::Impl::ReadStoredClocks(std::vector<ClockT>* clocks,
                                          std::vector<uint32_t>* parts) const {
  const uint32_t n = identity_.num_clients;
  clocks->assign(n, 0);
  if (parts != nullptr) parts->assign(n, 0);
  std::string begin = sf::ClockKey(0);
  std::string end = sf::KeySpaceEnd(sf::kClockPrefix);
  rocksdb::Slice upper(end);
  rocksdb::ReadOptions ro;
  ro.iterate_upper_bound = &upper;
  std::unique_ptr<rocksdb::Iterator> it(WriterDb()->NewIterator(ro));
  for (it->Seek(begin); it->Valid(); it->Next()) {
    ClientId client;
    if (!sf::DecodeClockKey(std::string_view(it->key().data(), it->key().size()), &client) ||
        client >= n) {
      return Status::Corruption(dir_ + ": applied-clock record for an unknown client");
    }
    ClockT clock;
    uint32_t p = 0;
    RETURN_IF_ERROR(
        sf::DecodeClock(std::string_view(it->value().data(), it->value().size()), &clock, &p)
            .WithPrefix(dir_));
    (*clocks)[client] = clock;
    if (parts != nullptr) (*parts)[client] = p;
  }
  return FromRocks(it->status(), "read applied clocks of " + dir_);
}

Status ShardStore::Impl::LoadClocks() {
  std::vector<ClockT> clocks;
  std::vector<uint32_t> parts;
  RETURN_IF_ERROR(ReadStoredClocks(&clocks, &parts));
  applied_ = std::make_unique<std::atomic<ClockT>[]>(clocks.size());
  applied_parts_ = std::make_unique<std::atomic<uint32_t>[]>(clocks.size());
  for (size_t i = 0; i < clocks.size(); ++i) {
    applied_[i].store(clocks[i]);
    applied_parts_[i].store(parts[i]);
  }
  return LoadUndoStateLocked();
}

Status ShardStore::Impl::Open() {
  if (options_.block_cache_mb > 0) {
    // Few cache shards, so each holds whole index and filter blocks: with
    // RocksDB's default (shards of 512 KiB: 64 of them in 32 MiB) the index
    // block of a large SST (1.3 MB for an imported 265 MB file) fit no shard,
    // so every read loaded and checksummed it again (pacectl export of 1M
    // rows took 62 s instead of 5 s).
    const size_t capacity = options_.block_cache_mb << 20;
    int shard_bits = 0;
    while (shard_bits < 3 && (capacity >> (shard_bits + 1)) >= (size_t{8} << 20)) ++shard_bits;
    block_cache_ = rocksdb::NewLRUCache(capacity, shard_bits);
  }
  std::error_code ec;
  bool exists = fs::exists(fs::path(dir_) / "CURRENT", ec);
  if (!exists && (options_.read_only || !options_.create_if_missing)) {
    return Status::NotFound("no PaceDB store in " + dir_);
  }
  if (!exists) {
    fs::create_directories(dir_, ec);
    if (ec) return Status::IOError("create " + dir_ + ": " + ec.message());
  }
  {
    // No other thread uses the store yet; the locks are those the steps
    // require (as Recover holds them).
    MutexLock write_lock(&write_mu_);
    {
      WriterLock db_lock(&db_mu_);
      RETURN_IF_ERROR(
          OpenRocks(options_.read_only ? MakeRocksOptions() : MakeWritableRocksOptions()));
    }
    RETURN_IF_ERROR(InitOrCheckMeta());
    RETURN_IF_ERROR(CheckDurableMark());
    RETURN_IF_ERROR(LoadCatalog());
    RETURN_IF_ERROR(LoadClocks());
    if (!options_.read_only) {
      ViewWriterLock view_lock(&view_mu_);
      RefreshSnapshotLocked();
    }
  }
  return OpenClockLog();
}

void ShardStore::Impl::RefreshSnapshotLocked() {
  const rocksdb::Snapshot* old = snapshot_;
  snapshot_ = WriterDb()->GetSnapshot();
  if (old != nullptr) WriterDb()->ReleaseSnapshot(old);
}

Status ShardStore::Impl::CheckWritable(std::string_view op) const {
  if (options_.read_only) {
    return Status::FailedPrecondition(std::string(op) + ": the store in " + dir_ +
                                      " is open read-only");
  }
  return Status::OK();
}

// --- Impl: catalog ------------------------------------------------------------

void ShardStore::Impl::AddEntryLocked(const TableSchema& s) {
  auto e = std::make_shared<TableEntry>();
  e->schema = s;
  e->format = RowFormat::Of(s);
  e->tag = static_cast<char>(RowTag(e->format));
  by_id_[s.id] = std::move(e);
  by_name_[s.name] = s.id;
}

StatusOr<std::shared_ptr<const TableEntry>> ShardStore::Impl::Lookup(uint32_t id) const {
  ReaderLock lock(&catalog_mu_);
  auto it = by_id_.find(id);
  if (it == by_id_.end()) return Status::NotFound("unknown table id " + std::to_string(id));
  return it->second;
}

Status ShardStore::Impl::CreateTable(const TableSchema& schema, TableSchema* created) {
  PACE_CHECK_STORE_THREAD("CreateTable");
  RETURN_IF_ERROR(CheckWritable("CreateTable"));
  RETURN_IF_ERROR(ValidateSchema(schema));
  MutexLock write_lock(&write_mu_);
  // Only writers change the catalog and write_mu_ is held: what is read here
  // stays true through the write, which runs without catalog_mu_ (readers
  // look tables up on every Read and must not wait for a synced write).
  TableSchema s = schema;
  uint64_t next = 0;
  {
    ReaderLock lock(&catalog_mu_);
    auto by_name = by_name_.find(schema.name);
    if (by_name != by_name_.end()) {
      const TableSchema& existing = by_id_.at(by_name->second)->schema;
      if (SameSchema(existing, schema)) {
        if (created != nullptr) *created = existing;
        return Status::OK();
      }
      return Status::AlreadyExists("table '" + schema.name + "' already exists as " +
                                   DescribeSchema(existing) + "; requested " +
                                   DescribeSchema(schema));
    }
    if (!failed_.ok()) return failed_;  // an existing table is found above without a write
    if (s.id == 0) {
      if (next_table_id_ > UINT32_MAX) return Status::ResourceExhausted("table ids exhausted");
      s.id = static_cast<uint32_t>(next_table_id_);
    } else if (by_id_.count(s.id) != 0) {
      return Status::AlreadyExists("table id " + std::to_string(s.id) +
                                   " is already used by table '" + by_id_.at(s.id)->schema.name +
                                   "'");
    }
    next = std::max<uint64_t>(next_table_id_, uint64_t{s.id} + 1);
  }
  rocksdb::WriteBatch b;
  b.Put(sf::CatalogKey(s.id), sf::EncodeSchema(s));
  b.Put(sf::kNextTableIdKey, sf::EncodeFixed64(next));
  rocksdb::WriteOptions wo;
  wo.sync = true;  // Catalog changes are rare; make them durable at once.
  Status written = FromRocks(WriterDb()->Write(wo, &b), "create table '" + s.name + "'");
  if (!written.ok()) return MarkFailedLocked(written, "CreateTable");
  WriterLock lock(&catalog_mu_);
  next_table_id_ = next;
  AddEntryLocked(s);
  if (created != nullptr) *created = s;
  return Status::OK();
}

Status ShardStore::Impl::DropTable(const std::string& name) {
  PACE_CHECK_STORE_THREAD("DropTable");
  RETURN_IF_ERROR(CheckWritable("DropTable"));
  MutexLock write_lock(&write_mu_);
  if (!failed_.ok()) return failed_;
  // Only writers change the catalog and write_mu_ is held: the entry found
  // here stays until the erase below.
  std::shared_ptr<const TableEntry> entry;
  {
    ReaderLock lock(&catalog_mu_);
    auto it = by_name_.find(name);
    if (it == by_name_.end()) return Status::NotFound("unknown table '" + name + "'");
    entry = by_id_.at(it->second);
  }
  const uint32_t id = entry->schema.id;
  // The log must hold nothing of the table (a replay would bring its rows
  // back): the rows held in memory are written back first.
  if (log_mode_) RETURN_IF_ERROR(WriteBackLocked("drop table"));
  rocksdb::WriteBatch b;
  b.Delete(sf::CatalogKey(id));
  b.DeleteRange(sf::TableRowsBegin(id), sf::TableRowsEnd(id));
  rocksdb::WriteOptions wo;
  wo.sync = true;
  Status written = FromRocks(WriterDb()->Write(wo, &b), "drop table '" + name + "'");
  if (!written.ok()) return MarkFailedLocked(written, "DropTable");
  {
    ViewWriterLock view_lock(&view_mu_);
    entry->dropped.store(true, std::memory_order_relaxed);
    RefreshSnapshotLocked();
    if (row_cache_ != nullptr) {
      MutexLock cache_lock(&cache_mu_);
      row_cache_->EraseTable(id);
    }
  }
  WriterLock lock(&catalog_mu_);
  by_id_.erase(id);
  by_name_.erase(name);
  return Status::OK();
}

std::vector<TableSchema> ShardStore::Impl::ListTables() const {
  ReaderLock lock(&catalog_mu_);
  std::vector<TableSchema> out;
  out.reserve(by_id_.size());
  for (const auto& [id, e] : by_id_) out.push_back(e->schema);
  std::sort(out.begin(), out.end(),
            [](const TableSchema& a, const TableSchema& b) { return a.id < b.id; });
  return out;
}

StatusOr<TableSchema> ShardStore::Impl::FindTable(std::string_view name) const {
  ReaderLock lock(&catalog_mu_);
  auto it = by_name_.find(name);
  if (it == by_name_.end()) return Status::NotFound("unknown table '" + std::string(name) + "'");
  return by_id_.at(it->second)->schema;
}

StatusOr<TableSchema> ShardStore::Impl::FindTable(uint32_t id) const {
  ASSIGN_OR_RETURN(std::shared_ptr<const TableEntry> e, Lookup(id));
  return e->schema;
}

// --- Impl: clocks -------------------------------------------------------------

ClockT ShardStore::Impl::AppliedClock(ClientId client) const {
  if (client >= identity_.num_clients) return 0;
  return applied_[client].load(std::memory_order_acquire);
}

uint32_t ShardStore::Impl::AppliedParts(ClientId client) const {
  if (client >= identity_.num_clients) return 0;
  return applied_parts_[client].load(std::memory_order_acquire);
}

std::vector<ClockT> ShardStore::Impl::AppliedClocks() const {
  std::vector<ClockT> out(identity_.num_clients);
  for (uint32_t i = 0; i < identity_.num_clients; ++i) {
    out[i] = applied_[i].load(std::memory_order_acquire);
  }
  return out;
}

Version ShardStore::Impl::ShardClock() const {
  Version v = applied_[0].load(std::memory_order_acquire);
  for (uint32_t i = 1; i < identity_.num_clients; ++i) {
    v = std::min<Version>(v, applied_[i].load(std::memory_order_acquire));
  }
  return v;
}

// --- ShardStore: forwarding ---------------------------------------------------

Status ShardStore::Open(const ShardStoreOptions& options, const std::string& dir,
                        std::unique_ptr<ShardStore>* store) {
  RETURN_IF_ERROR(ValidateOptions(options));
  ShardIdentity requested{kStorageFormatVersion, options.shard_id, options.num_shards,
                          options.num_clients};
  auto impl = std::make_unique<Impl>(options, dir, requested);
  RETURN_IF_ERROR(impl->Open());
  store->reset(new ShardStore(std::move(impl)));
  return Status::OK();
}

ShardStore::ShardStore(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}
ShardStore::~ShardStore() = default;

const ShardIdentity& ShardStore::identity() const { return impl_->identity(); }
const std::string& ShardStore::dir() const { return impl_->dir(); }
bool ShardStore::read_only() const { return impl_->read_only(); }
RowCacheStats ShardStore::row_cache_stats() const { return impl_->row_cache_stats(); }
StoreMemoryStats ShardStore::memory_stats() const { return impl_->memory_stats(); }
DataPathStats ShardStore::data_path_stats() const { return impl_->data_path_stats(); }
Status ShardStore::WriteBack() { return impl_->WriteBack(); }

Status ShardStore::CreateTable(const TableSchema& schema, TableSchema* created) {
  return impl_->CreateTable(schema, created);
}
Status ShardStore::DropTable(const std::string& name) { return impl_->DropTable(name); }
std::vector<TableSchema> ShardStore::ListTables() const { return impl_->ListTables(); }
StatusOr<TableSchema> ShardStore::FindTable(std::string_view name) const {
  return impl_->FindTable(name);
}
StatusOr<TableSchema> ShardStore::FindTable(uint32_t id) const { return impl_->FindTable(id); }

Status ShardStore::ApplyBatch(ClientId client, ClockT clock, const std::vector<RowDelta>& deltas,
                              bool* duplicate) {
  std::vector<BatchResult> results;
  Status s = impl_->ApplyBatches({BatchRequest{client, clock, &deltas}}, &results);
  *duplicate = false;
  if (!s.ok()) return s;
  *duplicate = results[0].duplicate;
  return results[0].status;
}
Status ShardStore::ApplyBatches(const std::vector<BatchRequest>& batches,
                                std::vector<BatchResult>* results) {
  return impl_->ApplyBatches(batches, results);
}
Status ShardStore::ImportBatch(const std::vector<RowDelta>& deltas, const std::string& record) {
  BatchRequest req;
  req.deltas = &deltas;
  req.import_record = &record;
  std::vector<BatchResult> results;
  RETURN_IF_ERROR(impl_->ApplyBatches({req}, &results));
  return results[0].status;
}
StatusOr<std::string> ShardStore::LastImport() const { return impl_->LastImport(); }
Status ShardStore::VerifyChecksums() const {
  PACE_CHECK_STORE_THREAD("VerifyChecksums");
  return impl_->VerifyChecksums();
}

Status ShardStore::VerifyNewChecksums(size_t* verified, size_t* skipped) const {
  PACE_CHECK_STORE_THREAD("VerifyNewChecksums");
  return impl_->VerifyNewChecksums(verified, skipped);
}
ShardStore::ReadView ShardStore::View() const {
  PACE_CHECK_STORE_THREAD("View");
  return ReadView(impl_.get());
}
ShardStore::ReadView::ReadView(const Impl* impl) NO_THREAD_SAFETY_ANALYSIS : impl_(impl) {
  impl_->LockView();
}
ShardStore::ReadView::~ReadView() NO_THREAD_SAFETY_ANALYSIS { impl_->UnlockView(); }
Status ShardStore::ReadView::MultiGet(uint32_t table, const std::vector<uint64_t>& rows,
                                      std::vector<std::string>* values) const
    NO_THREAD_SAFETY_ANALYSIS {
  values->resize(rows.size());
  return impl_->ReadRows(table, rows.data(), rows.size(), values->data());
}
Status ShardStore::ReadView::MultiGetOrAbsent(
    uint32_t table, const std::vector<uint64_t>& rows, std::vector<std::string>* values,
    std::vector<uint8_t>* absent) const NO_THREAD_SAFETY_ANALYSIS {
  values->resize(rows.size());
  absent->assign(rows.size(), 0);
  return impl_->ReadRows(table, rows.data(), rows.size(), values->data(), absent->data());
}
ClockT ShardStore::ReadView::AppliedClock(ClientId client) const {
  return impl_->AppliedClock(client);
}
uint32_t ShardStore::ReadView::AppliedParts(ClientId client) const {
  return impl_->AppliedParts(client);
}
Version ShardStore::ReadView::ShardClock() const { return impl_->ShardClock(); }
ClockT ShardStore::AppliedClock(ClientId client) const { return impl_->AppliedClock(client); }
uint32_t ShardStore::AppliedParts(ClientId client) const { return impl_->AppliedParts(client); }
std::vector<ClockT> ShardStore::AppliedClocks() const { return impl_->AppliedClocks(); }
Version ShardStore::ShardClock() const { return impl_->ShardClock(); }

Status ShardStore::Get(uint32_t table, uint64_t row, std::string* value) const {
  return impl_->Get(table, row, value);
}
Status ShardStore::MultiGet(uint32_t table, const std::vector<uint64_t>& rows,
                            std::vector<std::string>* values) const {
  return impl_->MultiGet(table, rows, values);
}
Status ShardStore::Scan(uint32_t table, uint64_t start_row,
                        const std::function<bool(uint64_t, std::string_view)>& fn) const {
  return impl_->Scan(table, start_row, fn);
}

Status ShardStore::CreateCheckpoint(const std::string& dir) const {
  return impl_->CreateCheckpoint(dir);
}
Status ShardStore::OpenForInspection(const std::string& dir, size_t block_cache_mb,
                                     std::unique_ptr<ShardStore>* store) {
  ShardStoreOptions o;
  o.read_only = true;
  o.check_identity = false;
  o.block_cache_mb = block_cache_mb;
  o.row_cache_mb = 0;
  return Open(o, dir, store);
}
Status ShardStore::ReadCheckpointManifest(const std::string& dir, CheckpointManifest* manifest) {
  return ReadCheckpointManifestFile(dir, manifest);
}
Status ShardStore::RestoreCheckpoint(const std::string& checkpoint_dir,
                                     const std::string& data_dir) {
  CheckpointManifest manifest;
  RETURN_IF_ERROR(ReadCheckpointManifestFile(checkpoint_dir, &manifest));
  return CopyCheckpointFiles(checkpoint_dir, data_dir);
}
Status ShardStore::Flush() { return impl_->Flush(); }
bool ShardStore::GetIntProperty(const std::string& name, uint64_t* value) const {
  return impl_->GetIntProperty(name, value);
}

Status ShardStore::ApproximateSize(uint64_t* disk_bytes, uint64_t* estimated_keys) const {
  return impl_->ApproximateSize(disk_bytes, estimated_keys);
}
Status ShardStore::ApproximateTableSize(uint32_t table, uint64_t* bytes) const {
  return impl_->ApproximateTableSize(table, bytes);
}

}  // namespace pace
