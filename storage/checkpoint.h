// Checkpoint manifests ("PACE-CHECKPOINT", a checksummed key=value text file;
// format in docs/storage-format.md) and the file operations behind
// ShardStore::CreateCheckpoint / RestoreCheckpoint. Functions are thread-safe
// as long as callers do not write the same directory concurrently.
#ifndef PACE_STORAGE_CHECKPOINT_H_
#define PACE_STORAGE_CHECKPOINT_H_

#include <cstdint>
#include <string>
#include <string_view>

#include "common/status.h"
#include "storage/shard_store.h"

namespace pace {

inline constexpr const char* kCheckpointManifestName = "PACE-CHECKPOINT";
// The first line of a manifest; the number is the manifest syntax version.
inline constexpr std::string_view kCheckpointManifestMagic = "PACE-CHECKPOINT 1";

// Renders a manifest as text (ends with its checksum line).
std::string EncodeCheckpointManifest(const CheckpointManifest& m);
// Parses and validates manifest text. Corruption for any malformed,
// inconsistent or checksum-failing content; Incompatible for a format version
// this build does not read.
Status ParseCheckpointManifest(std::string_view text, CheckpointManifest* m);

// Writes dir/PACE-CHECKPOINT atomically (temp file, fsync, rename, fsync dir).
Status WriteCheckpointManifest(const std::string& dir, const CheckpointManifest& m);
// NotFound if dir has no manifest; otherwise as ParseCheckpointManifest.
Status ReadCheckpointManifestFile(const std::string& dir, CheckpointManifest* m);

// Where CreateCheckpoint builds checkpoint `dir` before renaming it into
// place: "DIR.partial". A directory of that name is an unfinished checkpoint
// (its writer was killed); the next checkpoint into DIR removes it.
std::string CheckpointStagingDir(const std::string& dir);
// True for a name CheckpointStagingDir makes.
bool IsCheckpointStagingName(const std::string& name);
// Renames the finished checkpoint `staging` (its manifest written) to `dir`
// and fsyncs the parent directory.
Status PublishCheckpointDir(const std::string& staging, const std::string& dir);
// AlreadyExists for a checkpoint into `dir`, which exists: says whether it is
// a checkpoint (a manifest) or something else to move away.
Status CheckpointDirExists(const std::string& dir);

// The disk space of the checkpoint in `dir`: `bytes`, the sizes of its files;
// `exclusive_bytes`, of those with no other hard link (SST files shared with
// the live store or another checkpoint are not counted), i.e. what deleting
// the checkpoint frees now.
struct CheckpointUsage {
  uint64_t bytes = 0;
  uint64_t exclusive_bytes = 0;
};
Status CheckpointDiskUsage(const std::string& dir, CheckpointUsage* usage);

// Copies the store files of checkpoint `checkpoint_dir` into `data_dir`, which
// must not exist or be empty: immutable SST files are hard-linked (copied if
// linking fails), the rest copied and fsynced; the result is renamed into
// place. The manifest itself is not copied.
Status CopyCheckpointFiles(const std::string& checkpoint_dir, const std::string& data_dir);

}  // namespace pace

#endif  // PACE_STORAGE_CHECKPOINT_H_
