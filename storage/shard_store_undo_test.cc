// The undo records of incomplete clocks (docs/storage-format.md section 4):
// parts of a clock kept until it completes, and taken back exactly once when
// another process of the client starts.
#include <gtest/gtest.h>
#include <rocksdb/db.h>
#include <rocksdb/options.h>

#include <filesystem>
#include <fstream>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "common/row.h"
#include "storage/clock_log.h"
#include "storage/key_format.h"
#include "storage/shard_store.h"
#include "storage/testing/storage_test_util.h"

namespace pace {
namespace {

using testing_util::MakeSchema;
using testing_util::ScopedTempDir;

constexpr uint64_t kProcessA = 0xa11ce;
constexpr uint64_t kProcessB = 0xb0b;

class UndoTest : public ::testing::TestWithParam<bool> {
 protected:
  ShardStoreOptions Opts() const {
    ShardStoreOptions o;
    o.num_clients = 2;
    o.block_cache_mb = 4;
    o.write_buffer_mb = 4;
    o.row_cache_mb = 4;
    o.clock_log = GetParam();
    // A write-back after every group: the records must outlive them.
    o.writeback_every_groups = writeback_every_groups_;
    return o;
  }
  std::unique_ptr<ShardStore> Open() {
    std::unique_ptr<ShardStore> s;
    Status st = ShardStore::Open(Opts(), dir_.path(), &s);
    EXPECT_TRUE(st.ok()) << st.ToString();
    return s;
  }
  // Applies one batch: `value` added to rows [0, rows) of table `t`.
  static BatchResult Apply(ShardStore* s, uint32_t t, ClientId client, ClockT clock, uint32_t part,
                           bool more, uint64_t incarnation, int64_t value, int rows = 3) {
    std::string bytes = EncodeDense<int64_t>({value, -value});
    std::vector<RowDelta> deltas;
    for (int r = 0; r < rows; ++r) deltas.push_back(RowDelta{t, static_cast<uint64_t>(r), bytes});
    BatchRequest req{client, clock, &deltas};
    req.part = part;
    req.more = more;
    req.incarnation = incarnation;
    std::vector<BatchResult> results;
    Status st = s->ApplyBatches({req}, &results);
    EXPECT_TRUE(st.ok()) << st.ToString();
    EXPECT_TRUE(results[0].status.ok()) << results[0].status.ToString();
    return results[0];
  }
  // A dense i64 table of width 2; its id.
  static uint32_t CreateCounts(ShardStore* s) {
    TableSchema created;
    Status st =
        s->CreateTable(MakeSchema("counts", RowKind::kDense, ElementType::kI64, 2), &created);
    EXPECT_TRUE(st.ok()) << st.ToString();
    return created.id;
  }
  static std::vector<int64_t> Row(ShardStore* s, uint32_t t, uint64_t row) {
    std::string v;
    Status st = s->Get(t, row, &v);
    EXPECT_TRUE(st.ok()) << st.ToString();
    return DecodeDense<int64_t>(v);
  }
  // The undo record files in `dir`.
  static size_t UndoFiles(const std::string& dir) {
    size_t n = 0;
    for (const auto& f : std::filesystem::directory_iterator(dir)) {
      n += f.path().filename().string().rfind("UNDO-", 0) == 0;
    }
    return n;
  }
  // The undo keys in the store's RocksDB (the store must be closed).
  size_t UndoKeys() {
    rocksdb::Options o;
    rocksdb::DB* raw = nullptr;
    rocksdb::Status s = rocksdb::DB::OpenForReadOnly(o, dir_.path(), &raw);
    EXPECT_TRUE(s.ok()) << s.ToString();
    if (!s.ok()) return 0;
    std::unique_ptr<rocksdb::DB> db(raw);
    std::unique_ptr<rocksdb::Iterator> it(db->NewIterator(rocksdb::ReadOptions()));
    size_t n = 0;
    for (it->Seek(std::string(1, storage_format::kUndoPrefix));
         it->Valid() && it->key()[0] == storage_format::kUndoPrefix; it->Next()) {
      ++n;
    }
    return n;
  }

  ScopedTempDir dir_;
  uint32_t writeback_every_groups_ = 1;
};

TEST_P(UndoTest, PartsOfAnEndedProcessAreTakenBackExactlyOnce) {
  uint32_t t;
  {
    auto s = Open();
    t = CreateCounts(s.get());
    Apply(s.get(), t, 0, 0, 0, false, kProcessA, 10);  // clock 0, whole
    Apply(s.get(), t, 1, 0, 0, false, kProcessB, 1);   // the other client's clock 0
    Apply(s.get(), t, 0, 1, 0, true, kProcessA, 100);  // clock 1 in parts: 0, 1
    Apply(s.get(), t, 0, 1, 1, true, kProcessA, 1000, 2);
    const IncompleteClock ic = s->IncompleteClockOf(0);
    EXPECT_EQ(ic.clock, 1);
    EXPECT_EQ(ic.parts, 2u);
    EXPECT_TRUE(ic.undoable);
    EXPECT_EQ(ic.incarnation, kProcessA);
    EXPECT_EQ(s->IncompleteClockOf(1).parts, 0u);
    EXPECT_EQ(Row(s.get(), t, 0), (std::vector<int64_t>{1111, -1111}));
    EXPECT_EQ(Row(s.get(), t, 2), (std::vector<int64_t>{111, -111}));
  }
  EXPECT_EQ(UndoKeys(), 2u);
  EXPECT_EQ(UndoFiles(dir_.path()), 2u);
  auto s = Open();  // as after a crash of the client: the parts stay recorded
  EXPECT_EQ(s->IncompleteClockOf(0).parts, 2u);
  EXPECT_TRUE(s->IncompleteClockOf(0).undoable);
  EXPECT_EQ(s->IncompleteClockOf(0).incarnation, kProcessA);
  // The same process (a reconnect) and an unknown one keep them.
  UndoResult r;
  EXPECT_FALSE(NeedsUndo(s->IncompleteClockOf(0), kProcessA));
  ASSERT_TRUE(s->UndoIncompleteClock(0, kProcessA, &r).ok());
  EXPECT_FALSE(r.undone);
  ASSERT_TRUE(s->UndoIncompleteClock(0, 0, &r).ok());
  EXPECT_FALSE(r.undone);
  EXPECT_EQ(s->AppliedParts(0), 2u);
  // Another process: taken back, the clock's parts reset.
  EXPECT_TRUE(NeedsUndo(s->IncompleteClockOf(0), kProcessB + 1));
  ASSERT_TRUE(s->UndoIncompleteClock(0, kProcessB + 1, &r).ok());
  EXPECT_TRUE(r.undone);
  EXPECT_EQ(r.clock, 1);
  EXPECT_EQ(r.parts, 2u);
  EXPECT_EQ(r.rows.size(), 3u);
  EXPECT_EQ(s->AppliedClock(0), 1);
  EXPECT_EQ(s->AppliedParts(0), 0u);
  EXPECT_FALSE(s->IncompleteClockOf(0).undoable);
  EXPECT_EQ(Row(s.get(), t, 0), (std::vector<int64_t>{11, -11}));
  EXPECT_EQ(Row(s.get(), t, 2), (std::vector<int64_t>{11, -11}));
  // Never twice.
  ASSERT_TRUE(s->UndoIncompleteClock(0, kProcessB + 2, &r).ok());
  EXPECT_FALSE(r.undone);
  EXPECT_EQ(Row(s.get(), t, 0), (std::vector<int64_t>{11, -11}));
  // The new process re-runs clock 1 from part 0.
  Apply(s.get(), t, 0, 1, 0, true, kProcessB + 1, 7);
  Apply(s.get(), t, 0, 1, 1, false, kProcessB + 1, 7);
  EXPECT_EQ(s->AppliedClock(0), 2);
  EXPECT_EQ(Row(s.get(), t, 0), (std::vector<int64_t>{25, -25}));
  s.reset();
  EXPECT_EQ(UndoKeys(), 0u);
  EXPECT_EQ(UndoFiles(dir_.path()), 0u);
  s = Open();
  EXPECT_EQ(Row(s.get(), t, 0), (std::vector<int64_t>{25, -25}));
  EXPECT_EQ(s->AppliedParts(0), 0u);
}

TEST_P(UndoTest, ACompletedClockDropsItsRecordsAndWholeClocksWriteNone) {
  uint32_t t;
  {
    auto s = Open();
    t = CreateCounts(s.get());
    Apply(s.get(), t, 0, 0, 0, false, kProcessA, 1);
    Apply(s.get(), t, 0, 1, 0, false, kProcessA, 1);
  }
  EXPECT_EQ(UndoKeys(), 0u);  // whole clocks: no undo record
  {
    auto s = Open();
    Apply(s.get(), t, 0, 2, 0, true, kProcessA, 1);
    Apply(s.get(), t, 0, 2, 1, true, kProcessA, 1);
    Apply(s.get(), t, 0, 2, 2, false, kProcessA, 1);  // completes clock 2
    EXPECT_EQ(s->IncompleteClockOf(0).parts, 0u);
    EXPECT_FALSE(NeedsUndo(s->IncompleteClockOf(0), kProcessB));
    // Completed by a last part numbered below the parts applied (another
    // process's cut of the clock) too.
    Apply(s.get(), t, 0, 3, 0, true, kProcessA, 1);
    Apply(s.get(), t, 0, 3, 1, true, kProcessA, 1);
    EXPECT_TRUE(Apply(s.get(), t, 0, 3, 0, false, 0, 1).duplicate);
    EXPECT_EQ(s->AppliedClock(0), 4);
  }
  EXPECT_EQ(UndoKeys(), 0u);
  auto s = Open();
  UndoResult r;
  ASSERT_TRUE(s->UndoIncompleteClock(0, kProcessB, &r).ok());
  EXPECT_FALSE(r.undone);
  EXPECT_EQ(Row(s.get(), t, 0), (std::vector<int64_t>{7, -7}));
}

TEST_P(UndoTest, FloatAndSparseRowsAreTakenBackWithinRounding) {
  auto s = Open();
  TableSchema f, sp;
  ASSERT_TRUE(s->CreateTable(MakeSchema("f", RowKind::kDense, ElementType::kF32, 2), &f).ok());
  ASSERT_TRUE(s->CreateTable(MakeSchema("sp", RowKind::kSparse, ElementType::kI32, 0), &sp).ok());
  auto apply = [&](ClockT clock, uint32_t part, bool more, float x, int32_t y, uint32_t col) {
    std::string fb = EncodeDense<float>({x, -x});
    std::string sb = EncodeSparse(std::vector<std::pair<uint32_t, int32_t>>{{col, y}});
    std::vector<RowDelta> deltas = {{f.id, 0, fb}, {sp.id, 5, sb}};
    BatchRequest req{0, clock, &deltas};
    req.part = part;
    req.more = more;
    req.incarnation = kProcessA;
    std::vector<BatchResult> results;
    ASSERT_TRUE(s->ApplyBatches({req}, &results).ok());
    ASSERT_TRUE(results[0].status.ok()) << results[0].status.ToString();
  };
  apply(0, 0, false, 0.1f, 3, 1);
  apply(1, 0, true, 1e3f, 4, 1);
  apply(1, 1, true, 0.3f, 9, 7);
  UndoResult r;
  ASSERT_TRUE(s->UndoIncompleteClock(0, kProcessB, &r).ok());
  ASSERT_TRUE(r.undone);
  std::string v;
  ASSERT_TRUE(s->Get(f.id, 0, &v).ok());
  const std::vector<float> got = DecodeDense<float>(v);
  EXPECT_NEAR(got[0], 0.1f, 1e-3);
  EXPECT_NEAR(got[1], -0.1f, 1e-3);
  ASSERT_TRUE(s->Get(sp.id, 5, &v).ok());
  // Column 7 summed to 0 and is dropped; column 1 is back to 3.
  EXPECT_EQ(v, EncodeSparse(std::vector<std::pair<uint32_t, int32_t>>{{1, 3}}));
}

TEST_P(UndoTest, ACheckpointCarriesTheRecordsOfAnIncompleteClock) {
  auto s = Open();
  const uint32_t t = CreateCounts(s.get());
  Apply(s.get(), t, 0, 0, 0, true, kProcessA, 5);
  Apply(s.get(), t, 0, 0, 1, true, kProcessA, 50);
  EXPECT_EQ(UndoFiles(dir_.path()), 2u);
  const std::string cp = dir_.Sub("cp"), restored = dir_.Sub("restored");
  ASSERT_TRUE(s->CreateCheckpoint(cp).ok());
  s.reset();
  ASSERT_TRUE(ShardStore::RestoreCheckpoint(cp, restored).ok());
  std::unique_ptr<ShardStore> r;
  ASSERT_TRUE(ShardStore::Open(Opts(), restored, &r).ok());
  EXPECT_EQ(Row(r.get(), t, 1), (std::vector<int64_t>{55, -55}));
  UndoResult u;
  ASSERT_TRUE(r->UndoIncompleteClock(0, kProcessB, &u).ok());
  EXPECT_TRUE(u.undone);
  EXPECT_EQ(Row(r.get(), t, 1), (std::vector<int64_t>{0, 0}));
  EXPECT_EQ(UndoFiles(restored), 0u);  // no key points to them: removed
}

// With the clock log and no write-back between them, a kept part's record is
// the clock log record of its group (no file, no second copy of its
// deltas); a write-back moves it to a file before the log's bytes are
// reused; either way the parts are taken back exactly once.
TEST_P(UndoTest, APartAloneInItsGroupIsRecordedByItsClockLogRecord) {
  writeback_every_groups_ = 0;  // write-backs at the budgets only (none here)
  auto s = Open();
  const uint32_t t = CreateCounts(s.get());
  Apply(s.get(), t, 0, 0, 0, false, kProcessA, 10);
  Apply(s.get(), t, 0, 1, 0, true, kProcessA, 100);
  Apply(s.get(), t, 0, 1, 1, true, kProcessA, 1000, 2);
  EXPECT_TRUE(s->IncompleteClockOf(0).undoable);
  EXPECT_EQ(UndoFiles(dir_.path()), GetParam() ? 0u : 2u);
  UndoResult r;
  ASSERT_TRUE(s->UndoIncompleteClock(0, kProcessB, &r).ok());
  ASSERT_TRUE(r.undone);
  EXPECT_EQ(r.parts, 2u);
  EXPECT_EQ(Row(s.get(), t, 0), (std::vector<int64_t>{10, -10}));
  EXPECT_EQ(Row(s.get(), t, 2), (std::vector<int64_t>{10, -10}));

  // Clock 1 again, one part, then a write-back (the log restarts), then the
  // next part: the first part's record moved to a file, the second's is in
  // the new log.
  Apply(s.get(), t, 0, 1, 0, true, kProcessB, 3);
  ASSERT_TRUE(s->WriteBack().ok());
  if (GetParam()) {
    EXPECT_EQ(UndoFiles(dir_.path()), 1u);
  }
  Apply(s.get(), t, 0, 1, 1, true, kProcessB, 30);
  EXPECT_EQ(UndoFiles(dir_.path()), GetParam() ? 1u : 2u);
  EXPECT_EQ(Row(s.get(), t, 0), (std::vector<int64_t>{43, -43}));
  ASSERT_TRUE(s->UndoIncompleteClock(0, kProcessB + 1, &r).ok());
  ASSERT_TRUE(r.undone);
  EXPECT_EQ(Row(s.get(), t, 0), (std::vector<int64_t>{10, -10}));
  // Completed by the next process; nothing left to take back, no file left.
  Apply(s.get(), t, 0, 1, 0, false, kProcessB + 1, 5);
  EXPECT_EQ(s->AppliedClock(0), 2);
  s.reset();
  EXPECT_EQ(UndoKeys(), 0u);
  EXPECT_EQ(UndoFiles(dir_.path()), 0u);
  s = Open();
  EXPECT_EQ(Row(s.get(), t, 0), (std::vector<int64_t>{15, -15}));
}

// A part kept in the clock log survives the store's close (which writes the
// rows back and restarts the log): the next open finds a file.
TEST_P(UndoTest, APartInTheClockLogOutlivesAClose) {
  writeback_every_groups_ = 0;
  uint32_t t;
  {
    auto s = Open();
    t = CreateCounts(s.get());
    Apply(s.get(), t, 0, 0, 0, true, kProcessA, 100);
  }
  EXPECT_EQ(UndoFiles(dir_.path()), 1u);
  auto s = Open();
  EXPECT_EQ(Row(s.get(), t, 1), (std::vector<int64_t>{100, -100}));
  UndoResult r;
  ASSERT_TRUE(s->UndoIncompleteClock(0, kProcessB, &r).ok());
  ASSERT_TRUE(r.undone);
  EXPECT_EQ(Row(s.get(), t, 1), (std::vector<int64_t>{0, 0}));
}

// A kept part whose clock log record is damaged cannot be taken back, but
// the store goes on: write-backs succeed (the record is left where it is),
// and a later process's undo leaves the part applied instead of failing.
TEST_P(UndoTest, ADamagedPartInTheClockLogLeavesWriteBacksWorking) {
  if (!GetParam()) GTEST_SKIP() << "parts are kept in the clock log only with it";
  writeback_every_groups_ = 0;
  auto s = Open();
  const uint32_t t = CreateCounts(s.get());
  Apply(s.get(), t, 0, 0, 0, true, kProcessA, 100);
  EXPECT_EQ(UndoFiles(dir_.path()), 0u);
  // Damage a byte of the payload of the last record of the newest log file.
  std::string log;
  for (const auto& f : std::filesystem::directory_iterator(dir_.path())) {
    uint64_t number;
    if (ParseClockLogName(f.path().filename().string(), &number) && f.path().string() > log) {
      log = f.path().string();
    }
  }
  ASSERT_FALSE(log.empty());
  std::string bytes;
  {
    std::ifstream in(log, std::ios::binary);
    bytes.assign(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>());
  }
  const size_t record = bytes.rfind("PCLG");
  ASSERT_NE(record, std::string::npos);
  const size_t damaged = record + kClockLogHeaderBytes + kClockLogEntryHeaderBytes + 1;
  ASSERT_LT(damaged, bytes.size());
  {
    std::fstream io(log, std::ios::binary | std::ios::in | std::ios::out);
    io.seekp(static_cast<std::streamoff>(damaged));
    io.put(static_cast<char>(bytes[damaged] ^ 0x5a));
  }
  Status wb = s->WriteBack();
  EXPECT_TRUE(wb.ok()) << wb.ToString();
  EXPECT_EQ(UndoFiles(dir_.path()), 0u);
  UndoResult r;
  Status undo = s->UndoIncompleteClock(0, kProcessB, &r);
  EXPECT_TRUE(undo.ok()) << undo.ToString();
  EXPECT_FALSE(r.undone);
  EXPECT_EQ(Row(s.get(), t, 1), (std::vector<int64_t>{100, -100}));
  // The store still takes batches and writes them back.
  Apply(s.get(), t, 0, 0, 1, false, kProcessB, 1);
  EXPECT_EQ(s->AppliedClock(0), 1);
  wb = s->WriteBack();
  EXPECT_TRUE(wb.ok()) << wb.ToString();
  EXPECT_EQ(Row(s.get(), t, 1), (std::vector<int64_t>{101, -101}));
}

INSTANTIATE_TEST_SUITE_P(WritePaths, UndoTest, ::testing::Values(true, false),
                         [](const ::testing::TestParamInfo<bool>& p) {
                           return p.param ? "ClockLog" : "RowWrites";
                         });

}  // namespace
}  // namespace pace
