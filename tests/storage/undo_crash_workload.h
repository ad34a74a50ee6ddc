// The store and workload of storage_undo_crash_test and its child: client 0
// of a store has clock 0 whole and kUndoParts parts of clock 1 applied,
// sent by process kSenderIncarnation; another process (kNewIncarnation)
// takes them back. Header-only, test-only.
#ifndef PACE_TESTS_STORAGE_UNDO_CRASH_WORKLOAD_H_
#define PACE_TESTS_STORAGE_UNDO_CRASH_WORKLOAD_H_

#include <cstdint>
#include <string>
#include <vector>

#include "common/row.h"
#include "storage/shard_store.h"

namespace pace::undo_crash {

constexpr uint32_t kRows = 10000;
constexpr uint32_t kWidth = 16;
constexpr uint32_t kUndoParts = 3;
constexpr uint64_t kSenderIncarnation = 0x5e4de4;
constexpr uint64_t kNewIncarnation = 0x4e3;

// Small caches and a write-back after every group, so that the undo's group
// is followed by a write-back a kill can land in too.
inline ShardStoreOptions StoreOptions() {
  ShardStoreOptions o;
  o.num_clients = 1;
  o.block_cache_mb = 8;
  o.write_buffer_mb = 4;
  o.row_cache_mb = 4;
  o.writeback_every_groups = 1;
  return o;
}

// Row r, element i: r + i after clock 0, plus (p + 1) * 1000 for each part p
// of clock 1 applied.
inline int64_t Value(uint32_t row, uint32_t i, uint32_t parts) {
  int64_t v = static_cast<int64_t>(row) + i;
  for (uint32_t p = 0; p < parts; ++p) v += (p + 1) * 1000;
  return v;
}

// Clock 0 whole, then parts [0, kUndoParts) of clock 1 (with more).
inline Status ApplyWorkload(ShardStore* store, uint32_t table) {
  for (uint32_t batch = 0; batch <= kUndoParts; ++batch) {
    std::vector<std::string> bytes(kRows);
    std::vector<RowDelta> deltas(kRows);
    for (uint32_t r = 0; r < kRows; ++r) {
      std::vector<int64_t> v(kWidth);
      for (uint32_t i = 0; i < kWidth; ++i) {
        v[i] = batch == 0 ? Value(r, i, 0) : static_cast<int64_t>(batch) * 1000;
      }
      bytes[r] = EncodeDense<int64_t>(v);
      deltas[r] = RowDelta{table, r, bytes[r]};
    }
    BatchRequest req{0, batch == 0 ? 0 : 1, &deltas};
    req.part = batch == 0 ? 0 : batch - 1;
    req.more = batch > 0;
    req.incarnation = kSenderIncarnation;
    std::vector<BatchResult> results;
    RETURN_IF_ERROR(store->ApplyBatches({req}, &results));
    RETURN_IF_ERROR(results[0].status);
  }
  return Status::OK();
}

}  // namespace pace::undo_crash

#endif  // PACE_TESTS_STORAGE_UNDO_CRASH_WORKLOAD_H_
