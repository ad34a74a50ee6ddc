// pace_lda's token assignments on local disk, so that --resume can continue a
// job.
//
// Each worker (partition part of num_parts) writes the topic of every token of
// its documents at the end of each clock c, before the clock's batch can be
// sent, to DIR/lda-z.c<client>.p<part>.<c+1> ("the state at the start of clock
// c+1"): write DIR/....tmp, (fsync,) rename, (fsync DIR). It deletes its files of
// clocks below the process's acknowledged clock. So whenever the shards'
// applied clock for this client is A, the files of clock A exist (and those of
// A+1 if clock A's batch went out). Format (little-endian): "PACELDAZ", u32
// format 1, u32 part, u32 num_parts, u32 topics, i64 clock, u64 tokens,
// i32 z[tokens], u64 FNV-1a of everything before it. See docs/apps.md.
#ifndef PACE_APPS_LDA_LDA_STATE_H_
#define PACE_APPS_LDA_LDA_STATE_H_

#include <cstdint>
#include <string>
#include <vector>

#include "common/clock.h"
#include "common/status.h"

namespace pace {
namespace lda {

struct AssignmentsHeader {
  uint32_t part = 0;
  uint32_t num_parts = 0;
  uint32_t topics = 0;
  ClockT clock = 0;
  uint64_t tokens = 0;
};

// DIR for a --data_dir: DATA_DIR/lda-assignments (embedded: beside the
// shard's RocksDB files; with --servers the client's --data_dir holds only it).
std::string AssignmentsDir(const std::string& data_dir);
std::string AssignmentsPath(const std::string& dir, uint32_t client, uint32_t part, ClockT clock);

// Creates `dir` (and its parent) if missing.
Status MakeAssignmentsDir(const std::string& dir);

// Writes atomically: a temp file, renamed. With `sync` the file is fsynced
// before the rename and the directory after it (the file then survives
// power loss; without, a crash of the process).
Status WriteAssignments(const std::string& dir, uint32_t client, const AssignmentsHeader& h,
                        const std::vector<int32_t>& z, bool sync);

// Reads and checks a file against `expect` (every field, checksum, topics in
// range). NotFound if missing; Corruption naming the file if it does not match.
Status ReadAssignments(const std::string& dir, uint32_t client, const AssignmentsHeader& expect,
                       std::vector<int32_t>* z);

// The clocks of the files of (client, part) in `dir`, ascending.
std::vector<ClockT> ListAssignments(const std::string& dir, uint32_t client, uint32_t part);

// Deletes the files of (client, part) with clock < `below` (and leftover
// .tmp files). Errors are ignored: a stale file is only disk space.
void RemoveAssignmentsBelow(const std::string& dir, uint32_t client, uint32_t part, ClockT below);

}  // namespace lda
}  // namespace pace

#endif  // PACE_APPS_LDA_LDA_STATE_H_
