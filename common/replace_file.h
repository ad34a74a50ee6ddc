// Replacing a small file so that a crash leaves either its old contents or
// the new ones, never a mix: write PATH.tmp, fsync it, rename it over PATH,
// fsync the directory (the pattern of LevelDB's CURRENT file). Used for the
// files the stores and apps keep beside their data: the import marker, the
// checkpoint manifest, the list of verified SST files, the LDA token
// assignments.
//
// Thread-safe as the file system is: two callers must not replace the same
// path at the same time (they would share PATH.tmp).
#ifndef PACE_COMMON_REPLACE_FILE_H_
#define PACE_COMMON_REPLACE_FILE_H_

#include <string>
#include <string_view>
#include <vector>

#include "common/status.h"

namespace pace {

enum class FileSync {
  // The rename only: after a crash PATH may hold the old or the new contents
  // (or, on some file systems, be empty). For a file that is rebuilt when it
  // is lost or wrong, or whose writer fsyncs elsewhere.
  kNone,
  // PATH.tmp and then the directory are fsynced: once the call returns OK,
  // PATH holds the new contents across a crash.
  kDurable,
};

// Replaces `path` with the concatenation of `pieces` (so that a large value
// need not be copied into one string first). On an error PATH is unchanged
// and PATH.tmp is removed; IOError naming the step and the file.
Status ReplaceFile(const std::string& path, const std::vector<std::string_view>& pieces,
                   FileSync sync);
inline Status ReplaceFile(const std::string& path, std::string_view data, FileSync sync) {
  return ReplaceFile(path, std::vector<std::string_view>{data}, sync);
}

// fsyncs the directory `dir` (after a file in it was created, renamed or
// removed). IOError naming it.
Status SyncDir(const std::string& dir);
// fsyncs the file `path` (written by other means). IOError naming it.
Status SyncFile(const std::string& path);

}  // namespace pace

#endif  // PACE_COMMON_REPLACE_FILE_H_
