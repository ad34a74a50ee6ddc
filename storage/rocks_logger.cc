#include "storage/rocks_logger.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <sys/time.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <ctime>
#include <functional>
#include <thread>
#include <utility>

#include "common/steady_time.h"

namespace pace {

namespace {}  // namespace

RocksLogger::RocksLogger(std::string dir, uint64_t max_bytes)
    : rocksdb::Logger(rocksdb::InfoLogLevel::INFO_LEVEL),
      path_(std::move(dir) + "/LOG"),
      max_bytes_(max_bytes) {}

RocksLogger::~RocksLogger() {
  MutexLock l(&mu_);
  if (fd_ >= 0) ::close(fd_);
  fd_ = -1;
}

rocksdb::Status RocksLogger::CloseImpl() {
  MutexLock l(&mu_);
  if (fd_ >= 0) ::close(fd_);
  fd_ = -1;
  return rocksdb::Status::OK();
}

void RocksLogger::EnsureOpenLocked() {
  if (fd_ >= 0) return;
  const int64_t now = SteadyNowMs();
  if (now < next_open_ms_) return;
  fd_ = ::open(path_.c_str(), O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0644);
  if (fd_ < 0) {
    next_open_ms_ = now + 1000;
    return;
  }
  struct stat st;
  size_ = ::fstat(fd_, &st) == 0 ? static_cast<uint64_t>(st.st_size) : 0;
}

void RocksLogger::Logv(const char* format, va_list ap) {
  char buf[4096];
  timeval tv;
  ::gettimeofday(&tv, nullptr);
  std::tm t;
  const time_t secs = tv.tv_sec;
  ::localtime_r(&secs, &t);
  int n = std::snprintf(buf, sizeof(buf), "%04d/%02d/%02d-%02d:%02d:%02d.%06ld %zx ",
                        t.tm_year + 1900, t.tm_mon + 1, t.tm_mday, t.tm_hour, t.tm_min, t.tm_sec,
                        static_cast<long>(tv.tv_usec),
                        std::hash<std::thread::id>()(std::this_thread::get_id()) & 0xffffff);
  if (n < 0) return;
  size_t len = static_cast<size_t>(n);
  va_list copy;
  va_copy(copy, ap);
  int m = std::vsnprintf(buf + len, sizeof(buf) - len - 1, format, copy);
  va_end(copy);
  if (m < 0) return;
  len = std::min(len + static_cast<size_t>(m), sizeof(buf) - 2);
  if (buf[len - 1] != '\n') buf[len++] = '\n';

  MutexLock l(&mu_);
  if (fd_ >= 0 && size_ >= max_bytes_) {
    ::close(fd_);
    fd_ = -1;
    std::rename(path_.c_str(), (path_ + ".old").c_str());
    next_open_ms_ = 0;
  }
  EnsureOpenLocked();
  if (fd_ < 0) {
    ++dropped_;
    return;
  }
  ssize_t w = ::write(fd_, buf, len);
  if (w != static_cast<ssize_t>(len)) {
    ++dropped_;
    if (w > 0) size_ += static_cast<uint64_t>(w);
    return;
  }
  size_ += len;
}

size_t RocksLogger::GetLogFileSize() const {
  MutexLock l(&mu_);
  return size_;
}

uint64_t RocksLogger::dropped() const {
  MutexLock l(&mu_);
  return dropped_;
}

}  // namespace pace
