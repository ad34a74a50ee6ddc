#include "common/replace_file.h"

#include <fcntl.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

namespace pace {

namespace {

Status Errno(const std::string& what, const std::string& path) {
  return Status::IOError("cannot " + what + " " + path + ": " + std::strerror(errno));
}

Status WriteAll(int fd, std::string_view data, const std::string& path) {
  while (!data.empty()) {
    const ssize_t n = ::write(fd, data.data(), data.size());
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) return Errno("write", path);
    data.remove_prefix(static_cast<size_t>(n));
  }
  return Status::OK();
}

std::string DirOf(const std::string& path) {
  const size_t slash = path.rfind('/');
  if (slash == std::string::npos) return ".";
  return slash == 0 ? "/" : path.substr(0, slash);
}

}  // namespace

Status ReplaceFile(const std::string& path, const std::vector<std::string_view>& pieces,
                   FileSync sync) {
  const std::string tmp = path + ".tmp";
  const int fd = ::open(tmp.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  if (fd < 0) return Errno("create", tmp);
  Status s;
  for (std::string_view piece : pieces) {
    s = WriteAll(fd, piece, tmp);
    if (!s.ok()) break;
  }
  if (s.ok() && sync == FileSync::kDurable && ::fsync(fd) != 0) s = Errno("fsync", tmp);
  if (::close(fd) != 0 && s.ok()) s = Errno("close", tmp);
  if (s.ok() && ::rename(tmp.c_str(), path.c_str()) != 0) s = Errno("rename " + tmp + " to", path);
  if (!s.ok()) {
    ::unlink(tmp.c_str());
    return s;
  }
  return sync == FileSync::kDurable ? SyncDir(DirOf(path)) : Status::OK();
}

namespace {

Status SyncPath(const std::string& path, int flags) {
  const int fd = ::open(path.c_str(), flags | O_CLOEXEC);
  if (fd < 0) return Errno("open", path);
  const bool ok = ::fsync(fd) == 0;
  Status s = ok ? Status::OK() : Errno("fsync", path);
  ::close(fd);
  return s;
}

}  // namespace

Status SyncDir(const std::string& dir) { return SyncPath(dir, O_RDONLY | O_DIRECTORY); }

Status SyncFile(const std::string& path) { return SyncPath(path, O_RDONLY); }

}  // namespace pace
