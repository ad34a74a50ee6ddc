// What the shard-apply benchmarks (storage_bench, service_bench) share: a
// fresh per-process scratch directory, and the raw-RocksDB baseline database
// they compare ShardStore/ShardService against.
#ifndef PACE_TOOLS_BENCH_RAW_ROCKSDB_H_
#define PACE_TOOLS_BENCH_RAW_ROCKSDB_H_

#include <rocksdb/db.h>

#include <memory>
#include <string>

namespace pace::bench {

// $TMPDIR/pace-bench-<name>-<pid>, removed if it exists (not created).
std::string TempDir(const char* name);

// Opens (creating) a plain RocksDB at `dir` with the settings of a shard store
// (64 MiB write buffers, at most 3, a 256 MiB LRU block cache) and a float-add
// merge operator, the same work RocksDB does on flush/compaction for the
// store's own operator. nullptr if the open fails.
std::unique_ptr<rocksdb::DB> OpenRawBaselineDb(const std::string& dir);

}  // namespace pace::bench

#endif  // PACE_TOOLS_BENCH_RAW_ROCKSDB_H_
