// The marker of an import that has not landed on every shard yet
// (pacectl import, docs/pacectl.md "import"). Before it writes anything,
// pacectl import writes DATA_DIR/IMPORT-INCOMPLETE into every shard's data
// dir, holding the command that completes the import; it removes the markers
// only after every shard's import batch is durable. A job (paced, the apps'
// embedded shard) refuses a data dir that holds one, so a killed import
// never serves a job half the shards imported and half not. Running the same
// import again completes it (import writes the array's values, whatever the
// rows held) and removes the markers.
#ifndef PACE_COMMON_IMPORT_MARKER_H_
#define PACE_COMMON_IMPORT_MARKER_H_

#include <string>

#include "common/status.h"

namespace pace {

inline constexpr char kImportMarkerFile[] = "IMPORT-INCOMPLETE";

// Writes the marker into `dir` holding `command` (one line), durably (the
// file and the directory are fsynced). IOError naming the file.
Status WriteImportMarker(const std::string& dir, const std::string& command);

// Removes the marker from `dir`, durably; OK if there is none.
Status RemoveImportMarker(const std::string& dir);

// OK if `dir` holds no marker; else FailedPrecondition, one line naming the
// command that completes the import ("DIR: an import did not complete on
// every shard (pacectl import was stopped); run `COMMAND` to complete it").
// IOError if the marker cannot be read.
Status CheckImportComplete(const std::string& dir);

}  // namespace pace

#endif  // PACE_COMMON_IMPORT_MARKER_H_
