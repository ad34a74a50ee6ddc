// ShardStore: the failed state after a write RocksDB refused (a full disk, no
// file descriptor, a read-only file system) and the recovery from it
// (docs/operations.md, "Disk full, fd exhaustion").
//
// Why a reopen and not DB::Resume(): with Debian's RocksDB 7.8 (built with
// assertions) a WAL writer whose append failed aborts the process on its next
// append, and after a failed WAL write into an empty memtable Resume() keeps
// that writer (nothing to flush, so no new WAL): the next batch aborted in
// writable_file_writer.h:312 in every run. Closing RocksDB and opening it
// again replaces every writer; the open drops the torn record of the failed
// write (it was never acknowledged), replays the rest and flushes it.
#include <dirent.h>
#include <glog/logging.h>
#include <rocksdb/env.h>
#include <sys/resource.h>
#include <sys/statvfs.h>

#include <cerrno>
#include <chrono>
#include <cstring>
#include <filesystem>
#include <memory>
#include <string>

#include "common/steady_time.h"
#include "storage/rocks_logger.h"
#include "storage/rocks_status.h"
#include "storage/row_merge.h"
#include "storage/shard_store_impl.h"

namespace pace {

namespace fs = std::filesystem;

namespace {

bool Contains(std::string_view haystack, std::string_view needle) {
  return haystack.find(needle) != std::string_view::npos;
}

// The errno a RocksDB error message names (its text is strerror's).
int CauseOf(std::string_view message) {
  if (Contains(message, std::strerror(ENOSPC)) || Contains(message, "NoSpace") ||
      Contains(message, "No space")) {
    return ENOSPC;
  }
  if (Contains(message, std::strerror(EMFILE)) || Contains(message, std::strerror(ENFILE))) {
    return EMFILE;
  }
  if (Contains(message, std::strerror(EROFS))) return EROFS;
  return 0;
}

const char* DescribeCause(int cause) {
  switch (cause) {
    case ENOSPC:
      return "no space left on device";
    case EMFILE:
      return "too many open files";
    case EROFS:
      return "read-only file system";
    default:
      return "a write to RocksDB failed";
  }
}

const char* WhatFixesIt(int cause) {
  switch (cause) {
    case ENOSPC:
      return "free space on its file system; the shard resumes by itself";
    case EMFILE:
      return "close connections or raise the open-file limit (ulimit -n); the shard resumes by "
             "itself";
    case EROFS:
      return "remount the file system read-write; the shard resumes by itself";
    default:
      return "fix the cause; the shard retries by itself";
  }
}

uint64_t CountOpenFds() {
  uint64_t n = 0;
  if (DIR* d = ::opendir("/proc/self/fd")) {
    while (::readdir(d) != nullptr) ++n;
    ::closedir(d);
  }
  return n;
}

}  // namespace

rocksdb::Options ShardStore::Impl::MakeWritableRocksOptions() {
  rocksdb::Options o = MakeRocksOptions();
  if (info_log_ == nullptr) {
    info_log_ = std::make_shared<RocksLogger>(dir_, uint64_t{16} << 20);
  }
  o.info_log = info_log_;
  if (sst_file_manager_ == nullptr) {
    // Compactions do not start unless they would leave a memtable's worth of
    // space free, so flushes (and the flush of a clean close) still fit.
    sst_file_manager_.reset(rocksdb::NewSstFileManager(rocksdb::Env::Default(), info_log_));
    sst_file_manager_->SetCompactionBufferSize(uint64_t{options_.write_buffer_mb} << 20);
  }
  o.sst_file_manager = sst_file_manager_;
  // A torn last record (a crash while appending) is dropped; damage before
  // the end of a log refuses the open. RocksDB's default, point-in-time
  // recovery, stops replaying at the damage and opens: every acknowledged
  // batch after it silently gone (7 clocks in one reproduction).
  o.wal_recovery_mode = rocksdb::WALRecoveryMode::kTolerateCorruptedTailRecords;
  return o;
}

namespace {

bool HasWalFiles(const std::string& dir) {
  std::error_code ec;
  for (const auto& e : fs::directory_iterator(dir, ec)) {
    if (e.path().extension() == ".log") return true;
  }
  return false;
}

}  // namespace

Status DescribeOpenCorruption(const std::string& dir, const rocksdb::Status& s) {
  const std::string what = s.ToString();
  if (!HasWalFiles(dir)) return Status::Corruption("open RocksDB in " + dir + ": " + what);
  return Status::Corruption(
      "the store in " + dir + " is corrupt (" + what +
      "): a write-ahead log is damaged before its end (a torn last record would have been "
      "tolerated), so replaying it would silently drop acknowledged batches after the damage; "
      "the store is not opened. Way out: restore the newest good checkpoint into a new data dir "
      "(pacectl checkpoint list " +
      dir +
      "/checkpoints; pacectl checkpoint restore CKPT "
      "--data_dir=NEWDIR), start paced on it and resume the job from that checkpoint's clocks "
      "(docs/operations.md, \"A corrupt WAL\")");
}

Status ShardStore::CheckWal(const std::string& dir) {
  std::error_code ec;
  if (!fs::exists(fs::path(dir) / "CURRENT", ec))
    return Status::NotFound("no PaceDB store in " + dir);
  rocksdb::Options o;
  o.merge_operator = NewRowAddMergeOperator();
  o.info_log = std::make_shared<DiscardLogger>();
  o.wal_recovery_mode = rocksdb::WALRecoveryMode::kTolerateCorruptedTailRecords;
  o.max_open_files = 16;
  rocksdb::DB* raw = nullptr;
  rocksdb::Status s = rocksdb::DB::OpenForReadOnly(o, dir, &raw);
  std::unique_ptr<rocksdb::DB> db(raw);
  if (s.IsCorruption()) return DescribeOpenCorruption(dir, s);
  return FromRocks(s, "open " + dir + " read-only to check its write-ahead logs");
}

Status ShardStore::Impl::MarkFailedLocked(const Status& error, std::string_view op) {
  if (!failed_.ok()) return failed_;
  failed_errno_ = CauseOf(error.message());
  failed_since_ms_ = SteadyNowMs();
  failed_ =
      Status::Unavailable("shard " + std::to_string(identity_.shard_id) + ": " +
                          DescribeCause(failed_errno_) + " (data dir " + dir_ +
                          "): writes are stopped until it is fixed: " + WhatFixesIt(failed_errno_) +
                          " [" + std::string(op) + ": " + error.message() + "]");
  has_failed_.store(true, std::memory_order_release);
  LOG(ERROR) << failed_.message();
  return failed_;
}

Status ShardStore::Impl::failure() const {
  if (!failed()) return Status::OK();
  MutexLock l(&write_mu_);
  return failed_;
}

Status ShardStore::Impl::CheckCauseGoneLocked() const {
  const uint64_t need_bytes = (uint64_t{options_.write_buffer_mb} + 1) << 20;
  struct statvfs vfs;
  if (::statvfs(dir_.c_str(), &vfs) == 0) {
    const uint64_t free_bytes = uint64_t{vfs.f_bavail} * vfs.f_frsize;
    if (free_bytes < need_bytes) {
      return Status::Unavailable("only " + std::to_string(free_bytes >> 10) + " KiB free in " +
                                 dir_ + ", need " + std::to_string(need_bytes >> 10) + " KiB");
    }
    if (vfs.f_flag & ST_RDONLY) return Status::Unavailable(dir_ + " is on a read-only file system");
  }
  // RocksDB keeps every table file open: the reopen needs one descriptor per
  // file plus a few for the WAL, MANIFEST and LOG.
  uint64_t files = 0;
  std::error_code ec;
  for (const auto& entry : fs::directory_iterator(dir_, ec)) {
    (void)entry;
    ++files;
  }
  if (ec) return Status::Unavailable("cannot list " + dir_ + ": " + ec.message());
  rlimit lim;
  if (::getrlimit(RLIMIT_NOFILE, &lim) == 0 && lim.rlim_cur != RLIM_INFINITY) {
    const uint64_t open_fds = CountOpenFds();
    const uint64_t need = files + 32;
    if (open_fds + need > lim.rlim_cur) {
      return Status::Unavailable(std::to_string(open_fds) + " of " + std::to_string(lim.rlim_cur) +
                                 " file descriptors in use; reopening needs about " +
                                 std::to_string(need) + " more");
    }
  }
  return Status::OK();
}

Status ShardStore::Impl::Recover() {
  PACE_CHECK_STORE_THREAD("Recover");
  if (!failed()) return Status::OK();
  MutexLock write_lock(&write_mu_);
  if (failed_.ok()) return Status::OK();
  RETURN_IF_ERROR(CheckCauseGoneLocked().WithPrefix(failed_.message() + "; still"));
  {
    WriterLock db_lock(&db_mu_);
    ViewWriterLock view_lock(&view_mu_);
    if (db_ != nullptr) {
      if (snapshot_ != nullptr) db_->ReleaseSnapshot(snapshot_);
      snapshot_ = nullptr;
      // Closing may report the failed WAL again; what it held that was
      // acknowledged is replayed by the open below.
      rocksdb::Status closed = db_->Close();
      if (!closed.ok())
        VLOG(1) << "closing the failed store in " << dir_ << ": " << closed.ToString();
      db_.reset();
    }
    Status opened = OpenRocks(MakeWritableRocksOptions());
    if (!opened.ok()) {
      // Reads fail (Unavailable) until a later Recover opens it.
      LOG(WARNING) << "reopening the failed store in " << dir_ << ": " << opened.ToString();
      const StatusCode c = opened.code();
      if (c == StatusCode::kCorruption || c == StatusCode::kIncompatible ||
          c == StatusCode::kInvalidArgument) {
        return opened;
      }
      return Status::Unavailable(failed_.message() + "; reopening failed: " + opened.message());
    }
    RefreshSnapshotLocked();
  }
  // The failed write was refused, so it was not published; but a write that
  // reached the WAL before its sync failed is replayed by the open. The
  // applied clocks are read back so the view holds exactly what is stored.
  std::vector<ClockT> stored;
  std::vector<uint32_t> stored_parts;
  Status loaded = ReadStoredClocks(&stored, &stored_parts);
  if (!loaded.ok()) return loaded;
  bool parts_differ = false;
  for (size_t i = 0; i < stored_parts.size(); ++i) {
    parts_differ = parts_differ || stored_parts[i] != applied_parts_[i].load();
  }
  if (log_mode_) {
    // The rows held in memory are the published state: the log brings them
    // in line with a group that was committed although its write failed.
    Status synced = ResyncLogLocked();
    if (!synced.ok()) return synced;
  }
  {
    ViewWriterLock view_lock(&view_mu_);
    if (stored != AppliedClocks() || parts_differ) {
      for (size_t i = 0; i < stored.size(); ++i) {
        applied_[i].store(stored[i], std::memory_order_release);
        applied_parts_[i].store(stored_parts[i], std::memory_order_release);
      }
      if (!log_mode_) {
        LOG(WARNING) << dir_ << ": a write reported as failed was stored; the row cache is cleared";
        if (row_cache_ != nullptr) {
          MutexLock cache_lock(&cache_mu_);
          row_cache_->Clear();
        }
      }
    }
    RefreshSnapshotLocked();
  }
  Status undo = LoadUndoStateLocked();
  if (!undo.ok()) return undo;
  const int64_t ms = SteadyNowMs() - failed_since_ms_;
  LOG(WARNING) << "shard " << identity_.shard_id << ": recovered from '"
               << DescribeCause(failed_errno_) << "' in " << dir_ << " after " << ms
               << " ms; writes resume";
  failed_ = Status::OK();
  failed_errno_ = 0;
  has_failed_.store(false, std::memory_order_release);
  return Status::OK();
}

// --- ShardStore: forwarding ---------------------------------------------------

Status ShardStore::failure() const { return impl_->failure(); }
bool ShardStore::failed() const { return impl_->failed(); }
Status ShardStore::Recover() { return impl_->Recover(); }

}  // namespace pace
