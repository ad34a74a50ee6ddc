// The deterministic workload of the storage crash test, shared by the child
// process that applies it and the parent that checks the result.
//
// Step k (k = 0, 1, ...) is client k % 2's batch for clock k / 2, a pure
// function of (seed, k) over two integer tables, so a model of "steps
// 0 .. n-1" is exact. Not thread-safe (plain values).
#ifndef PACE_TESTS_STORAGE_CRASH_WORKLOAD_H_
#define PACE_TESTS_STORAGE_CRASH_WORKLOAD_H_

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "common/status.h"
#include "storage/shard_store.h"

namespace pace {
namespace crash_test {

inline constexpr uint32_t kClients = 2;
inline constexpr uint64_t kRows = 400;        // rows per table
inline constexpr uint32_t kDenseWidth = 8;    // dense i64 table
inline constexpr uint32_t kSparseWidth = 64;  // sparse i32 table column bound

struct Tables {
  uint32_t dense = 0;
  uint32_t sparse = 0;
};

// Creates (idempotently) the two tables.
Status SetUpTables(ShardStore* store, Tables* tables);

// The store options both processes use.
ShardStoreOptions StoreOptions(bool sync);

struct Batch {
  ClientId client = 0;
  ClockT clock = 0;
  std::vector<std::string> bytes;  // owns the deltas' bytes
  std::vector<RowDelta> deltas;
};

// Step `step` of the workload for `seed`.
void MakeBatch(uint64_t seed, int64_t step, const Tables& tables, Batch* batch);

// Exact expected contents: the sum of the deltas of steps 0 .. steps()-1.
class Model {
 public:
  Model(uint64_t seed, const Tables& tables) : seed_(seed), tables_(tables) {}
  // Applies steps steps() .. n-1.
  void AdvanceTo(int64_t n);
  int64_t steps() const { return steps_; }
  // Compares every row of both tables with the store; a readable message on
  // the first difference.
  Status Check(ShardStore* store) const;

 private:
  uint64_t seed_;
  Tables tables_;
  int64_t steps_ = 0;
  std::map<uint64_t, std::vector<int64_t>> dense_;
  std::map<uint64_t, std::map<uint32_t, int32_t>> sparse_;
};

}  // namespace crash_test
}  // namespace pace

#endif  // PACE_TESTS_STORAGE_CRASH_WORKLOAD_H_
