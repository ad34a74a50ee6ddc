// RocksLogger: the info log ("LOG" in the data dir) of a writable store.
//
// RocksDB's own file logger appends to its file through a WritableFileWriter;
// after one failed append (a full disk) Debian's RocksDB 7.8, built with
// assertions, aborts the process on the next log line
// (writable_file_writer.h:312, "sync_without_flush_called_") — and RocksDB
// logs a line for the very error that filled the disk. This logger writes
// with plain write(2) and drops what it cannot write: a full disk or a lack
// of file descriptors costs log lines, never the process.
//
// Thread-safety: thread-safe (RocksDB logs from many threads).
#ifndef PACE_STORAGE_ROCKS_LOGGER_H_
#define PACE_STORAGE_ROCKS_LOGGER_H_

#include <rocksdb/env.h>

#include <cstdarg>
#include <cstdint>
#include <memory>
#include <string>

#include "common/mutex.h"
#include "common/thread_annotations.h"

namespace pace {

class RocksLogger : public rocksdb::Logger {
 public:
  // Appends to `dir`/LOG; once it holds more than max_bytes it is renamed
  // to LOG.old (replacing the previous one) and a new LOG is started.
  RocksLogger(std::string dir, uint64_t max_bytes);
  ~RocksLogger() override;

  using rocksdb::Logger::Logv;
  void Logv(const char* format, va_list ap) override;
  size_t GetLogFileSize() const override;
  // Lines that could not be written (disk full, no descriptor).
  uint64_t dropped() const;

 private:
  rocksdb::Status CloseImpl() override;
  // Opens LOG if it is not open (at most once a second after a failure).
  void EnsureOpenLocked() REQUIRES(mu_);

  const std::string path_;
  const uint64_t max_bytes_;
  mutable Mutex mu_;
  int fd_ GUARDED_BY(mu_) = -1;
  uint64_t size_ GUARDED_BY(mu_) = 0;
  uint64_t dropped_ GUARDED_BY(mu_) = 0;
  int64_t next_open_ms_ GUARDED_BY(mu_) = 0;
};

// A logger that drops every line: for the short read-only opens of tools
// (checking a WAL, reading a checkpoint) that must not write into the store.
class DiscardLogger : public rocksdb::Logger {
 public:
  using rocksdb::Logger::Logv;
  void Logv(const char*, va_list) override {}
};

}  // namespace pace

#endif  // PACE_STORAGE_ROCKS_LOGGER_H_
