// Re-sharding a job's checkpoints offline: the checkpoints of every shard of
// an N-shard job, taken at one clock, become the data directories of an
// M-shard job, each row placed by the same stable hash (ShardOf in
// common/hash.h), with the job name (paced --job; shards without one get new
// automatic ids, as they had), the tables, the per-client applied clocks
// and the rows' stored sums carried over bit for bit (format in
// docs/storage-format.md section 16). pacectl checkpoint restore --num_shards.
//
// Thread-compatible: ReshardCheckpoints uses only its arguments and the
// directories they name; no other process may write those directories.
#ifndef PACE_STORAGE_RESHARD_H_
#define PACE_STORAGE_RESHARD_H_

#include <cstdint>
#include <string>
#include <vector>

#include "common/clock.h"
#include "common/status.h"
#include "storage/shard_store.h"

namespace pace {

struct ReshardOptions {
  // Shards of the new job (>= 1). Default: 1.
  uint32_t num_shards = 1;
  // RocksDB block cache of each source checkpoint while it is read, MiB.
  // Default: 32.
  size_t block_cache_mb = 32;
};

// What ReshardCheckpoints wrote.
struct ReshardResult {
  uint32_t source_shards = 0;
  uint32_t num_clients = 0;
  Version shard_clock = 0;
  std::string job;  // the paced --job name carried over; "": automatic ids
  std::vector<TableSchema> tables;
  std::vector<std::string> shard_dirs;  // OUT/shard-K, index = new shard id
  std::vector<uint64_t> shard_rows;     // rows written to each
  uint64_t rows = 0;                    // rows in all
  uint64_t bytes = 0;                   // bytes of the rows' keys and values in all
};

// The data directory of new shard `shard` under `out_dir`: OUT/shard-K.
std::string ReshardShardDir(const std::string& out_dir, uint32_t shard);

// Reads the checkpoints `checkpoint_dirs` (one per shard of one job, any
// order) and writes an options.num_shards-shard copy of the job under
// `out_dir`, which must not exist or be empty: OUT/shard-0 ... each a store
// paced opens with --shard=K --num_shards=M and the same --num_clients. Each
// new shard's rows are written in key order into one SST file and ingested.
// The result appears whole (built in OUT.reshard-tmp, then renamed) or not at
// all; a leftover OUT.reshard-tmp of a killed run is removed.
// Errors (nothing written to out_dir): InvalidArgument when the checkpoints
// are not every shard of one job at one clock (the message says which
// differ), or a clock of some client is half applied; NotFound / Corruption /
// Incompatible for a checkpoint that does not read; AlreadyExists for a
// non-empty out_dir; IOError.
Status ReshardCheckpoints(const std::vector<std::string>& checkpoint_dirs,
                          const std::string& out_dir, const ReshardOptions& options,
                          ReshardResult* result);

}  // namespace pace

#endif  // PACE_STORAGE_RESHARD_H_
