// Which file of a store is damaged, told from the text of the error that
// opening or reading it gave (RocksDB names the file it failed on), and a
// check of CURRENT, so that paced and pacectl name the damaged file and its
// kind (SST, MANIFEST/CURRENT, write-ahead log) instead of guessing.
#ifndef PACE_COMMON_STORE_DAMAGE_H_
#define PACE_COMMON_STORE_DAMAGE_H_

#include <string>
#include <string_view>

#include "common/status.h"

namespace pace {

enum class DamagedFileKind { kUnknown, kSst, kClockLog, kManifest, kCurrent, kWal };

struct DamagedFile {
  DamagedFileKind kind = DamagedFileKind::kUnknown;
  std::string path;  // as the message names it; empty for kUnknown
};

// The first store file `message` names: "000010.sst" (kSst), "CLOCKLOG-000003"
// (kClockLog, storage format 2), "MANIFEST-000005" (kManifest), "CURRENT"
// (kCurrent), "000009.log" (kWal), in that order of preference (an SST named
// anywhere in the text is the damage, whatever the text around it says).
DamagedFile FindDamagedFile(std::string_view message);

// "an SST file", "the clock log", "the MANIFEST", "CURRENT", "a write-ahead
// log", "a file".
std::string DamagedFileKindName(DamagedFileKind kind);

// `s` (a Corruption from opening or reading the store in `dir`) reworded to
// lead with the damaged file and its kind:
//   "SST file DIR/000010.sst is damaged: <the original text>"
// plus how to check the whole store (pacectl verify) and the way out
// (pacectl checkpoint restore). A write-ahead log keeps the store's own text
// (which names it as one) with the same two commands appended. A Status that
// is not a Corruption, or names no file, is returned as it is.
Status ClassifyStoreCorruption(const std::string& dir, const Status& s);

// Corruption naming CURRENT if `dir`/CURRENT exists but does not hold the
// name of an existing MANIFEST file ("MANIFEST-NNNNNN\n"); OK otherwise
// (also when there is no CURRENT: that is "no store", for the open to say).
// A writer renames CURRENT atomically, so a live store reads whole; a
// MANIFEST that vanished under a writer is re-read a few times.
Status CheckCurrentFile(const std::string& dir);

}  // namespace pace

#endif  // PACE_COMMON_STORE_DAMAGE_H_
