#include "common/import_marker.h"

#include <errno.h>
#include <unistd.h>

#include <cstring>
#include <fstream>

#include "common/replace_file.h"

namespace pace {

namespace {

std::string MarkerPath(const std::string& dir) { return dir + "/" + kImportMarkerFile; }

Status Errno(const std::string& path, const std::string& what) {
  return Status::IOError(path + ": cannot " + what + ": " + std::strerror(errno));
}

}  // namespace

Status WriteImportMarker(const std::string& dir, const std::string& command) {
  return ReplaceFile(MarkerPath(dir), command + "\n", FileSync::kDurable);
}

Status RemoveImportMarker(const std::string& dir) {
  const std::string path = MarkerPath(dir);
  if (::unlink(path.c_str()) != 0) {
    if (errno == ENOENT) return Status::OK();
    return Errno(path, "remove");
  }
  return SyncDir(dir);
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
