#include "common/import_marker.h"

#include <errno.h>
#include <fcntl.h>
#include <unistd.h>

#include <cstring>
#include <fstream>

namespace pace {

namespace {

std::string MarkerPath(const std::string& dir) { return dir + "/" + kImportMarkerFile; }

Status Errno(const std::string& path, const std::string& what) {
  return Status::IOError(path + ": cannot " + what + ": " + std::strerror(errno));
}

Status SyncPath(const std::string& path, int flags) {
  const int fd = ::open(path.c_str(), flags | O_CLOEXEC);
  if (fd < 0) return Errno(path, "open");
  const bool ok = ::fsync(fd) == 0;
  Status s = ok ? Status::OK() : Errno(path, "fsync");
  ::close(fd);
  return s;
}

}  // namespace

Status WriteImportMarker(const std::string& dir, const std::string& command) {
  const std::string path = MarkerPath(dir);
  const std::string tmp = path + ".tmp";
  {
    std::ofstream out(tmp, std::ios::trunc);
    out << command << '\n';
    out.flush();
    if (!out) return Status::IOError(tmp + ": cannot write");
  }
  RETURN_IF_ERROR(SyncPath(tmp, O_RDONLY));
  if (::rename(tmp.c_str(), path.c_str()) != 0) return Errno(path, "rename " + tmp + " to");
  return SyncPath(dir, O_RDONLY | O_DIRECTORY);
}

Status RemoveImportMarker(const std::string& dir) {
  const std::string path = MarkerPath(dir);
  if (::unlink(path.c_str()) != 0) {
    if (errno == ENOENT) return Status::OK();
    return Errno(path, "remove");
  }
  return SyncPath(dir, O_RDONLY | O_DIRECTORY);
}

Status CheckImportComplete(const std::string& dir) {
  const std::string path = MarkerPath(dir);
  std::ifstream in(path);
  if (!in) {
    if (::access(path.c_str(), F_OK) != 0 && errno == ENOENT) return Status::OK();
    return Errno(path, "read");
  }
  std::string command;
  std::getline(in, command);
  return Status::FailedPrecondition(
      dir + ": an import did not complete on every shard (pacectl import was stopped); run `" +
      command + "` to complete it");
}

}  // namespace pace
