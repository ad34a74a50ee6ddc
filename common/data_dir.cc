#include "common/data_dir.h"

#include <errno.h>
#include <sys/stat.h>

#include <cstring>

namespace pace {

namespace {

Status Errno(const std::string& path, int err) {
  return Status::IOError(path + ": " + std::strerror(err));
}

// mkdir(2) that treats a directory already there (made by a concurrent
// creator, say) as success.
Status MkdirOne(const std::string& path, unsigned mode) {
  if (::mkdir(path.c_str(), static_cast<mode_t>(mode)) == 0) return Status::OK();
  const int err = errno;
  struct stat st;
  if (err == EEXIST && ::stat(path.c_str(), &st) == 0 && S_ISDIR(st.st_mode)) {
    return Status::OK();
  }
  return Errno(path, err == EEXIST ? ENOTDIR : err);
}

}  // namespace

Status PathExists(const std::string& path, bool* exists) {
  struct stat st;
  if (::stat(path.c_str(), &st) == 0) {
    *exists = true;
    return Status::OK();
  }
  const int err = errno;
  if (err == ENOENT || err == ENOTDIR) {
    *exists = false;
    return Status::OK();
  }
  return Errno(path, err);
}

Status PrepareDataDir(const std::string& dir, bool* created) {
  *created = false;
  if (dir.empty()) return Status::InvalidArgument("empty data dir path");
  struct stat st;
  if (::stat(dir.c_str(), &st) == 0) {
    if (!S_ISDIR(st.st_mode)) return Errno(dir, ENOTDIR);
    return Status::OK();
  }
  // ENOTDIR: a component is a file; the walk below names it.
  if (errno != ENOENT && errno != ENOTDIR) return Errno(dir, errno);
  std::string leaf = dir;
  while (leaf.size() > 1 && leaf.back() == '/') leaf.pop_back();
  // Each missing parent in turn ("a/b/c": "a", then "a/b").
  for (size_t slash = leaf.find('/', 1); slash != std::string::npos;
       slash = leaf.find('/', slash + 1)) {
    const std::string prefix = leaf.substr(0, slash);
    if (prefix.empty() || prefix.back() == '/') continue;  // "//" in the path
    if (::stat(prefix.c_str(), &st) == 0) {
      if (!S_ISDIR(st.st_mode)) return Errno(prefix, ENOTDIR);
      continue;
    }
    if (errno != ENOENT) return Errno(prefix, errno);
    RETURN_IF_ERROR(MkdirOne(prefix, kDataDirParentMode));
  }
  RETURN_IF_ERROR(MkdirOne(leaf, kDataDirMode));
  *created = true;
  return Status::OK();
}

}  // namespace pace
