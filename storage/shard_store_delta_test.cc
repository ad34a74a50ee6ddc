// Delta-only rows (docs/storage-format.md section 15): a group's delta to a
// row the row cache does not hold is kept without reading the row, written
// back as a merge operand, and read as RocksDB's value plus the pending sum.
#include <gtest/gtest.h>

#include <map>
#include <string>
#include <vector>

#include "common/row.h"
#include "storage/shard_store.h"
#include "storage/testing/storage_test_util.h"

namespace pace {
namespace {

using testing_util::MakeSchema;
using testing_util::OpenOrDie;

constexpr uint32_t kWidth = 4;
constexpr uint64_t kRows = 300;

ShardStoreOptions DeltaOptions() {
  ShardStoreOptions o;
  o.num_clients = 1;
  o.block_cache_mb = 4;
  o.write_buffer_mb = 1;
  o.row_cache_mb = 1;
  return o;
}

// Clock c adds (c + 1) * (r + 1) to every element of row r (r < kRows).
std::string DenseDelta(int c, uint64_t r) {
  return EncodeDense<int64_t>(std::vector<int64_t>(kWidth, (c + 1) * static_cast<int64_t>(r + 1)));
}

// The sum of clocks [0, clocks) for row r.
std::string DenseSum(int clocks, uint64_t r) {
  return EncodeDense<int64_t>(
      std::vector<int64_t>(kWidth, clocks * (clocks + 1) / 2 * static_cast<int64_t>(r + 1)));
}

Status ApplyClock(ShardStore* s, uint32_t table, int c) {
  std::vector<std::string> bytes;
  bytes.reserve(kRows);
  std::vector<RowDelta> deltas;
  for (uint64_t r = 0; r < kRows; ++r) {
    bytes.push_back(DenseDelta(c, r));
    deltas.push_back(RowDelta{table, r, bytes.back()});
  }
  bool dup = false;
  return s->ApplyBatch(0, c, deltas, &dup);
}

void ExpectRows(ShardStore* s, uint32_t table, int clocks, const char* when) {
  std::vector<uint64_t> rows;
  for (uint64_t r = 0; r < kRows; ++r) rows.push_back(r);
  std::vector<std::string> got;
  ASSERT_TRUE(s->MultiGet(table, rows, &got).ok());
  for (uint64_t r = 0; r < kRows; ++r) {
    ASSERT_EQ(got[r], DenseSum(clocks, r)) << "row " << r << " " << when;
  }
  uint64_t scanned = 0;
  ASSERT_TRUE(s->Scan(table, 0, [&](uint64_t r, std::string_view v) {
                 EXPECT_EQ(v, DenseSum(clocks, r)) << "scan row " << r << " " << when;
                 ++scanned;
                 return true;
               }).ok());
  EXPECT_EQ(scanned, kRows) << when;
}

// Rows never read are never read to be written: their deltas add up apart
// and go to RocksDB as merge operands on top of what earlier write-backs
// left, and every read (cached, MultiGet, Scan, after a reopen) is exact.
TEST(DeltaOnlyRowsTest, DeltasToUncachedRowsAreNotReadAndAddExactly) {
  ScopedTempDir tmp;
  const std::string dir = tmp.Sub("s");
  constexpr int kClocks = 6;
  {
    std::unique_ptr<ShardStore> s = OpenOrDie(DeltaOptions(), dir);
    TableSchema t;
    ASSERT_TRUE(
        s->CreateTable(MakeSchema("d", RowKind::kDense, ElementType::kI64, kWidth), &t).ok());
    for (int c = 0; c < kClocks; ++c) {
      ASSERT_TRUE(ApplyClock(s.get(), t.id, c).ok());
      if (c % 2 == 1) {  // operands stack up in RocksDB
        ASSERT_TRUE(s->WriteBack().ok());
      }
    }
    const DataPathStats st = s->data_path_stats();
    EXPECT_EQ(st.rows_read_for_write, 0u);
    EXPECT_EQ(st.delta_only_rows, kClocks / 2 * kRows);  // once per write-back interval
    EXPECT_EQ(st.writeback_operands, kClocks / 2 * kRows);
    ASSERT_NO_FATAL_FAILURE(ExpectRows(s.get(), t.id, kClocks, "after write-backs"));
    // Read rows are whole again: the next clock adds to them in memory.
    ASSERT_TRUE(ApplyClock(s.get(), t.id, kClocks).ok());
    EXPECT_EQ(s->data_path_stats().delta_only_rows, kClocks / 2 * kRows);
    ASSERT_NO_FATAL_FAILURE(ExpectRows(s.get(), t.id, kClocks + 1, "read, then added to"));
  }
  for (size_t cache_mb : {size_t{1}, size_t{0}}) {
    ShardStoreOptions o = DeltaOptions();
    o.row_cache_mb = cache_mb;
    std::unique_ptr<ShardStore> s = OpenOrDie(o, dir);
    ASSERT_NO_FATAL_FAILURE(ExpectRows(s.get(), s->FindTable("d")->id, kClocks + 1, "reopened"));
  }
}

// A row RocksDB holds, then pending deltas not read with it: a read returns
// init + stored + pending, for dense float rows with an initializer and
// sparse rows (an entry that cancels out is gone), and a write-back stores
// exactly what was read.
TEST(DeltaOnlyRowsTest, AReadSeesStoredPlusPending) {
  ScopedTempDir tmp;
  const std::string dir = tmp.Sub("s");
  TableSchema f = MakeSchema("f", RowKind::kDense, ElementType::kF32, 3);
  f.init = Initializer{InitKind::kUniform, -1, 1, 5};
  TableSchema sp = MakeSchema("sp", RowKind::kSparse, ElementType::kI32, 100);
  std::unique_ptr<ShardStore> s = OpenOrDie(DeltaOptions(), dir);
  ASSERT_TRUE(s->CreateTable(f, &f).ok());
  ASSERT_TRUE(s->CreateTable(sp, &sp).ok());
  constexpr uint64_t kRow = 7;
  // Halves and quarters add exactly in any order.
  const std::string f0 = EncodeDense<float>({0.5f, 1.0f, -2.0f});
  const std::string f1 = EncodeDense<float>({0.25f, -1.0f, 4.0f});
  const std::string s0 = EncodeSparse<int32_t>(std::map<uint32_t, int32_t>{{3, 5}, {9, 1}});
  const std::string s1 = EncodeSparse<int32_t>(std::map<uint32_t, int32_t>{{3, -5}, {50, 2}});
  bool dup = false;
  ASSERT_TRUE(
      s->ApplyBatch(0, 0, {RowDelta{f.id, kRow, f0}, RowDelta{sp.id, kRow, s0}}, &dup).ok());
  ASSERT_TRUE(s->WriteBack().ok());  // stored: f0, s0; the rows leave memory
  ASSERT_TRUE(
      s->ApplyBatch(0, 1, {RowDelta{f.id, kRow, f1}, RowDelta{sp.id, kRow, s1}}, &dup).ok());
  EXPECT_EQ(s->data_path_stats().rows_read_for_write, 0u);
  EXPECT_EQ(s->data_path_stats().delta_only_rows, 4u);

  std::string init;
  InitRow(f, kRow, &init);
  std::vector<float> want = DecodeDense<float>(init);
  want[0] += 0.75f;
  want[1] += 0.0f;
  want[2] += 2.0f;
  std::string got;
  ASSERT_TRUE(s->Get(f.id, kRow, &got).ok());
  EXPECT_EQ(DecodeDense<float>(got), want);
  const std::string sparse_want =
      EncodeSparse<int32_t>(std::map<uint32_t, int32_t>{{9, 1}, {50, 2}});
  std::vector<std::pair<uint64_t, std::string>> scanned;
  ASSERT_TRUE(s->Scan(sp.id, 0, [&](uint64_t r, std::string_view v) {
                 scanned.emplace_back(r, std::string(v));
                 return true;
               }).ok());
  ASSERT_EQ(scanned.size(), 1u);
  EXPECT_EQ(scanned[0].second, sparse_want);
  ASSERT_TRUE(s->Get(sp.id, kRow, &got).ok());
  EXPECT_EQ(got, sparse_want);

  // The float row was made whole by the read; the sparse one is whole too.
  // Both are written back as rows now, and a reopened store reads the same.
  const std::string f_before = EncodeDense<float>(want);
  s.reset();
  s = OpenOrDie(DeltaOptions(), dir);
  ASSERT_TRUE(s->Get(f.id, kRow, &got).ok());
  EXPECT_EQ(got, f_before);
  ASSERT_TRUE(s->Get(sp.id, kRow, &got).ok());
  EXPECT_EQ(got, sparse_want);
}

// A write-back's file spans only rows (its log state is under the key 0x04),
// so RocksDB ingests it without flushing the memtable, which holds the group
// commits' clocks and log state (a flush would empty the active memtable).
TEST(DeltaOnlyRowsTest, AWriteBackIngestsWithoutAMemtableFlush) {
  ScopedTempDir tmp;
  ShardStoreOptions o = DeltaOptions();
  o.write_buffer_mb = 8;  // no flush of its own during the test
  std::unique_ptr<ShardStore> s = OpenOrDie(o, tmp.Sub("s"));
  TableSchema t;
  ASSERT_TRUE(s->CreateTable(MakeSchema("d", RowKind::kDense, ElementType::kI64, kWidth), &t).ok());
  ASSERT_TRUE(s->Flush().ok());
  for (int c = 0; c < 3; ++c) {
    uint64_t entries = 0;
    ASSERT_TRUE(ApplyClock(s.get(), t.id, c).ok());
    ASSERT_TRUE(s->GetIntProperty("rocksdb.num-entries-active-mem-table", &entries));
    ASSERT_GT(entries, 0u) << "the commit's clock and log state are in the memtable";
    ASSERT_TRUE(s->WriteBack().ok());
    uint64_t left = 0;
    ASSERT_TRUE(s->GetIntProperty("rocksdb.num-entries-active-mem-table", &left));
    EXPECT_EQ(left, entries) << "the memtable was flushed at clock " << c;
  }
  ASSERT_NO_FATAL_FAILURE(ExpectRows(s.get(), t.id, 3, "after write-backs"));
  s.reset();
  s = OpenOrDie(o, tmp.Sub("s"));
  ASSERT_NO_FATAL_FAILURE(ExpectRows(s.get(), t.id, 3, "reopened"));
}

// With delta_only_rows off every row is read before a delta is added to it.
TEST(DeltaOnlyRowsTest, OffReadsEveryRowFirst) {
  ScopedTempDir tmp;
  ShardStoreOptions o = DeltaOptions();
  o.delta_only_rows = false;
  std::unique_ptr<ShardStore> s = OpenOrDie(o, tmp.Sub("s"));
  TableSchema t;
  ASSERT_TRUE(s->CreateTable(MakeSchema("d", RowKind::kDense, ElementType::kI64, kWidth), &t).ok());
  ASSERT_TRUE(ApplyClock(s.get(), t.id, 0).ok());
  ASSERT_TRUE(s->WriteBack().ok());
  ASSERT_TRUE(ApplyClock(s.get(), t.id, 1).ok());
  const DataPathStats st = s->data_path_stats();
  EXPECT_EQ(st.delta_only_rows, 0u);
  EXPECT_GE(st.rows_read_for_write, kRows);
  EXPECT_EQ(st.writeback_operands, 0u);
  ASSERT_NO_FATAL_FAILURE(ExpectRows(s.get(), t.id, 2, "read before written"));
}

}  // namespace
}  // namespace pace
