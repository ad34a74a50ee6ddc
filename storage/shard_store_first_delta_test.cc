// A row that has no bytes yet (never read, or read as absent) takes its
// first delta as its value; a row with bytes adds it. What every read, a
// replay of the log, a write-back and an undo see must be exact, on both
// write paths (clock log, RocksDB writes).
#include <gtest/gtest.h>

#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "common/row.h"
#include "storage/shard_store.h"
#include "storage/testing/storage_test_util.h"

namespace pace {
namespace {

using testing_util::MakeSchema;
using testing_util::OpenOrDie;
using testing_util::ScopedTempDir;

constexpr uint32_t kWidth = 4;
constexpr uint64_t kRows = 30;  // [0, 10) written before, [10, 20) read absent, [20, 30) unseen
constexpr uint64_t kRepeated[] = {5, 15, 25};  // a second delta in the same batch
constexpr uint64_t kProcessA = 0xa11ce;
constexpr uint64_t kProcessB = 0xb0b;

std::string I64Row(int64_t v) { return EncodeDense<int64_t>(std::vector<int64_t>(kWidth, v)); }

// A batch's deltas: the buffers are filled first, then the deltas point
// into them (their addresses must not move).
class Batch {
 public:
  void Add(uint32_t table, uint64_t row, std::string bytes) {
    keys_.emplace_back(table, row);
    buffers_.push_back(std::move(bytes));
  }
  const std::vector<RowDelta>& Deltas() {
    deltas_.clear();
    for (size_t i = 0; i < buffers_.size(); ++i) {
      deltas_.push_back(RowDelta{keys_[i].first, keys_[i].second, buffers_[i]});
    }
    return deltas_;
  }

 private:
  std::vector<std::pair<uint32_t, uint64_t>> keys_;
  std::vector<std::string> buffers_;
  std::vector<RowDelta> deltas_;
};

class FirstDeltaTest : public ::testing::TestWithParam<bool> {
 protected:
  ShardStoreOptions Opts() const {
    ShardStoreOptions o;
    o.num_clients = 1;
    o.block_cache_mb = 4;
    o.write_buffer_mb = 4;
    o.row_cache_mb = 4;
    o.clock_log = GetParam();
    return o;
  }
  void SetUp() override {
    dir_ = tmp_.Sub("s");
    s_ = OpenOrDie(Opts(), dir_);
    ASSERT_NE(s_, nullptr);
    ASSERT_TRUE(
        s_->CreateTable(MakeSchema("i", RowKind::kDense, ElementType::kI64, kWidth), &ints_).ok());
    TableSchema f = MakeSchema("f", RowKind::kDense, ElementType::kF32, 3);
    f.init = Initializer{InitKind::kUniform, -1, 1, 5};
    ASSERT_TRUE(s_->CreateTable(f, &floats_).ok());
    ASSERT_TRUE(
        s_->CreateTable(MakeSchema("sp", RowKind::kSparse, ElementType::kI32, 100), &sparse_).ok());
  }

  Status Apply(ClockT clock, Batch* b, uint32_t part = 0, bool more = false,
               uint64_t incarnation = kProcessA) {
    BatchRequest req{0, clock, &b->Deltas()};
    req.part = part;
    req.more = more;
    req.incarnation = incarnation;
    std::vector<BatchResult> results;
    RETURN_IF_ERROR(s_->ApplyBatches({req}, &results));
    return results[0].status;
  }

  // Reads rows [0, kRows) of every table into the store's absent-row entries
  // for rows [10, 20) (and [0, 10) of the float and sparse tables).
  void ReadAbsent(const std::vector<uint64_t>& rows) {
    ShardStore::ReadView view = s_->View();
    for (uint32_t t : {ints_.id, floats_.id, sparse_.id}) {
      std::vector<std::string> values;
      std::vector<uint8_t> absent;
      ASSERT_TRUE(view.MultiGetOrAbsent(t, rows, &values, &absent).ok());
      for (size_t i = 0; i < rows.size(); ++i) {
        if (t != ints_.id || rows[i] >= 10) {
          ASSERT_EQ(absent[i], 1) << "row " << rows[i];
        }
      }
    }
  }

  // Every read of `store` returns `want` (table -> row -> value), and a row
  // not in it is absent.
  static void ExpectRows(ShardStore* store,
                         const std::map<uint32_t, std::map<uint64_t, std::string>>& want,
                         const char* when) {
    for (const auto& entry : want) {
      // Not structured bindings: clang (C++17) cannot capture those in the
      // Scan lambda below.
      const uint32_t table = entry.first;
      const std::map<uint64_t, std::string>& rows = entry.second;
      std::vector<uint64_t> keys;
      for (const auto& [row, value] : rows) keys.push_back(row);
      std::vector<std::string> got;
      ASSERT_TRUE(store->MultiGet(table, keys, &got).ok());
      std::vector<std::string> view_got;
      std::vector<uint8_t> absent;
      {
        ShardStore::ReadView view = store->View();
        ASSERT_TRUE(view.MultiGetOrAbsent(table, keys, &view_got, &absent).ok());
      }
      size_t i = 0;
      for (const auto& [row, value] : rows) {
        EXPECT_EQ(got[i], value) << "table " << table << " row " << row << " " << when;
        EXPECT_EQ(absent[i], 0) << "table " << table << " row " << row << " " << when;
        EXPECT_EQ(view_got[i], value) << "table " << table << " row " << row << " " << when;
        std::string single;
        ASSERT_TRUE(store->Get(table, row, &single).ok());
        EXPECT_EQ(single, value) << "table " << table << " row " << row << " " << when;
        ++i;
      }
      size_t scanned = 0;
      ASSERT_TRUE(store
                      ->Scan(table, 0,
                             [&](uint64_t row, std::string_view v) {
                               auto it = rows.find(row);
                               EXPECT_NE(it, rows.end()) << "scanned row " << row << " " << when;
                               if (it != rows.end()) {
                                 EXPECT_EQ(v, it->second) << when;
                               }
                               ++scanned;
                               return true;
                             })
                      .ok());
      EXPECT_EQ(scanned, rows.size()) << "table " << table << " " << when;
    }
  }

  ScopedTempDir tmp_;
  std::string dir_;
  std::unique_ptr<ShardStore> s_;
  TableSchema ints_, floats_, sparse_;
};

// Rows with bytes add the delta; rows without take it whole; a row's second
// delta in the batch adds to the first.
// Reads, a read-only open that replays the group's log record, a write-back
// and a reopen all see the same exact values.
TEST_P(FirstDeltaTest, AFirstDeltaBecomesTheRowAndEveryReadIsExact) {
  std::map<uint32_t, std::map<uint64_t, std::string>> want;
  {
    Batch b;
    for (uint64_t r = 0; r < 10; ++r) b.Add(ints_.id, r, I64Row(100 * (r + 1)));
    ASSERT_TRUE(Apply(0, &b).ok());
  }
  std::vector<uint64_t> read;
  for (uint64_t r = 0; r < 20; ++r) read.push_back(r);
  ASSERT_NO_FATAL_FAILURE(ReadAbsent(read));

  Batch b;
  for (uint64_t r = 0; r < kRows; ++r) {
    const int64_t v = static_cast<int64_t>(r) + 1;
    b.Add(ints_.id, r, I64Row(v));
    int64_t sum = r < 10 ? 100 * v + v : v;
    for (uint64_t rep : kRepeated) {
      if (rep != r) continue;
      b.Add(ints_.id, r, I64Row(-3));
      sum -= 3;
    }
    want[ints_.id][r] = I64Row(sum);
  }
  for (uint64_t r = 0; r < 20; r += 2) {
    // Read as absent: the initializer plus the delta (halves add exactly).
    b.Add(floats_.id, r, EncodeDense<float>({0.5f, -0.25f, 2.0f}));
    std::string init;
    InitRow(floats_, r, &init);
    std::vector<float> v = DecodeDense<float>(init);
    v[0] += 0.5f;
    v[1] += -0.25f;
    v[2] += 2.0f;
    want[floats_.id][r] = EncodeDense<float>(v);
  }
  for (uint64_t r = 0; r < kRows; r += 3) {
    b.Add(sparse_.id, r, EncodeSparse<int32_t>(std::map<uint32_t, int32_t>{{3, 5}, {9, 1}}));
    b.Add(sparse_.id, r, EncodeSparse<int32_t>(std::map<uint32_t, int32_t>{{3, -5}, {50, 2}}));
    want[sparse_.id][r] = EncodeSparse<int32_t>(std::map<uint32_t, int32_t>{{9, 1}, {50, 2}});
  }
  ASSERT_TRUE(Apply(1, &b).ok());
  if (GetParam()) {
    EXPECT_EQ(s_->data_path_stats().rows_read_for_write, 0u);
  }
  ASSERT_NO_FATAL_FAILURE(ExpectRows(s_.get(), want, "after the commit"));
  if (GetParam()) {
    // Nothing written back yet: a read-only open replays the log record.
    ShardStoreOptions ro = Opts();
    ro.read_only = true;
    std::unique_ptr<ShardStore> replayed = OpenOrDie(ro, dir_);
    ASSERT_NE(replayed, nullptr);
    EXPECT_GT(replayed->data_path_stats().replayed_records, 0u);
    ASSERT_NO_FATAL_FAILURE(ExpectRows(replayed.get(), want, "replayed from the log"));
  }
  ASSERT_TRUE(s_->WriteBack().ok());
  ASSERT_NO_FATAL_FAILURE(ExpectRows(s_.get(), want, "after a write-back"));
  s_.reset();
  s_ = OpenOrDie(Opts(), dir_);
  ASSERT_NO_FATAL_FAILURE(ExpectRows(s_.get(), want, "reopened"));
}

// Parts of an incomplete clock whose first deltas became rows are taken back
// exactly, and the next process's clock adds to the rows the undo left.
TEST_P(FirstDeltaTest, AnUndoneIncompleteClockRestoresRowsItsFirstDeltasMade) {
  std::map<uint32_t, std::map<uint64_t, std::string>> want;
  {
    Batch b;
    for (uint64_t r = 0; r < 10; ++r) b.Add(ints_.id, r, I64Row(7));
    ASSERT_TRUE(Apply(0, &b).ok());
  }
  std::vector<uint64_t> read;
  for (uint64_t r = 10; r < 20; ++r) read.push_back(r);
  ASSERT_NO_FATAL_FAILURE(ReadAbsent(read));
  Batch part0, part1;
  for (uint64_t r = 0; r < kRows; ++r) part0.Add(ints_.id, r, I64Row(1000));
  for (uint64_t r = 5; r < 25; ++r) part1.Add(ints_.id, r, I64Row(20));
  ASSERT_TRUE(Apply(1, &part0, 0, /*more=*/true).ok());
  ASSERT_TRUE(Apply(1, &part1, 1, /*more=*/true).ok());
  std::string v;
  ASSERT_TRUE(s_->Get(ints_.id, 22, &v).ok());
  ASSERT_EQ(v, I64Row(1020));

  UndoResult undo;
  ASSERT_TRUE(s_->UndoIncompleteClock(0, kProcessB, &undo).ok());
  ASSERT_TRUE(undo.undone);
  EXPECT_EQ(undo.parts, 2u);
  for (uint64_t r = 0; r < kRows; ++r) want[ints_.id][r] = I64Row(r < 10 ? 7 : 0);
  ASSERT_NO_FATAL_FAILURE(ExpectRows(s_.get(), want, "after the undo"));

  Batch again;
  for (uint64_t r = 0; r < kRows; ++r) again.Add(ints_.id, r, I64Row(3));
  ASSERT_TRUE(Apply(1, &again, 0, /*more=*/false, kProcessB).ok());
  for (uint64_t r = 0; r < kRows; ++r) want[ints_.id][r] = I64Row(r < 10 ? 10 : 3);
  ASSERT_NO_FATAL_FAILURE(ExpectRows(s_.get(), want, "after the clock ran again"));
  s_.reset();
  s_ = OpenOrDie(Opts(), dir_);
  ASSERT_NO_FATAL_FAILURE(ExpectRows(s_.get(), want, "reopened"));
}

INSTANTIATE_TEST_SUITE_P(WritePaths, FirstDeltaTest, ::testing::Values(true, false),
                         [](const ::testing::TestParamInfo<bool>& p) {
                           return p.param ? std::string("ClockLog") : std::string("RocksDbWrites");
                         });

}  // namespace
}  // namespace pace
