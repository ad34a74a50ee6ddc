// The clock log's record format, checksums and recovery of a killed writer.
#include "storage/clock_log.h"

#include <gtest/gtest.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include "common/row.h"
#include "storage/shard_store.h"
#include "storage/testing/storage_test_util.h"

namespace pace {
namespace {

using testing_util::MakeSchema;

TEST(Crc32cTest, KnownValuesAndContinuation) {
  const std::string s = "123456789";
  EXPECT_EQ(Crc32c(0, s.data(), s.size()), 0xE3069283u);  // the CRC-32C check value
  EXPECT_EQ(Crc32c(Crc32c(0, s.data(), 4), s.data() + 4, 5), 0xE3069283u);
  std::string big(100003, 'x');
  for (size_t i = 0; i < big.size(); ++i) big[i] = static_cast<char>(i * 7);
  uint32_t whole = Crc32c(0, big.data(), big.size());
  uint32_t parts = Crc32c(Crc32c(0, big.data(), 12345), big.data() + 12345, big.size() - 12345);
  EXPECT_EQ(whole, parts);
}

// The hardware path sums three blocks at once and joins their CRCs: every
// length around its block sizes and every start gives the table's CRC.
TEST(Crc32cTest, MatchesTheBytewiseDefinitionAtEveryBlockBoundary) {
  std::string big(3 * 3 * 4096 + 64, '\0');
  for (size_t i = 0; i < big.size(); ++i) big[i] = static_cast<char>((i * 2654435761u) >> 13);
  auto bytewise = [](uint32_t crc, const char* p, size_t n) {
    crc = ~crc;
    for (size_t i = 0; i < n; ++i) {
      crc ^= static_cast<unsigned char>(p[i]);
      for (int k = 0; k < 8; ++k) crc = (crc >> 1) ^ ((crc & 1) ? 0x82f63b78u : 0);
    }
    return ~crc;
  };
  for (size_t n : {size_t{0}, size_t{1}, size_t{8}, size_t{12287}, size_t{12288}, size_t{12289},
                   size_t{24576}, size_t{24583}, size_t{36863}, size_t{36864}, big.size() - 3}) {
    for (size_t start : {size_t{0}, size_t{3}}) {
      for (uint32_t init : {0u, 0xE3069283u}) {
        ASSERT_EQ(Crc32c(init, big.data() + start, n), bytewise(init, big.data() + start, n))
            << "length " << n << " from " << start << " continuing " << init;
      }
    }
  }
}

struct Rec {
  uint64_t seq;
  std::vector<std::pair<uint64_t, std::string>> rows;
};

std::vector<Rec> ReadAll(const std::string& dir, uint64_t number, uint64_t end, uint64_t first,
                         Status* status) {
  std::vector<Rec> out;
  *status = ReadClockLog(dir, number, end, first,
                         [&](uint64_t seq, const std::vector<ClockLogEntry>& e) -> Status {
                           Rec r{seq, {}};
                           for (const ClockLogEntry& x : e) {
                             EXPECT_EQ(x.table, 7u);
                             r.rows.emplace_back(x.row, std::string(x.bytes));
                           }
                           out.push_back(std::move(r));
                           return Status::OK();
                         });
  return out;
}

// Records smaller than a block and larger than the staging buffer (written
// in several pieces) read back exactly, with the largest stage and with small
// ones (a store sized from a small memory budget); the end offset bounds what
// is read.
TEST(ClockLogTest, RecordsOfAnySizeReadBackAndTheEndBoundsThem) {
  for (size_t stage :
       {ClockLogWriter::kMaxStageBytes, ClockLogWriter::kMinStageBytes, size_t{300000}}) {
    SCOPED_TRACE("stage " + std::to_string(stage));
    ScopedTempDir tmp;
    ClockLogWriter w(stage);
    EXPECT_EQ(w.stage_bytes() % ClockLogWriter::kAlign, 0u);
    EXPECT_GE(w.stage_bytes(), stage);
    EXPECT_LE(w.stage_bytes(), ClockLogWriter::kMaxStageBytes);
    ASSERT_TRUE(w.Open(tmp.path(), 3, 0).ok());
    std::vector<size_t> counts = {1, 0, 5000, 40000};  // 40000 x 516 B > 8 MiB
    std::vector<uint64_t> ends;
    for (size_t k = 0; k < counts.size(); ++k) {
      std::vector<std::string> rows(counts[k]);
      for (size_t i = 0; i < rows.size(); ++i) rows[i] = std::string(516, static_cast<char>(i + k));
      ASSERT_TRUE(w.Append(
                       10 + k, rows.size(),
                       [&](size_t i) {
                         return ClockLogEntry{7, i * 3 + k, rows[i]};
                       },
                       false)
                      .ok());
      ends.push_back(w.offset());
    }
    EXPECT_EQ(w.buffer_bytes(), 2 * w.stage_bytes());
    Status s;
    std::vector<Rec> got = ReadAll(tmp.path(), 3, ends.back(), 10, &s);
    ASSERT_TRUE(s.ok()) << s.ToString();
    ASSERT_EQ(got.size(), counts.size());
    for (size_t k = 0; k < counts.size(); ++k) {
      EXPECT_EQ(got[k].seq, 10 + k);
      ASSERT_EQ(got[k].rows.size(), counts[k]);
      for (size_t i = 0; i < counts[k]; i += 997) {
        EXPECT_EQ(got[k].rows[i].first, i * 3 + k);
        EXPECT_EQ(got[k].rows[i].second, std::string(516, static_cast<char>(i + k)));
      }
    }
    // Only the committed records: [0, ends[1]).
    got = ReadAll(tmp.path(), 3, ends[1], 10, &s);
    ASSERT_TRUE(s.ok());
    EXPECT_EQ(got.size(), 2u);
    // Sequence numbers must run on from the first expected one.
    ReadAll(tmp.path(), 3, ends.back(), 11, &s);
    EXPECT_EQ(s.code(), StatusCode::kCorruption) << s.ToString();
    // A missing file with a committed end is NotFound.
    ReadAll(tmp.path(), 4, ends.back(), 10, &s);
    EXPECT_EQ(s.code(), StatusCode::kNotFound);
  }
}

// A store sized from a large row cache (512 MiB: a sixteenth is 32 MiB) stages
// through at most two buffers of kMaxStageBytes: the staging is memory the
// store holds for as long as it is open.
TEST(ClockLogTest, StagingIsAtMostTwoBuffersOfTheLargestStage) {
  ScopedTempDir tmp;
  ClockLogWriter w((size_t{512} << 20) / 16);
  EXPECT_EQ(w.stage_bytes(), ClockLogWriter::kMaxStageBytes);
  ASSERT_TRUE(w.Open(tmp.path(), 1, 0).ok());
  EXPECT_EQ(w.buffer_bytes(), 2 * ClockLogWriter::kMaxStageBytes);
  ClockLogWriter tiny(1);
  EXPECT_EQ(tiny.stage_bytes(), ClockLogWriter::kMinStageBytes);
}

TEST(ClockLogTest, AFlippedByteIsCorruptionNamingTheFile) {
  ScopedTempDir tmp;
  ClockLogWriter w;
  ASSERT_TRUE(w.Open(tmp.path(), 1, 0).ok());
  std::string row(100, 'a');
  ASSERT_TRUE(w.Append(
                   1, 50,
                   [&](size_t i) {
                     return ClockLogEntry{7, i, row};
                   },
                   false)
                  .ok());
  const uint64_t end = w.offset();
  w.Close();
  const std::string path = ClockLogPath(tmp.path(), 1);
  {
    std::fstream f(path, std::ios::in | std::ios::out | std::ios::binary);
    f.seekp(kClockLogHeaderBytes + 1000);
    f.put('b');
  }
  Status s;
  ReadAll(tmp.path(), 1, end, 1, &s);
  EXPECT_EQ(s.code(), StatusCode::kCorruption);
  EXPECT_NE(s.message().find(path), std::string::npos) << s.message();
  EXPECT_NE(s.message().find("checksum"), std::string::npos) << s.message();
}

// Restart reuses the file under the next number; old bytes past the new end
// are never read.
TEST(ClockLogTest, RestartReusesTheFileFromOffsetZero) {
  ScopedTempDir tmp;
  ClockLogWriter w;
  ASSERT_TRUE(w.Open(tmp.path(), 1, 0).ok());
  std::string row(4000, 'a');
  for (uint64_t seq = 1; seq <= 3; ++seq) {
    ASSERT_TRUE(w.Append(
                     seq, 100,
                     [&](size_t i) {
                       return ClockLogEntry{7, i, row};
                     },
                     false)
                    .ok());
  }
  ASSERT_TRUE(w.Restart(2).ok());
  EXPECT_EQ(w.offset(), 0u);
  EXPECT_NE(::access(ClockLogPath(tmp.path(), 2).c_str(), F_OK), -1);
  EXPECT_EQ(::access(ClockLogPath(tmp.path(), 1).c_str(), F_OK), -1);
  std::string b(10, 'b');
  ASSERT_TRUE(w.Append(
                   4, 1,
                   [&](size_t) {
                     return ClockLogEntry{7, 9, b};
                   },
                   true)
                  .ok());
  Status s;
  std::vector<Rec> got = ReadAll(tmp.path(), 2, w.offset(), 4, &s);
  ASSERT_TRUE(s.ok()) << s.ToString();
  ASSERT_EQ(got.size(), 1u);
  EXPECT_EQ(got[0].rows[0].second, b);
}

std::string I64Row(int64_t v, uint32_t width) {
  return EncodeDense<int64_t>(std::vector<int64_t>(width, v));
}

// The writers of the tests below run in a child process (the test binary
// again, running only ClockLogChild.Writer): a forked copy of a process
// whose RocksDB background threads already ran would have none.
int RunChild(const std::string& mode, const std::string& dir) {
  pid_t pid = ::fork();
  if (pid < 0) return -1;
  if (pid == 0) {
    ::setenv("PACE_CLOCK_LOG_CHILD", (mode + ":" + dir).c_str(), 1);
    ::execl("/proc/self/exe", "storage_test", "--gtest_filter=ClockLogChild.Writer", nullptr);
    ::_exit(127);
  }
  int status = 0;
  if (::waitpid(pid, &status, 0) != pid || !WIFEXITED(status)) return -1;
  return WEXITSTATUS(status);
}

// For the child writers below: opens the store in `dir` and creates the dense
// i64 table "t" of `width`; exits 2 (open) or 3 (create) on failure.
std::unique_ptr<ShardStore> OpenWithTable(const ShardStoreOptions& o, const std::string& dir,
                                          uint32_t width, TableSchema* t) {
  std::unique_ptr<ShardStore> s;
  if (!ShardStore::Open(o, dir, &s).ok()) ::_exit(2);
  if (!s->CreateTable(MakeSchema("t", RowKind::kDense, ElementType::kI64, width), t).ok()) {
    ::_exit(3);
  }
  return s;
}

constexpr int kKilledClocks = 13;  // a write-back every two clocks: one record left
constexpr uint32_t kKilledWidth = 32;

ShardStoreOptions KilledWriterOptions() {
  ShardStoreOptions o;
  o.num_clients = 1;
  o.row_cache_mb = 4;  // the rows of every clock fit; the log budget writes back
  o.clock_log_mb = 1;
  return o;
}

// Exits the process with 0 after writing, without closing the store.
void KilledWriter(const std::string& dir) {
  TableSchema t;
  std::unique_ptr<ShardStore> s = OpenWithTable(KilledWriterOptions(), dir, kKilledWidth, &t);
  for (int c = 0; c < kKilledClocks; ++c) {
    std::vector<std::string> bytes(3000, I64Row(c + 1, kKilledWidth));
    std::vector<RowDelta> deltas;
    for (uint64_t r = 0; r < bytes.size(); ++r) deltas.push_back(RowDelta{t.id, r, bytes[r]});
    bool dup = false;
    if (!s->ApplyBatch(0, c, deltas, &dup).ok()) ::_exit(4);
  }
  if (s->data_path_stats().writebacks == 0) ::_exit(5);
  if (s->data_path_stats().log_offset == 0) ::_exit(6);  // something left to replay
  ::_exit(0);                                            // killed: no destructor, no write-back
}

constexpr int kDeltaClocks = 9;
constexpr uint64_t kDeltaRows = 500;

ShardStoreOptions DeltaWriterOptions() {
  ShardStoreOptions o;
  o.num_clients = 1;
  o.row_cache_mb = 1;
  o.writeback_every_groups = 2;
  return o;
}

// Clock c of the delta-only writer adds c + 1 to every element of each row r
// with r % 3 != c % 3 (so rows are left out of some clocks).
bool InDeltaClock(int c, uint64_t r) { return r % 3 != static_cast<uint64_t>(c) % 3; }

int64_t DeltaRowSum(int clocks, uint64_t r) {
  int64_t sum = 0;
  for (int c = 0; c < clocks; ++c) sum += InDeltaClock(c, r) ? c + 1 : 0;
  return sum;
}

// Clocks of deltas to rows it never reads, except the even rows after the
// fourth clock: the odd rows are delta-only (merge operands on top of
// earlier write-backs), the even ones whole; then exits without closing
// with records committed after the last write-back.
void DeltaWriter(const std::string& dir) {
  TableSchema t;
  std::unique_ptr<ShardStore> s = OpenWithTable(DeltaWriterOptions(), dir, 4, &t);
  for (int c = 0; c < kDeltaClocks; ++c) {
    std::vector<std::string> bytes;
    bytes.reserve(kDeltaRows);
    std::vector<RowDelta> deltas;
    for (uint64_t r = 0; r < kDeltaRows; ++r) {
      if (!InDeltaClock(c, r)) continue;
      bytes.push_back(I64Row(c + 1, 4));
      deltas.push_back(RowDelta{t.id, r, bytes.back()});
    }
    bool dup = false;
    if (!s->ApplyBatch(0, c, deltas, &dup).ok()) ::_exit(4);
    if (c == 4) {
      std::vector<uint64_t> even;
      for (uint64_t r = 0; r < kDeltaRows; r += 2) even.push_back(r);
      std::vector<std::string> got;
      if (!s->MultiGet(t.id, even, &got).ok()) ::_exit(5);
    }
  }
  const DataPathStats st = s->data_path_stats();
  if (st.writeback_operands == 0 || st.rows_read_for_write != 0) ::_exit(6);
  if (st.log_offset == 0) ::_exit(7);  // committed records to replay
  ::_exit(0);
}

void ReadOnlyWriter(const std::string& dir) {
  ShardStoreOptions o;
  o.num_clients = 1;
  TableSchema t;
  std::unique_ptr<ShardStore> s = OpenWithTable(o, dir, 2, &t);
  std::string one = I64Row(1, 2), two = I64Row(2, 2);
  bool dup;
  if (!s->ApplyBatch(0, 0, {RowDelta{t.id, 5, one}}, &dup).ok()) ::_exit(4);
  if (!s->WriteBack().ok()) ::_exit(5);  // row 5 in RocksDB
  if (!s->ApplyBatch(0, 1, {RowDelta{t.id, 5, two}, RowDelta{t.id, 9, two}}, &dup).ok()) {
    ::_exit(6);
  }
  ::_exit(0);
}

ShardStoreOptions UndurableOptions() {
  ShardStoreOptions o;
  o.num_clients = 1;
  o.durable = false;
  return o;
}

// An undurable store (ShardStoreOptions::durable = false) that applies two
// clocks and exits without closing.
void UndurableWriter(const std::string& dir) {
  TableSchema t;
  std::unique_ptr<ShardStore> s = OpenWithTable(UndurableOptions(), dir, 2, &t);
  std::string one = I64Row(1, 2);
  bool dup;
  for (int c = 0; c < 2; ++c) {
    if (!s->ApplyBatch(0, c, {RowDelta{t.id, 5, one}}, &dup).ok()) ::_exit(4);
  }
  if (s->data_path_stats().log_bytes != 0) ::_exit(5);  // nothing logged
  ::_exit(0);
}

constexpr uint64_t kPartsProcess = 0xa11ce;

// Applies clock 0 whole and clock 1 in two parts with more to come, each
// group that part alone: their undo records are the log records (no file);
// then exits without closing (killed mid-clock).
void PartsWriter(const std::string& dir) {
  ShardStoreOptions o;
  o.num_clients = 1;
  TableSchema t;
  std::unique_ptr<ShardStore> s = OpenWithTable(o, dir, 2, &t);
  const int64_t values[] = {1, 10, 100};
  for (int k = 0; k < 3; ++k) {
    const std::string bytes = I64Row(values[k], 2);
    std::vector<RowDelta> deltas;
    for (uint64_t r = 0; r < 4; ++r) deltas.push_back(RowDelta{t.id, r, bytes});
    BatchRequest req{0, k == 0 ? 0 : 1, &deltas};
    req.part = k == 0 ? 0 : static_cast<uint32_t>(k - 1);
    req.more = k > 0;
    req.incarnation = kPartsProcess;
    std::vector<BatchResult> results;
    if (!s->ApplyBatches({req}, &results).ok() || !results[0].status.ok()) ::_exit(4);
  }
  for (const auto& f : std::filesystem::directory_iterator(dir)) {
    if (f.path().filename().string().rfind("UNDO-", 0) == 0) ::_exit(5);  // a second copy
  }
  if (!s->IncompleteClockOf(0).undoable || s->IncompleteClockOf(0).parts != 2) ::_exit(6);
  ::_exit(0);
}

TEST(ClockLogChild, Writer) {
  const char* env = std::getenv("PACE_CLOCK_LOG_CHILD");
  if (env == nullptr) GTEST_SKIP() << "runs as the child of the tests below";
  const std::string arg = env;
  const size_t colon = arg.find(':');
  const std::string mode = arg.substr(0, colon), dir = arg.substr(colon + 1);
  if (mode == "killed") KilledWriter(dir);
  if (mode == "readonly") ReadOnlyWriter(dir);
  if (mode == "undurable") UndurableWriter(dir);
  if (mode == "delta") DeltaWriter(dir);
  if (mode == "parts") PartsWriter(dir);
  ::_exit(9);
}

// A process killed after its groups were committed (no close, no write-back):
// the next open replays every committed record exactly once, and the one
// after it replays nothing (the open wrote the rows back).
TEST(ClockLogStoreTest, AKilledWriterLosesNothingAndReplaysExactlyOnce) {
  ScopedTempDir tmp;
  const std::string dir = tmp.Sub("s");
  ASSERT_EQ(RunChild("killed", dir), 0);
  const ShardStoreOptions o = KilledWriterOptions();
  constexpr int kClocks = kKilledClocks;
  constexpr uint32_t kWidth = kKilledWidth;
  const int64_t want = kClocks * (kClocks + 1) / 2;
  for (int open = 0; open < 2; ++open) {
    std::unique_ptr<ShardStore> s;
    ASSERT_TRUE(ShardStore::Open(o, dir, &s).ok());
    EXPECT_EQ(s->AppliedClock(0), kClocks);
    if (open == 0) {
      EXPECT_GT(s->data_path_stats().replayed_records, 0u);
    } else {
      EXPECT_EQ(s->data_path_stats().replayed_records, 0u);
    }
    TableSchema t = *s->FindTable("t");
    for (uint64_t r : {uint64_t{0}, uint64_t{1234}, uint64_t{2999}}) {
      std::string v;
      ASSERT_TRUE(s->Get(t.id, r, &v).ok());
      EXPECT_EQ(v, I64Row(want, kWidth)) << "row " << r << ", open " << open;
    }
    // A read-only open sees the same (the rows it replays are its own).
    uint64_t rows = 0;
    ASSERT_TRUE(s->Scan(t.id, 0, [&](uint64_t, std::string_view v) {
                   EXPECT_EQ(v, I64Row(want, kWidth));
                   ++rows;
                   return true;
                 }).ok());
    EXPECT_EQ(rows, 3000u);
  }
}

// A process killed mid-clock after two parts whose undo records were their
// clock log records: the next open replays the parts once and keeps them
// undoable (moving their records to files before the log restarts), and a
// new process of the client takes them back exactly once.
TEST(ClockLogStoreTest, PartsRecordedInTheLogAreTakenBackAfterAKill) {
  ScopedTempDir tmp;
  const std::string dir = tmp.Sub("s");
  ASSERT_EQ(RunChild("parts", dir), 0);
  ShardStoreOptions o;
  o.num_clients = 1;
  for (int open = 0; open < 2; ++open) {
    std::unique_ptr<ShardStore> s;
    ASSERT_TRUE(ShardStore::Open(o, dir, &s).ok());
    const uint32_t t = s->FindTable("t")->id;
    std::string v;
    ASSERT_TRUE(s->Get(t, 3, &v).ok());
    if (open == 0) {
      EXPECT_EQ(v, I64Row(111, 2));
      const IncompleteClock ic = s->IncompleteClockOf(0);
      EXPECT_EQ(ic.clock, 1);
      EXPECT_EQ(ic.parts, 2u);
      ASSERT_TRUE(ic.undoable);
      UndoResult r;
      ASSERT_TRUE(s->UndoIncompleteClock(0, kPartsProcess + 1, &r).ok());
      EXPECT_TRUE(r.undone);
      EXPECT_EQ(r.parts, 2u);
      ASSERT_TRUE(s->Get(t, 3, &v).ok());
    }
    EXPECT_EQ(v, I64Row(1, 2)) << "open " << open;
    EXPECT_EQ(s->AppliedClock(0), 1);
    EXPECT_EQ(s->AppliedParts(0), 0u);
  }
}

// Killed with delta-only rows pending (their deltas in committed records
// only) on top of merge operands written back before: the first open adds
// each record once, the second adds nothing.
TEST(ClockLogStoreTest, AKilledWriterWithDeltaOnlyRowsReplaysExactlyOnce) {
  ScopedTempDir tmp;
  const std::string dir = tmp.Sub("s");
  ASSERT_EQ(RunChild("delta", dir), 0);
  for (int open = 0; open < 2; ++open) {
    std::unique_ptr<ShardStore> s;
    ASSERT_TRUE(ShardStore::Open(DeltaWriterOptions(), dir, &s).ok());
    EXPECT_EQ(s->AppliedClock(0), kDeltaClocks);
    EXPECT_EQ(s->data_path_stats().replayed_records > 0, open == 0);
    const uint32_t table = s->FindTable("t")->id;
    std::vector<uint64_t> rows;
    for (uint64_t r = 0; r < kDeltaRows; ++r) rows.push_back(r);
    std::vector<std::string> got;
    ASSERT_TRUE(s->MultiGet(table, rows, &got).ok());
    for (uint64_t r = 0; r < kDeltaRows; ++r) {
      ASSERT_EQ(got[r], I64Row(DeltaRowSum(kDeltaClocks, r), 4))
          << "row " << r << ", open " << open;
    }
  }
}

// A damaged committed record is Corruption for a writable and a read-only
// open alike (not "changed during the open": the file is still there), and
// the message names the file and the way out.
TEST(ClockLogStoreTest, ADamagedCommittedRecordIsRefusedWithTheWayOut) {
  ScopedTempDir tmp;
  const std::string dir = tmp.Sub("s");
  ASSERT_EQ(RunChild("killed", dir), 0);
  std::string log;
  for (const auto& f : std::filesystem::directory_iterator(dir)) {
    uint64_t n;
    if (ParseClockLogName(f.path().filename().string(), &n)) log = f.path().string();
  }
  ASSERT_FALSE(log.empty());
  {
    std::fstream f(log, std::ios::in | std::ios::out | std::ios::binary);
    f.seekp(kClockLogHeaderBytes + 100);
    f.put('\x7f');
  }
  ShardStoreOptions ro = KilledWriterOptions();
  ro.read_only = true;
  for (const ShardStoreOptions& o : {KilledWriterOptions(), ro}) {
    std::unique_ptr<ShardStore> s;
    Status st = ShardStore::Open(o, dir, &s);
    EXPECT_EQ(st.code(), StatusCode::kCorruption) << st.ToString();
    EXPECT_NE(st.message().find(log), std::string::npos) << st.message();
    EXPECT_NE(st.message().find("pacectl checkpoint restore"), std::string::npos) << st.message();
  }
}

// A read-only open beside no writer replays the log into its own memory and
// leaves the store as it is; Scan merges the replayed rows with RocksDB's.
TEST(ClockLogStoreTest, ReadOnlyOpenReplaysWithoutWriting) {
  ScopedTempDir tmp;
  const std::string dir = tmp.Sub("s");
  ASSERT_EQ(RunChild("readonly", dir), 0);
  ShardStoreOptions o;
  o.num_clients = 1;
  ShardStoreOptions ro = o;
  ro.read_only = true;
  for (int i = 0; i < 2; ++i) {
    std::unique_ptr<ShardStore> s;
    ASSERT_TRUE(ShardStore::Open(ro, dir, &s).ok());
    EXPECT_EQ(s->AppliedClock(0), 2);
    EXPECT_EQ(s->data_path_stats().replayed_records, 1u);  // each time: nothing written
    TableSchema t = *s->FindTable("t");
    std::vector<std::pair<uint64_t, std::string>> rows;
    ASSERT_TRUE(s->Scan(t.id, 0, [&](uint64_t r, std::string_view v) {
                   rows.emplace_back(r, std::string(v));
                   return true;
                 }).ok());
    ASSERT_EQ(rows.size(), 2u);
    EXPECT_EQ(rows[0], std::make_pair(uint64_t{5}, I64Row(3, 2)));
    EXPECT_EQ(rows[1], std::make_pair(uint64_t{9}, I64Row(2, 2)));
  }
}

// A small model trained for many clocks under the default budgets: its
// log is written back once it passes eight times the rows it changed (at
// least 64 MiB), long before the cap of four times the row cache's 512 MiB
// (2 GiB of log on disk and to replay for 0.5 MB of rows), and what a
// restart replays stays within that.
TEST(ClockLogStoreTest, TheLogOfASmallModelIsWrittenBackAtAFewTimesItsRows) {
  ScopedTempDir tmp;
  const std::string dir = tmp.Sub("s");
  ShardStoreOptions o;
  o.num_clients = 1;
  o.row_cache_mb = 512;  // the default: the log's cap is 2 GiB
  constexpr uint32_t kWidth = 64;
  constexpr uint64_t kRows = 1000;  // 0.5 MB of rows, ~0.5 MB of log a clock
  constexpr int kClocks = 200;      // ~100 MB of log in all
  {
    std::unique_ptr<ShardStore> s;
    ASSERT_TRUE(ShardStore::Open(o, dir, &s).ok());
    TableSchema t;
    ASSERT_TRUE(
        s->CreateTable(MakeSchema("t", RowKind::kDense, ElementType::kI64, kWidth), &t).ok());
    const std::string delta = I64Row(1, kWidth);
    std::vector<RowDelta> deltas;
    for (uint64_t r = 0; r < kRows; ++r) deltas.push_back(RowDelta{t.id, r, delta});
    bool dup = false;
    for (int c = 0; c < kClocks; ++c) ASSERT_TRUE(s->ApplyBatch(0, c, deltas, &dup).ok());
    const DataPathStats st = s->data_path_stats();
    EXPECT_GT(st.log_bytes, uint64_t{90} << 20);
    EXPECT_GE(st.writebacks, 1u);
    EXPECT_LE(st.log_offset, (uint64_t{64} << 20) + (uint64_t{1} << 20));
    EXPECT_GT(st.log_offset, 0u);  // records after the last write-back
  }  // the close writes the rows back: every clock is in the reopened store
  std::unique_ptr<ShardStore> s;
  ASSERT_TRUE(ShardStore::Open(o, dir, &s).ok());
  TableSchema t = *s->FindTable("t");
  std::string v;
  ASSERT_TRUE(s->Get(t.id, kRows - 1, &v).ok());
  EXPECT_EQ(v, I64Row(kClocks, kWidth));
}

// A log past its bound while a clock's parts are kept for undo is written
// back when the clock completes (no undo record to copy out of the log
// first), or, if the clock goes on, once the log is at twice its bound; the
// rows are exact either way.
TEST(ClockLogStoreTest, ALogPastItsBoundWaitsForTheClocksPartsUpToTwiceTheBound) {
  ScopedTempDir tmp;
  ShardStoreOptions o;
  o.num_clients = 1;
  o.row_cache_mb = 64;
  o.clock_log_mb = 1;
  constexpr uint32_t kWidth = 64;  // 512-byte rows: a part of 400 rows is ~0.2 MiB of log
  constexpr uint64_t kRows = 400;
  std::unique_ptr<ShardStore> s;
  ASSERT_TRUE(ShardStore::Open(o, tmp.Sub("s"), &s).ok());
  TableSchema t;
  ASSERT_TRUE(s->CreateTable(MakeSchema("t", RowKind::kDense, ElementType::kI64, kWidth), &t).ok());
  const std::string delta = I64Row(1, kWidth);
  std::vector<RowDelta> deltas;
  for (uint64_t r = 0; r < kRows; ++r) deltas.push_back(RowDelta{t.id, r, delta});
  int64_t applied = 0;  // parts applied: every row's value
  auto part = [&](ClockT clock, uint32_t p, bool more) {
    ++applied;
    BatchRequest req{0, clock, &deltas};
    req.part = p;
    req.more = more;
    req.incarnation = 7;
    std::vector<BatchResult> results;
    ASSERT_TRUE(s->ApplyBatches({req}, &results).ok());
    ASSERT_TRUE(results[0].status.ok()) << results[0].status.ToString();
  };
  const uint64_t bound = uint64_t{1} << 20;
  // Clock 0 in parts until the log is past its bound: kept, not written back.
  uint32_t p = 0;
  while (s->data_path_stats().log_offset <= bound && s->data_path_stats().writebacks == 0) {
    part(0, p++, true);
  }
  EXPECT_GT(s->data_path_stats().log_offset, bound);
  EXPECT_EQ(s->data_path_stats().writebacks, 0u);
  EXPECT_TRUE(s->IncompleteClockOf(0).undoable);
  // Its last part completes it: written back now.
  part(0, p++, false);
  EXPECT_EQ(s->data_path_stats().writebacks, 1u);
  EXPECT_EQ(s->data_path_stats().log_offset, 0u);
  // Clock 1 goes on in parts: written back once the log is at twice its bound.
  p = 0;
  while (s->data_path_stats().writebacks == 1) {
    ASSERT_LE(s->data_path_stats().log_offset, 2 * bound);
    ASSERT_LT(p, 100u);
    part(1, p++, true);
  }
  EXPECT_GT(p, 8u);  // more than the bound's worth of parts went by
  part(1, p++, false);
  std::string v;
  ASSERT_TRUE(s->Get(t.id, kRows - 1, &v).ok());
  EXPECT_EQ(v, I64Row(applied, kWidth));
}

// With durability off nothing is logged: a store closed cleanly keeps every
// update (its rows are written back at close) and reopens; one whose process
// died is refused at its next open, by a durable or an undurable open and
// read-only, instead of serving a model missing acknowledged updates.
TEST(ClockLogStoreTest, AnUndurableStoreIsRefusedAfterACrashAndWholeAfterAClose) {
  ScopedTempDir tmp;
  const std::string clean = tmp.Sub("clean");
  {
    std::unique_ptr<ShardStore> s;
    ASSERT_TRUE(ShardStore::Open(UndurableOptions(), clean, &s).ok());
    TableSchema t;
    ASSERT_TRUE(s->CreateTable(MakeSchema("t", RowKind::kDense, ElementType::kI64, 2), &t).ok());
    bool dup;
    for (int c = 0; c < 3; ++c) {
      ASSERT_TRUE(s->ApplyBatch(0, c, {RowDelta{t.id, 5, I64Row(1, 2)}}, &dup).ok());
    }
    EXPECT_EQ(s->data_path_stats().log_bytes, 0u);
  }
  {
    ShardStoreOptions o;
    o.num_clients = 1;
    std::unique_ptr<ShardStore> s;
    Status st = ShardStore::Open(o, clean, &s);
    ASSERT_TRUE(st.ok()) << st.ToString();
    StatusOr<TableSchema> t = s->FindTable("t");
    ASSERT_TRUE(t.ok());
    std::string v;
    ASSERT_TRUE(s->Get(t->id, 5, &v).ok());
    EXPECT_EQ(v, I64Row(3, 2));
  }

  const std::string crashed = tmp.Sub("crashed");
  ASSERT_EQ(RunChild("undurable", crashed), 0);
  for (bool durable : {true, false}) {
    ShardStoreOptions o = UndurableOptions();
    o.durable = durable;
    std::unique_ptr<ShardStore> s;
    Status st = ShardStore::Open(o, crashed, &s);
    EXPECT_EQ(st.code(), StatusCode::kCorruption) << st.ToString();
    EXPECT_NE(st.message().find("durability off"), std::string::npos) << st.ToString();
  }
  ShardStoreOptions ro;
  ro.read_only = true;
  std::unique_ptr<ShardStore> s;
  EXPECT_EQ(ShardStore::Open(ro, crashed, &s).code(), StatusCode::kCorruption);
}

}  // namespace
}  // namespace pace
