// Test helpers for moving a stopped job between clusters with real
// processes: the paced shards of a job on given data dirs, started and
// stopped together; a checkpoint of every stopped store re-sharded with
// pacectl checkpoint restore; one merged offline export of a table. Not
// thread-safe; one owner per object.
#ifndef PACE_TESTS_TESTING_OFFLINE_JOB_H_
#define PACE_TESTS_TESTING_OFFLINE_JOB_H_

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "common/status.h"
#include "tests/testing/subprocess.h"

namespace pace::testing {

// One paced per data dir, dirs[k] = shard k of dirs.size().
class ShardSet {
 public:
  // Stops (SIGTERM, then waits) the shards still running.
  ~ShardSet();

  // Starts the shards for a job of `num_clients` client processes and sets
  // *servers to "127.0.0.1:P0,127.0.0.1:P1,...". Errors: StartPaced's.
  Status Start(const std::vector<std::string>& dirs, uint32_t num_clients, std::string* servers);
  // SIGTERM to every shard, then waits for each (up to timeout_ms).
  Status Stop(int timeout_ms = 60000);

 private:
  std::vector<std::unique_ptr<Subprocess>> shards_;
};

// Checkpoints every stopped store of `dirs` (pacectl checkpoint create, into
// OUT.ckpt-K) and re-shards the checkpoints onto `num_shards` shards under
// `out` (pacectl checkpoint restore --num_shards; --num_clients too if
// num_clients > 0). *out_dirs = OUT/shard-0 ...; *printed = what restore
// printed. Stderr goes to files beside `out`. Errors: a command's exit
// status and stderr.
Status ReshardStores(const std::vector<std::string>& dirs, uint32_t num_shards,
                     uint32_t num_clients, const std::string& out,
                     std::vector<std::string>* out_dirs, std::string* printed = nullptr);

// One merged offline CSV export (pacectl --data_dir=DIR0,DIR1,... export
// TABLE --format=csv) of every store of `dirs`, written to `path` and read
// into *csv.
Status ExportCsv(const std::vector<std::string>& dirs, const std::string& table,
                 const std::string& path, std::string* csv);

}  // namespace pace::testing

#endif  // PACE_TESTS_TESTING_OFFLINE_JOB_H_
