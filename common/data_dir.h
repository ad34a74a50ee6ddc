// A store's data directory as the binaries that create one (paced, the apps'
// embedded shard) prepare it: created private whatever the umask, and every
// reason it cannot be reached reported as an error, never thrown.
#ifndef PACE_COMMON_DATA_DIR_H_
#define PACE_COMMON_DATA_DIR_H_

#include <string>

#include "common/status.h"

namespace pace {

// The mode a new data dir gets (it holds the job token and the job's rows),
// and the mode of missing parent directories created on the way to it. Both
// are given to mkdir(2) explicitly, so a umask of 000 cannot widen them.
inline constexpr unsigned kDataDirMode = 0700;
inline constexpr unsigned kDataDirParentMode = 0755;

// Creates `dir` (and its missing parents) if it does not exist; *created says
// whether it did. An existing directory is left as it is. IOError naming the
// path that cannot be reached and why (e.g. "Permission denied", "Not a
// directory", "Too many levels of symbolic links", "File name too long").
Status PrepareDataDir(const std::string& dir, bool* created);

// *exists = whether `path` exists. IOError naming the path if that cannot be
// told (a component without search permission, a symbolic link loop, ...); a
// missing component or one that is a file answers false.
Status PathExists(const std::string& path, bool* exists);

}  // namespace pace

#endif  // PACE_COMMON_DATA_DIR_H_
