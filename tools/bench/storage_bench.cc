// Benchmark 3: ShardStore::ApplyBatch of 10,000 rows x 100 f32 with
// the WAL on (no fsync), against raw RocksDB writing the same merge operands
// (same keys, same delta bytes) in one WriteBatch. Target: >= 0.7x the raw rate.
//
// 3b (report only): the shape of a pace_mf clock — 25,000 rows x 17 f32 in the
// order a client sends them (hash order, not key order), every row written at
// every clock — against raw RocksDB writing the same operands in that order.
// 3c (report only): 3b with every row read once first, so the store's row
// cache holds them all, as it does for ESSP-subscribed rows (cached rows are
// written as Puts of their sum, updated in place in the memtable).
#include <benchmark/benchmark.h>
#include <rocksdb/db.h>
#include <rocksdb/write_batch.h>
#include <unistd.h>

#include <algorithm>
#include <cstdlib>
#include <filesystem>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include "common/row.h"
#include "storage/key_format.h"
#include "storage/shard_store.h"
#include "tools/bench/ratio.h"
#include "tools/bench/raw_rocksdb.h"

namespace pace {
namespace {

constexpr int kRows = 10000;
constexpr uint32_t kWidth = 100;

// The shape of benchmark 3 or of 3b.
struct Shape {
  int rows;
  uint32_t width;
  bool shuffled;    // rows in a fixed pseudo-random order instead of key order
  bool read_first;  // the store reads every row once before the timed loop
};
constexpr Shape kWide{kRows, kWidth, false, false};
constexpr Shape kNarrow{25000, 17, true, false};
constexpr Shape kNarrowCached{25000, 17, true, true};

std::vector<std::string> MakeDeltas(const Shape& shape) {
  std::vector<std::string> deltas(shape.rows);
  std::vector<float> v(shape.width);
  for (int r = 0; r < shape.rows; ++r) {
    for (uint32_t c = 0; c < shape.width; ++c) v[c] = 0.001f * static_cast<float>((r + c) % 97);
    deltas[r] = EncodeDense(v);
  }
  return deltas;
}

// The row written at position i of a batch.
std::vector<uint64_t> RowOrder(const Shape& shape) {
  std::vector<uint64_t> rows(shape.rows);
  for (int i = 0; i < shape.rows; ++i) rows[i] = static_cast<uint64_t>(i);
  if (shape.shuffled) std::shuffle(rows.begin(), rows.end(), std::mt19937_64(7));
  return rows;
}

void RawRocksDBWriteBatch(benchmark::State& state, const Shape& shape) {
  std::string dir = bench::TempDir("raw");
  std::unique_ptr<rocksdb::DB> db = bench::OpenRawBaselineDb(dir);
  if (db == nullptr) {
    state.SkipWithError("open failed");
    return;
  }
  auto deltas = MakeDeltas(shape);
  auto rows = RowOrder(shape);
  rocksdb::WriteOptions wo;  // WAL on, no fsync
  char key[storage_format::kRowKeySize];
  int64_t clock = 0;
  for (auto _ : state) {
    rocksdb::WriteBatch batch;
    for (int i = 0; i < shape.rows; ++i) {
      storage_format::EncodeRowKey(1, rows[i], key);
      batch.Merge(rocksdb::Slice(key, sizeof(key)), deltas[i]);
    }
    std::string clock_value = storage_format::EncodeClock(++clock);
    batch.Put(storage_format::ClockKey(0), clock_value);
    if (!db->Write(wo, &batch).ok()) state.SkipWithError("write failed");
  }
  state.SetItemsProcessed(state.iterations() * shape.rows);
  db.reset();
  std::error_code ignored;  // a leftover is harmless; never an exception
  std::filesystem::remove_all(dir, ignored);
}

void ShardStoreApplyBatch(benchmark::State& state, const Shape& shape) {
  std::string dir = bench::TempDir("store");
  ShardStoreOptions options;  // defaults: WAL on, sync off
  std::unique_ptr<ShardStore> store;
  Status s = ShardStore::Open(options, dir, &store);
  TableSchema schema;
  schema.name = "w";
  schema.width = shape.width;
  TableSchema created;
  if (s.ok()) s = store->CreateTable(schema, &created);
  if (!s.ok()) {
    state.SkipWithError(s.ToString().c_str());
    return;
  }
  auto deltas = MakeDeltas(shape);
  auto rows = RowOrder(shape);
  std::vector<RowDelta> batch(shape.rows);
  for (int i = 0; i < shape.rows; ++i) batch[i] = RowDelta{created.id, rows[i], deltas[i]};
  if (shape.read_first) {
    std::vector<std::string> values;
    s = store->MultiGet(created.id, rows, &values);
    if (!s.ok()) {
      state.SkipWithError(s.ToString().c_str());
      return;
    }
  }
  ClockT clock = 0;
  for (auto _ : state) {
    bool duplicate = false;
    Status st = store->ApplyBatch(0, clock++, batch, &duplicate);
    if (!st.ok()) state.SkipWithError(st.ToString().c_str());
  }
  state.SetItemsProcessed(state.iterations() * shape.rows);
  store.reset();
  std::error_code ignored;  // a leftover is harmless; never an exception
  std::filesystem::remove_all(dir, ignored);
}

void BM_RawRocksDBWriteBatch(benchmark::State& state) { RawRocksDBWriteBatch(state, kWide); }
void BM_ShardStoreApplyBatch(benchmark::State& state) { ShardStoreApplyBatch(state, kWide); }
void BM_RawRocksDBWriteBatchNarrow(benchmark::State& state) {
  RawRocksDBWriteBatch(state, kNarrow);
}
void BM_ShardStoreApplyBatchNarrow(benchmark::State& state) {
  ShardStoreApplyBatch(state, kNarrow);
}
void BM_ShardStoreApplyBatchNarrowCached(benchmark::State& state) {
  ShardStoreApplyBatch(state, kNarrowCached);
}

BENCHMARK(BM_RawRocksDBWriteBatch)->Unit(benchmark::kMillisecond)->MinTime(2.0)->UseRealTime();
BENCHMARK(BM_ShardStoreApplyBatch)->Unit(benchmark::kMillisecond)->MinTime(2.0)->UseRealTime();
BENCHMARK(BM_RawRocksDBWriteBatchNarrow)
    ->Unit(benchmark::kMillisecond)
    ->MinTime(2.0)
    ->UseRealTime();
BENCHMARK(BM_ShardStoreApplyBatchNarrow)
    ->Unit(benchmark::kMillisecond)
    ->MinTime(2.0)
    ->UseRealTime();
BENCHMARK(BM_ShardStoreApplyBatchNarrowCached)
    ->Unit(benchmark::kMillisecond)
    ->MinTime(2.0)
    ->UseRealTime();

}  // namespace
}  // namespace pace

int main(int argc, char** argv) {
  pace::bench::Pair("3 shard apply (rows/s vs raw RocksDB WriteBatch)", "BM_RawRocksDBWriteBatch",
                    "BM_ShardStoreApplyBatch", pace::bench::kRateRatioAtLeast, 0.7);
  pace::bench::Pair(
      "3b shard apply, pace_mf shape: 25k rows x 17 f32 in client order (report only)",
      "BM_RawRocksDBWriteBatchNarrow", "BM_ShardStoreApplyBatchNarrow",
      pace::bench::kRateRatioAtLeast, 0);
  pace::bench::Pair("3c shard apply, 3b with every row cached (report only)",
                    "BM_RawRocksDBWriteBatchNarrow", "BM_ShardStoreApplyBatchNarrowCached",
                    pace::bench::kRateRatioAtLeast, 0);
  return pace::bench::RunAndReport(argc, argv);
}
