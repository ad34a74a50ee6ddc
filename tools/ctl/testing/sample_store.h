// A small shard store with tables of every kind, written through ShardStore,
// for pacectl tests. The values are documented below so tests can check
// exact output.
//
//   w       dense f32 x 4, essp s=2, uniform[-0.1,0.1) seed 7; rows 0, 2, 5 written
//   counts  dense i64 x 3, ssp s=1, zeros; row 1 = [11,22,33], row 3 = [0,1,8]
//   topics  sparse i32 (width 100), bsp; row 0 = {3:5, 10:-2}, row 7 = {1:1}
//   emb     dense f64 x 2, async, normal(mean=0,sd=0.5) seed 3; row 10 written
//
// Deltas to w: row 0 += [1,2,3,4], row 2 += [0.5]*4, row 5 += [1]*4; emb row
// 10 += [0.25,-0.25]. Every client applies clocks 0, 1, 2, so every applied
// clock (and the shard clock) is 3.
#ifndef PACE_TOOLS_CTL_TESTING_SAMPLE_STORE_H_
#define PACE_TOOLS_CTL_TESTING_SAMPLE_STORE_H_

#include <memory>
#include <string>

#include "common/status.h"
#include "storage/shard_store.h"

namespace pace::testing {

inline constexpr int kSampleClocks = 3;

// Creates the sample store in `dir` (shard 0 of 1) and leaves it open in
// *store if non-null (else closes it).
Status BuildSampleStore(const std::string& dir, uint32_t num_clients,
                        std::unique_ptr<ShardStore>* store = nullptr);

// Writes `stored` as the raw RocksDB value of row (table, row) of the store
// in `dir`, bypassing every check (the store must be closed). Used to plant
// corruption.
Status PutRawRowValue(const std::string& dir, uint32_t table, uint64_t row,
                      const std::string& stored);

// Adds table "big" (dense f64 x 8, zeros) with rows 0..n-1 to the closed store
// in `dir`, flushes, and returns the largest SST file in *sst.
Status AddBigTableAndFlush(const std::string& dir, uint32_t num_clients, uint64_t n,
                           std::string* sst);

// Overwrites `len` bytes at offset size * fraction of `path` with 0x5A.
Status OverwriteBytes(const std::string& path, double fraction, size_t len);

}  // namespace pace::testing

#endif  // PACE_TOOLS_CTL_TESTING_SAMPLE_STORE_H_
