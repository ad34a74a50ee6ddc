#include "storage/shard_store.h"

#include <gtest/gtest.h>
#include <rocksdb/db.h>
#include <rocksdb/options.h>

#include <random>
#include <thread>

#include "common/row.h"
#include "common/token_file.h"
#include "storage/key_format.h"
#include "storage/row_merge.h"
#include "storage/testing/storage_test_util.h"

namespace pace {
namespace {

using testing_util::MakeSchema;

class ShardStoreTest : public ::testing::Test {
 protected:
  void SetUp() override {
    ASSERT_FALSE(tmp_.path().empty());
    dir_ = tmp_.Sub("store");
  }

  static ShardStoreOptions Opts(uint32_t clients = 2) {
    ShardStoreOptions o;
    o.num_clients = clients;
    o.block_cache_mb = 8;
    o.write_buffer_mb = 4;
    return o;
  }

  std::unique_ptr<ShardStore> OpenStore(const ShardStoreOptions& o) {
    std::unique_ptr<ShardStore> s;
    Status st = ShardStore::Open(o, dir_, &s);
    EXPECT_TRUE(st.ok()) << st.ToString();
    return s;
  }

  static TableSchema CreateOrDie(ShardStore* s, const TableSchema& schema) {
    TableSchema created;
    Status st = s->CreateTable(schema, &created);
    EXPECT_TRUE(st.ok()) << st.ToString();
    return created;
  }

  static std::string GetOrDie(ShardStore* s, uint32_t table, uint64_t row) {
    std::string v;
    Status st = s->Get(table, row, &v);
    EXPECT_TRUE(st.ok()) << st.ToString();
    return v;
  }

  testing_util::ScopedTempDir tmp_;
  std::string dir_;
};

// Writes a different value into one meta record with plain RocksDB.
void PokeMeta(const std::string& dir, std::string_view key, const std::string& value) {
  rocksdb::Options o;
  o.merge_operator = NewRowAddMergeOperator();
  rocksdb::DB* raw = nullptr;
  ASSERT_TRUE(rocksdb::DB::Open(o, dir, &raw).ok());
  std::unique_ptr<rocksdb::DB> db(raw);
  ASSERT_TRUE(db->Put(rocksdb::WriteOptions(), rocksdb::Slice(key.data(), key.size()), value).ok());
}

TEST_F(ShardStoreTest, CreateRecordsIdentityAndReopens) {
  ShardStoreOptions o = Opts(3);
  o.shard_id = 1;
  o.num_shards = 4;
  {
    auto s = OpenStore(o);
    ASSERT_NE(s, nullptr);
    EXPECT_EQ(s->identity().shard_id, 1u);
    EXPECT_EQ(s->identity().num_shards, 4u);
    EXPECT_EQ(s->identity().num_clients, 3u);
    EXPECT_EQ(s->identity().format_version, kStorageFormatVersion);
    EXPECT_EQ(s->dir(), dir_);
    EXPECT_FALSE(s->read_only());
  }
  auto s = OpenStore(o);
  ASSERT_NE(s, nullptr);
  EXPECT_EQ(s->identity().num_clients, 3u);
}

TEST_F(ShardStoreTest, MissingStoreWithoutCreateIsNotFound) {
  ShardStoreOptions o = Opts();
  o.create_if_missing = false;
  std::unique_ptr<ShardStore> s;
  EXPECT_EQ(ShardStore::Open(o, dir_, &s).code(), StatusCode::kNotFound);
  o.read_only = true;
  EXPECT_EQ(ShardStore::Open(o, dir_, &s).code(), StatusCode::kNotFound);
}

TEST_F(ShardStoreTest, BadOptionsRejected) {
  std::unique_ptr<ShardStore> s;
  ShardStoreOptions o = Opts(0);
  EXPECT_EQ(ShardStore::Open(o, dir_, &s).code(), StatusCode::kInvalidArgument);
  o = Opts();
  o.shard_id = 2;
  o.num_shards = 2;
  EXPECT_EQ(ShardStore::Open(o, dir_, &s).code(), StatusCode::kInvalidArgument);
  o = Opts();
  o.write_buffer_mb = 0;
  EXPECT_EQ(ShardStore::Open(o, dir_, &s).code(), StatusCode::kInvalidArgument);
}

TEST_F(ShardStoreTest, IdentityMismatchRefused) {
  ShardStoreOptions o = Opts(3);
  o.num_shards = 2;
  ASSERT_NE(OpenStore(o), nullptr);
  std::unique_ptr<ShardStore> s;
  ShardStoreOptions other = o;
  other.shard_id = 1;
  Status st = ShardStore::Open(other, dir_, &s);
  EXPECT_EQ(st.code(), StatusCode::kInvalidArgument);
  EXPECT_NE(st.message().find("created for shard 0 of 2 with 3 clients"), std::string::npos)
      << st.message();
  EXPECT_NE(st.message().find("shard 1 of 2 with 3 clients was requested"), std::string::npos)
      << st.message();
  other = o;
  other.num_clients = 4;
  EXPECT_EQ(ShardStore::Open(other, dir_, &s).code(), StatusCode::kInvalidArgument);
  other.check_identity = false;
  ASSERT_TRUE(ShardStore::Open(other, dir_, &s).ok());
  EXPECT_EQ(s->identity().num_clients, 3u);  // the recorded identity wins
  EXPECT_EQ(s->AppliedClocks().size(), 3u);
}

// The job id (docs/wire-protocol.md, "Jobs"): recorded at creation (a name,
// or an automatic id), refused when another is requested, carried by
// checkpoints, and recorded at the first open of an older store.
TEST_F(ShardStoreTest, JobIdRecordedAtCreationAndChecked) {
  ShardStoreOptions o = Opts();
  std::string auto_id;
  {
    auto s = OpenStore(o);
    ASSERT_NE(s, nullptr);
    auto_id = s->identity().job;
  }
  EXPECT_EQ(auto_id.rfind(kAutoJobPrefix, 0), 0u) << auto_id;
  EXPECT_EQ(auto_id.size(), std::string(kAutoJobPrefix).size() + 16) << auto_id;
  std::unique_ptr<ShardStore> s;
  ASSERT_TRUE(ShardStore::Open(o, dir_, &s).ok());
  EXPECT_EQ(s->identity().job, auto_id);  // reused, not drawn again
  s.reset();
  ShardStoreOptions other = o;
  other.job = "B";
  Status st = ShardStore::Open(other, dir_, &s);
  EXPECT_EQ(st.code(), StatusCode::kInvalidArgument);
  EXPECT_NE(st.message().find("belongs to job '" + auto_id + "', but job 'B' was requested"),
            std::string::npos)
      << st.message();
  other.check_identity = false;  // tools that only inspect
  ASSERT_TRUE(ShardStore::Open(other, dir_, &s).ok());
  EXPECT_EQ(s->identity().job, auto_id);
  s.reset();
  // A requested job must be a job name or an automatic id: the options are
  // checked like paced's --job, before anything is opened.
  for (const std::string& bad :
       std::vector<std::string>{"two words", std::string(129, 'j'), "a\nb"}) {
    other = o;
    other.job = bad;
    st = ShardStore::Open(other, tmp_.Sub("never"), &s);
    EXPECT_EQ(st.code(), StatusCode::kInvalidArgument) << bad;
    EXPECT_NE(st.message().find("a job name is 1 to 128 characters"), std::string::npos)
        << st.message();
  }
  other = o;
  other.job = auto_id;  // its own automatic id, as recorded
  ASSERT_TRUE(ShardStore::Open(other, dir_, &s).ok());
  s.reset();

  // A named job, carried by a checkpoint; a read-only open reports it.
  const std::string named = tmp_.Sub("named"), ckpt = tmp_.Sub("ckpt");
  other = o;
  other.job = "mf-2026";
  ASSERT_TRUE(ShardStore::Open(other, named, &s).ok());
  EXPECT_EQ(s->identity().job, "mf-2026");
  ASSERT_TRUE(s->CreateCheckpoint(ckpt).ok());
  s.reset();
  ASSERT_TRUE(ShardStore::Open(o, ckpt, &s).ok());
  EXPECT_EQ(s->identity().job, "mf-2026");
  s.reset();
  other.read_only = true;
  ASSERT_TRUE(ShardStore::Open(other, named, &s).ok());
  EXPECT_EQ(s->identity().job, "mf-2026");
  s.reset();

  // A store of an older build (no job record) gets one at its first open.
  {
    rocksdb::Options ro;
    ro.merge_operator = NewRowAddMergeOperator();
    rocksdb::DB* raw = nullptr;
    ASSERT_TRUE(rocksdb::DB::Open(ro, named, &raw).ok());
    std::unique_ptr<rocksdb::DB> db(raw);
    const std::string_view key = storage_format::kJobKey;
    ASSERT_TRUE(db->Delete(rocksdb::WriteOptions(), rocksdb::Slice(key.data(), key.size())).ok());
  }
  ASSERT_TRUE(ShardStore::Open(o, named, &s).ok());
  const std::string recorded = s->identity().job;
  EXPECT_EQ(recorded.rfind(kAutoJobPrefix, 0), 0u) << recorded;
  s.reset();
  ASSERT_TRUE(ShardStore::Open(o, named, &s).ok());
  EXPECT_EQ(s->identity().job, recorded);
}

TEST_F(ShardStoreTest, FormatVersionMismatchRefused) {
  ASSERT_NE(OpenStore(Opts()), nullptr);
  const uint32_t future = kStorageFormatVersion + 1;
  PokeMeta(dir_, storage_format::kFormatVersionKey, storage_format::EncodeFixed32(future));
  std::unique_ptr<ShardStore> s;
  Status st = ShardStore::Open(Opts(), dir_, &s);
  EXPECT_EQ(st.code(), StatusCode::kIncompatible) << st.ToString();
  EXPECT_NE(st.message().find("format version " + std::to_string(future)), std::string::npos)
      << st.message();
  ShardStoreOptions ro = Opts();
  ro.read_only = true;
  EXPECT_EQ(ShardStore::Open(ro, dir_, &s).code(), StatusCode::kIncompatible);
}

// A format-2 store kept the state of its last write-back under
// \x01clock_log (no 0x04 key): it opens with that state, its rows exact, and
// is upgraded to format 3.
TEST_F(ShardStoreTest, AFormat2StoreIsUpgraded) {
  TableSchema t;
  const std::string one = EncodeDense<int64_t>({1, 1});
  bool dup = false;
  {
    auto s = OpenStore(Opts(1));
    ASSERT_NE(s, nullptr);
    ASSERT_TRUE(
        s->CreateTable(testing_util::MakeSchema("t", RowKind::kDense, ElementType::kI64, 2), &t)
            .ok());
    ASSERT_TRUE(s->ApplyBatch(0, 0, {RowDelta{t.id, 3, one}}, &dup).ok());
  }  // closed: written back, the state under 0x04
  {
    rocksdb::Options o;
    o.merge_operator = NewRowAddMergeOperator();
    rocksdb::DB* raw = nullptr;
    ASSERT_TRUE(rocksdb::DB::Open(o, dir_, &raw).ok());
    std::unique_ptr<rocksdb::DB> db(raw);
    const std::string_view wb = storage_format::kWriteBackLogKey;
    const std::string_view log = storage_format::kClockLogKey;
    const std::string_view version = storage_format::kFormatVersionKey;
    std::string state;
    ASSERT_TRUE(db->Get(rocksdb::ReadOptions(), rocksdb::Slice(wb.data(), wb.size()), &state).ok());
    rocksdb::WriteBatch b;
    ASSERT_TRUE(b.Delete(rocksdb::Slice(wb.data(), wb.size())).ok());
    ASSERT_TRUE(b.Put(rocksdb::Slice(log.data(), log.size()), state).ok());
    ASSERT_TRUE(
        b.Put(rocksdb::Slice(version.data(), version.size()), storage_format::EncodeFixed32(2))
            .ok());
    ASSERT_TRUE(db->Write(rocksdb::WriteOptions(), &b).ok());
  }
  for (int open = 0; open < 2; ++open) {
    auto s = OpenStore(Opts(1));
    ASSERT_NE(s, nullptr);
    EXPECT_EQ(s->identity().format_version, kStorageFormatVersion);
    ASSERT_TRUE(s->ApplyBatch(0, 1 + open, {RowDelta{t.id, 3, one}}, &dup).ok());
    std::string v;
    ASSERT_TRUE(s->Get(t.id, 3, &v).ok());
    EXPECT_EQ(v, EncodeDense<int64_t>({2 + open, 2 + open})) << "open " << open;
  }
}

// A format-1 store written by the builds before the model-scale write path
// has SST files with CRC32c block checksums and Snappy-compressed L0 files;
// this build writes XXH3 checksums and uncompressed L0/base files. Each SST
// records its checksum and compression type, so the older files are read as
// they are, beside new ones, and compact into the new settings.
TEST_F(ShardStoreTest, ReadsSstFilesOfThePreviousBuilds) {
  TableSchema t;
  {
    auto s = OpenStore(Opts(1));
    ASSERT_NE(s, nullptr);
    ASSERT_TRUE(
        s->CreateTable(testing_util::MakeSchema("old", RowKind::kDense, ElementType::kI64, 4), &t)
            .ok());
  }
  // Rows 0..999 written the way the previous builds wrote them: tagged merge
  // operands, flushed with RocksDB's default table options (CRC32c, Snappy).
  {
    rocksdb::Options o;
    o.merge_operator = NewRowAddMergeOperator();
    rocksdb::DB* raw = nullptr;
    ASSERT_TRUE(rocksdb::DB::Open(o, dir_, &raw).ok());
    std::unique_ptr<rocksdb::DB> db(raw);
    const std::vector<int64_t> one = {1, 2, 3, 4};
    const std::string value = std::string(1, static_cast<char>(0x14)) +
                              std::string(reinterpret_cast<const char*>(one.data()), 32);
    for (int pass = 0; pass < 2; ++pass) {
      for (uint64_t r = 0; r < 1000; ++r) {
        ASSERT_TRUE(
            db->Merge(rocksdb::WriteOptions(), storage_format::MakeRowKey(t.id, r), value).ok());
      }
      ASSERT_TRUE(db->Flush(rocksdb::FlushOptions()).ok());  // one SST per pass
    }
    ASSERT_TRUE(db->Put(rocksdb::WriteOptions(), storage_format::ClockKey(0),
                        storage_format::EncodeClock(2))
                    .ok());
    rocksdb::TablePropertiesCollection props;
    ASSERT_TRUE(db->GetPropertiesOfAllTables(&props).ok());
    int snappy = 0;  // the catalog's SST (the store's close) is this build's
    for (const auto& [file, p] : props) snappy += p->compression_name == "Snappy" ? 1 : 0;
    ASSERT_EQ(snappy, 2);
  }
  auto s = OpenStore(Opts(1));
  ASSERT_NE(s, nullptr);
  EXPECT_EQ(s->AppliedClock(0), 2);
  // A new batch adds a third operand (in this build's files after a flush).
  std::vector<int64_t> ten = {10, 10, 10, 10};
  const std::string delta(reinterpret_cast<const char*>(ten.data()), 32);
  std::vector<RowDelta> deltas;
  for (uint64_t r = 0; r < 1000; r += 7) deltas.push_back(RowDelta{t.id, r, delta});
  bool dup = false;
  ASSERT_TRUE(s->ApplyBatch(0, 2, deltas, &dup).ok());
  ASSERT_TRUE(s->Flush().ok());
  auto expect_rows = [&](ShardStore* store) {
    std::vector<uint64_t> rows(1000);
    for (uint64_t r = 0; r < rows.size(); ++r) rows[r] = r;
    std::vector<std::string> values;
    ASSERT_TRUE(store->MultiGet(t.id, rows, &values).ok());
    for (uint64_t r = 0; r < rows.size(); ++r) {
      const int64_t add = r % 7 == 0 ? 10 : 0;
      const std::vector<int64_t> want = {2 + add, 4 + add, 6 + add, 8 + add};
      ASSERT_EQ(values[r], std::string(reinterpret_cast<const char*>(want.data()), 32))
          << "row " << r;
    }
  };
  ASSERT_NO_FATAL_FAILURE(expect_rows(s.get()));
  s.reset();
  // Reopened cold (no row cache): every value comes from the mixed SST files.
  ShardStoreOptions cold = Opts(1);
  cold.row_cache_mb = 0;
  s = OpenStore(cold);
  ASSERT_NE(s, nullptr);
  ASSERT_NO_FATAL_FAILURE(expect_rows(s.get()));
}

TEST_F(ShardStoreTest, ForeignRocksDbRefused) {
  {
    rocksdb::Options o;
    o.create_if_missing = true;
    rocksdb::DB* raw = nullptr;
    ASSERT_TRUE(rocksdb::DB::Open(o, dir_, &raw).ok());
    std::unique_ptr<rocksdb::DB> db(raw);
    ASSERT_TRUE(db->Put(rocksdb::WriteOptions(), "hello", "world").ok());
  }
  std::unique_ptr<ShardStore> s;
  EXPECT_EQ(ShardStore::Open(Opts(), dir_, &s).code(), StatusCode::kCorruption);
}

TEST_F(ShardStoreTest, CatalogCreateDuplicateIdempotentListDrop) {
  auto s = OpenStore(Opts());
  TableSchema a = CreateOrDie(s.get(), MakeSchema("a", RowKind::kDense, ElementType::kF32, 4));
  TableSchema b = CreateOrDie(s.get(), MakeSchema("b", RowKind::kSparse, ElementType::kI64, 0));
  EXPECT_EQ(a.id, 1u);
  EXPECT_EQ(b.id, 2u);

  // Same schema: idempotent, with or without the id.
  TableSchema again = CreateOrDie(s.get(), MakeSchema("a", RowKind::kDense, ElementType::kF32, 4));
  EXPECT_EQ(again.id, 1u);
  EXPECT_EQ(CreateOrDie(s.get(), a).id, 1u);
  // Same name, other schema.
  TableSchema created;
  EXPECT_EQ(s->CreateTable(MakeSchema("a", RowKind::kDense, ElementType::kF32, 5), &created).code(),
            StatusCode::kAlreadyExists);
  TableSchema a_other_id = a;
  a_other_id.id = 9;
  EXPECT_EQ(s->CreateTable(a_other_id, &created).code(), StatusCode::kAlreadyExists);
  // Explicit ids, and collisions.
  TableSchema c = MakeSchema("c", RowKind::kDense, ElementType::kI32, 2);
  c.id = 10;
  EXPECT_EQ(CreateOrDie(s.get(), c).id, 10u);
  EXPECT_EQ(CreateOrDie(s.get(), MakeSchema("d", RowKind::kDense, ElementType::kF64, 1)).id, 11u);
  TableSchema e = MakeSchema("e", RowKind::kDense, ElementType::kF64, 1);
  e.id = 2;
  EXPECT_EQ(s->CreateTable(e, &created).code(), StatusCode::kAlreadyExists);
  // Invalid schemas.
  EXPECT_EQ(s->CreateTable(MakeSchema("bad name", RowKind::kDense, ElementType::kF32, 1), &created)
                .code(),
            StatusCode::kInvalidArgument);
  EXPECT_EQ(
      s->CreateTable(MakeSchema("w0", RowKind::kDense, ElementType::kF32, 0), &created).code(),
      StatusCode::kInvalidArgument);

  std::vector<TableSchema> list = s->ListTables();
  ASSERT_EQ(list.size(), 4u);
  EXPECT_EQ(list[0].name, "a");
  EXPECT_EQ(list[1].name, "b");
  EXPECT_EQ(list[2].name, "c");
  EXPECT_EQ(list[3].name, "d");
  ASSERT_TRUE(s->FindTable("c").ok());
  EXPECT_EQ(s->FindTable("c")->id, 10u);
  ASSERT_TRUE(s->FindTable(11u).ok());
  EXPECT_EQ(s->FindTable(11u)->name, "d");
  EXPECT_EQ(s->FindTable("zz").status().code(), StatusCode::kNotFound);
  EXPECT_EQ(s->FindTable(77u).status().code(), StatusCode::kNotFound);

  // Drop deletes the rows; a recreated table starts from its initializer.
  bool dup;
  std::string delta = EncodeDense<float>({1, 2, 3, 4});
  ASSERT_TRUE(s->ApplyBatch(0, 0, {{a.id, 5, delta}}, &dup).ok());
  EXPECT_EQ(GetOrDie(s.get(), a.id, 5), delta);
  ASSERT_TRUE(s->DropTable("a").ok());
  EXPECT_EQ(s->DropTable("a").code(), StatusCode::kNotFound);
  EXPECT_EQ(s->FindTable("a").status().code(), StatusCode::kNotFound);
  std::string v;
  EXPECT_EQ(s->Get(a.id, 5, &v).code(), StatusCode::kNotFound);
  TableSchema a2 = MakeSchema("a", RowKind::kDense, ElementType::kF32, 4);
  a2.id = a.id;  // reuse the id on purpose: old rows must be gone
  CreateOrDie(s.get(), a2);
  EXPECT_EQ(GetOrDie(s.get(), a.id, 5), ZeroRow(RowFormat::Of(a2)));
  int rows = 0;
  ASSERT_TRUE(s->Scan(a.id, 0, [&](uint64_t, std::string_view) { return ++rows, true; }).ok());
  EXPECT_EQ(rows, 0);
  // New deltas start from zero, not from the dropped table's sums.
  ASSERT_TRUE(s->ApplyBatch(0, 1, {{a.id, 5, delta}}, &dup).ok());
  EXPECT_EQ(GetOrDie(s.get(), a.id, 5), delta);
  ASSERT_TRUE(s->Flush().ok());
  EXPECT_EQ(GetOrDie(s.get(), a.id, 5), delta);
  ASSERT_TRUE(s->DropTable("b").ok());

  // Everything survives reopen; automatic ids are not reused.
  s.reset();
  s = OpenStore(Opts());
  list = s->ListTables();
  ASSERT_EQ(list.size(), 3u);
  EXPECT_EQ(list[0].name, "a");
  EXPECT_EQ(list[1].name, "c");
  EXPECT_EQ(list[2].name, "d");
  EXPECT_TRUE(SameSchema(list[1], c));
  EXPECT_EQ(CreateOrDie(s.get(), MakeSchema("f", RowKind::kDense, ElementType::kF32, 1)).id, 12u);
}

TEST_F(ShardStoreTest, ApplyBatchAppliesDuplicatesAndGaps) {
  auto s = OpenStore(Opts(2));
  uint32_t d = CreateOrDie(s.get(), MakeSchema("d", RowKind::kDense, ElementType::kI64, 3)).id;
  uint32_t sp = CreateOrDie(s.get(), MakeSchema("s", RowKind::kSparse, ElementType::kI32, 100)).id;
  std::string d1 = EncodeDense<int64_t>({1, 2, 3});
  std::string s1 = EncodeSparse<int32_t>(std::map<uint32_t, int32_t>{{4, 7}, {99, -1}});
  bool dup = true;
  ASSERT_TRUE(s->ApplyBatch(0, 0, {{d, 1, d1}, {sp, 1, s1}, {d, 1, d1}}, &dup).ok());
  EXPECT_FALSE(dup);
  EXPECT_EQ(GetOrDie(s.get(), d, 1), EncodeDense<int64_t>({2, 4, 6}));
  EXPECT_EQ(GetOrDie(s.get(), sp, 1), s1);
  EXPECT_EQ(s->AppliedClock(0), 1);
  EXPECT_EQ(s->AppliedClock(1), 0);
  EXPECT_EQ(s->ShardClock(), 0);

  // A re-sent batch is skipped.
  ASSERT_TRUE(s->ApplyBatch(0, 0, {{d, 1, d1}}, &dup).ok());
  EXPECT_TRUE(dup);
  EXPECT_EQ(GetOrDie(s.get(), d, 1), EncodeDense<int64_t>({2, 4, 6}));
  EXPECT_EQ(s->AppliedClock(0), 1);

  // A gap is refused.
  Status st = s->ApplyBatch(0, 5, {{d, 1, d1}}, &dup);
  EXPECT_EQ(st.code(), StatusCode::kFailedPrecondition);
  EXPECT_FALSE(dup);
  EXPECT_NE(st.message().find("clock 5"), std::string::npos) << st.message();

  // An empty batch still advances the clock.
  ASSERT_TRUE(s->ApplyBatch(1, 0, {}, &dup).ok());
  EXPECT_EQ(s->AppliedClock(1), 1);
  EXPECT_EQ(s->ShardClock(), 1);
  std::vector<ClockT> clocks = s->AppliedClocks();
  EXPECT_EQ(clocks, (std::vector<ClockT>{1, 1}));
}

TEST_F(ShardStoreTest, SparseZerosAreNeverStored) {
  auto s = OpenStore(Opts(1));
  for (ElementType type : {ElementType::kF32, ElementType::kI64}) {
    std::string name = std::string("s") + std::string(ElementTypeName(type));
    uint32_t t = CreateOrDie(s.get(), MakeSchema(name, RowKind::kSparse, type, 0)).id;
    std::string with_zero, plus, minus, want;
    if (type == ElementType::kF32) {
      with_zero = EncodeSparse<float>(std::map<uint32_t, float>{{1, 0.0f}, {2, 5.0f}, {3, -0.0f}});
      plus = EncodeSparse<float>(std::map<uint32_t, float>{{7, 2.0f}});
      minus = EncodeSparse<float>(std::map<uint32_t, float>{{7, -2.0f}});
      want = EncodeSparse<float>(std::map<uint32_t, float>{{2, 5.0f}});
    } else {
      with_zero = EncodeSparse<int64_t>(std::map<uint32_t, int64_t>{{1, 0}, {2, 5}});
      plus = EncodeSparse<int64_t>(std::map<uint32_t, int64_t>{{7, 2}});
      minus = EncodeSparse<int64_t>(std::map<uint32_t, int64_t>{{7, -2}});
      want = EncodeSparse<int64_t>(std::map<uint32_t, int64_t>{{2, 5}});
    }
    bool dup;
    ClockT clock = s->AppliedClock(0);
    ASSERT_TRUE(s->ApplyBatch(0, clock, {{t, 1, with_zero}, {t, 2, plus}}, &dup).ok());
    EXPECT_EQ(GetOrDie(s.get(), t, 1), want) << name;
    ASSERT_TRUE(s->ApplyBatch(0, clock + 1, {{t, 2, minus}}, &dup).ok());
    EXPECT_EQ(GetOrDie(s.get(), t, 2), std::string(4, '\0')) << name;  // cancelled to empty
    ASSERT_TRUE(s->Flush().ok());
    EXPECT_EQ(GetOrDie(s.get(), t, 1), want) << name;
    EXPECT_EQ(GetOrDie(s.get(), t, 2), std::string(4, '\0')) << name;
  }
}

TEST_F(ShardStoreTest, ImportBatchWritesRowsAndRecordButNoClock) {
  auto s = OpenStore(Opts(2));
  uint32_t d = CreateOrDie(s.get(), MakeSchema("d", RowKind::kDense, ElementType::kI64, 3)).id;
  EXPECT_EQ(s->LastImport().value(), "");
  bool dup;
  ASSERT_TRUE(s->ApplyBatch(0, 0, {{d, 1, EncodeDense<int64_t>({1, 1, 1})}}, &dup).ok());
  const std::string v = EncodeDense<int64_t>({5, 6, 7});
  ASSERT_TRUE(s->ImportBatch({{d, 1, v}, {d, 9, v}}, "table=d rows=2").ok());
  EXPECT_EQ(GetOrDie(s.get(), d, 1), EncodeDense<int64_t>({6, 7, 8}));
  EXPECT_EQ(GetOrDie(s.get(), d, 9), v);
  EXPECT_EQ(s->AppliedClocks(), (std::vector<ClockT>{1, 0}));
  // A bad delta: nothing written, the old record stays.
  EXPECT_EQ(s->ImportBatch({{d, 2, v}, {77, 1, v}}, "bad").code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(GetOrDie(s.get(), d, 2), EncodeDense<int64_t>({0, 0, 0}));
  s.reset();
  s = OpenStore(Opts(2));
  EXPECT_EQ(s->LastImport().value(), "table=d rows=2");
  EXPECT_EQ(GetOrDie(s.get(), d, 9), v);
  EXPECT_EQ(s->AppliedClocks(), (std::vector<ClockT>{1, 0}));
  // The client's next clock is still accepted in order.
  ASSERT_TRUE(s->ApplyBatch(0, 1, {}, &dup).ok());
  EXPECT_FALSE(dup);
}

TEST_F(ShardStoreTest, StoreInUseIsRefusedInWords) {
  auto s = OpenStore(Opts(2));
  std::unique_ptr<ShardStore> second;
  Status st = ShardStore::Open(Opts(2), dir_, &second);
  EXPECT_EQ(st.code(), StatusCode::kFailedPrecondition) << st.ToString();
  EXPECT_NE(st.message().find(dir_ + " is in use by this process"), std::string::npos)
      << st.message();
  EXPECT_EQ(st.message().find("Resource temporarily"), std::string::npos) << st.message();
}

TEST_F(ShardStoreTest, BadBatchWritesNothing) {
  auto s = OpenStore(Opts(2));
  uint32_t d = CreateOrDie(s.get(), MakeSchema("d", RowKind::kDense, ElementType::kI32, 2)).id;
  uint32_t sp = CreateOrDie(s.get(), MakeSchema("s", RowKind::kSparse, ElementType::kI32, 10)).id;
  std::string good = EncodeDense<int32_t>({1, 1});
  const std::string zero = EncodeDense<int32_t>({0, 0});
  bool dup;
  std::string wrong_width = EncodeDense<int32_t>({1, 1, 1});
  std::string wrong_col = EncodeSparse<int32_t>(std::map<uint32_t, int32_t>{{10, 1}});
  std::string truncated = EncodeSparse<int32_t>(std::map<uint32_t, int32_t>{{1, 1}}).substr(0, 6);
  std::vector<std::pair<const char*, std::vector<RowDelta>>> cases = {
      {"unknown table", {{d, 1, good}, {77, 1, good}}},
      {"wrong width", {{d, 1, good}, {d, 2, wrong_width}}},
      {"column out of range", {{d, 1, good}, {sp, 2, wrong_col}}},
      {"truncated sparse", {{d, 1, good}, {sp, 2, truncated}}},
  };
  for (const auto& [what, deltas] : cases) {
    Status st = s->ApplyBatch(0, 0, deltas, &dup);
    EXPECT_EQ(st.code(), StatusCode::kInvalidArgument) << what << ": " << st.ToString();
    EXPECT_EQ(GetOrDie(s.get(), d, 1), zero) << what;
    EXPECT_EQ(s->AppliedClock(0), 0) << what;
  }
  EXPECT_EQ(s->ApplyBatch(2, 0, {{d, 1, good}}, &dup).code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(s->ApplyBatch(0, -1, {{d, 1, good}}, &dup).code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(GetOrDie(s.get(), d, 1), zero);
  // Nothing was persisted either.
  s.reset();
  s = OpenStore(Opts(2));
  EXPECT_EQ(s->AppliedClock(0), 0);
  EXPECT_EQ(GetOrDie(s.get(), d, 1), zero);
  uint64_t bytes;
  ASSERT_TRUE(s->ApproximateTableSize(d, &bytes).ok());
  EXPECT_EQ(bytes, 0u);
}

TEST_F(ShardStoreTest, ClocksAndRowsSurviveReopen) {
  uint32_t t;
  {
    auto s = OpenStore(Opts(3));
    t = CreateOrDie(s.get(), MakeSchema("t", RowKind::kDense, ElementType::kI64, 1)).id;
    bool dup;
    for (ClockT c = 0; c < 5; ++c) {
      ASSERT_TRUE(s->ApplyBatch(0, c, {{t, 7, EncodeDense<int64_t>({c})}}, &dup).ok());
    }
    for (ClockT c = 0; c < 3; ++c) ASSERT_TRUE(s->ApplyBatch(1, c, {}, &dup).ok());
    for (ClockT c = 0; c < 4; ++c) ASSERT_TRUE(s->ApplyBatch(2, c, {}, &dup).ok());
    ASSERT_TRUE(s->Flush().ok());
    ASSERT_TRUE(s->ApplyBatch(0, 5, {{t, 7, EncodeDense<int64_t>({100})}}, &dup).ok());
  }
  auto s = OpenStore(Opts(3));
  EXPECT_EQ(s->AppliedClocks(), (std::vector<ClockT>{6, 3, 4}));
  EXPECT_EQ(s->ShardClock(), 3);
  EXPECT_EQ(s->AppliedClock(99), 0);
  EXPECT_EQ(GetOrDie(s.get(), t, 7), EncodeDense<int64_t>({110}));
  bool dup;
  ASSERT_TRUE(s->ApplyBatch(1, 2, {}, &dup).ok());
  EXPECT_TRUE(dup);
  ASSERT_TRUE(s->ApplyBatch(1, 3, {}, &dup).ok());
  EXPECT_FALSE(dup);
}

// Partial Apply: a clock in parts. The (clock, parts) record is written with
// each part, survives a reopen, and decides duplicates and gaps.
TEST_F(ShardStoreTest, ClockPartsRecordDecidesDuplicatesAndSurvivesReopen) {
  uint32_t t;
  auto part = [&](ShardStore* s, ClientId client, ClockT clock, uint32_t i, bool more,
                  int64_t delta, BatchResult* r) {
    std::vector<RowDelta> deltas;
    const std::string bytes = EncodeDense<int64_t>({delta});
    if (delta != 0) deltas.push_back(RowDelta{t, 7, bytes});
    BatchRequest req{client, clock, &deltas};
    req.part = i;
    req.more = more;
    std::vector<BatchResult> results;
    Status st = s->ApplyBatches({req}, &results);
    ASSERT_TRUE(st.ok()) << st.ToString();
    *r = results[0];
  };
  BatchResult r;
  {
    auto s = OpenStore(Opts(2));
    t = CreateOrDie(s.get(), MakeSchema("t", RowKind::kDense, ElementType::kI64, 1)).id;
    part(s.get(), 0, 0, 0, true, 1, &r);
    ASSERT_TRUE(r.status.ok()) << r.status.ToString();
    EXPECT_FALSE(r.duplicate);
    EXPECT_EQ(s->AppliedClock(0), 0);  // the clock is not complete
    EXPECT_EQ(s->AppliedParts(0), 1u);
    part(s.get(), 0, 0, 0, true, 1, &r);  // re-sent part 0: skipped
    EXPECT_TRUE(r.status.ok());
    EXPECT_TRUE(r.duplicate);
    part(s.get(), 0, 0, 2, true, 1, &r);  // part 1 missing: a gap
    EXPECT_EQ(r.status.code(), StatusCode::kFailedPrecondition);
    EXPECT_NE(r.status.message().find("1 part(s) of clock 0"), std::string::npos)
        << r.status.message();
    part(s.get(), 0, 0, 1, true, 10, &r);
    EXPECT_FALSE(r.duplicate);
    EXPECT_EQ(s->AppliedParts(0), 2u);
    EXPECT_EQ(GetOrDie(s.get(), t, 7), EncodeDense<int64_t>({11}));
  }
  // A crash between parts: the record says (0, 2 parts).
  {
    auto s = OpenStore(Opts(2));
    EXPECT_EQ(s->AppliedClock(0), 0);
    EXPECT_EQ(s->AppliedParts(0), 2u);
    EXPECT_EQ(GetOrDie(s.get(), t, 7), EncodeDense<int64_t>({11}));
    part(s.get(), 0, 0, 1, true, 10, &r);  // the client re-sends its unacked part 1
    EXPECT_TRUE(r.duplicate);
    part(s.get(), 0, 0, 2, false, 100, &r);  // the last part completes clock 0
    EXPECT_FALSE(r.duplicate);
    EXPECT_EQ(s->AppliedClock(0), 1);
    EXPECT_EQ(s->AppliedParts(0), 0u);
    part(s.get(), 0, 0, 2, false, 100, &r);  // re-sent last part: clock 0 < 1
    EXPECT_TRUE(r.duplicate);
    // A whole clock (the old form: part 0, no more) after parted ones.
    part(s.get(), 0, 1, 0, false, 1000, &r);
    EXPECT_FALSE(r.duplicate);
    EXPECT_EQ(s->AppliedClock(0), 2);
    // Client 1: a part, then a last part from another incarnation that cut
    // the clock into fewer parts: completes the clock, its deltas skipped.
    part(s.get(), 1, 0, 0, true, 5, &r);
    part(s.get(), 1, 0, 1, true, 5, &r);
    part(s.get(), 1, 0, 0, false, 7, &r);
    EXPECT_TRUE(r.status.ok());
    EXPECT_TRUE(r.duplicate);
    EXPECT_EQ(s->AppliedClock(1), 1);
    EXPECT_EQ(s->ShardClock(), 1);
    EXPECT_EQ(GetOrDie(s.get(), t, 7), EncodeDense<int64_t>({1121}));
  }
  auto s = OpenStore(Opts(2));
  EXPECT_EQ(s->AppliedClocks(), (std::vector<ClockT>{2, 1}));
  EXPECT_EQ(s->AppliedParts(0), 0u);
  EXPECT_EQ(GetOrDie(s.get(), t, 7), EncodeDense<int64_t>({1121}));
}

TEST_F(ShardStoreTest, ReadsComposeInitializerAndScanInOrder) {
  auto s = OpenStore(Opts(1));
  TableSchema u = MakeSchema("u", RowKind::kDense, ElementType::kF32, 3);
  u.init = Initializer{InitKind::kUniform, -1, 1, 5};
  u = CreateOrDie(s.get(), u);
  uint32_t z = CreateOrDie(s.get(), MakeSchema("z", RowKind::kDense, ElementType::kI32, 1)).id;
  std::string init7, init9;
  InitRow(u, 7, &init7);
  InitRow(u, 9, &init9);
  EXPECT_NE(init7, ZeroRow(RowFormat::Of(u)));
  EXPECT_EQ(GetOrDie(s.get(), u.id, 7), init7);

  std::vector<float> delta = {1, 2, 3};
  const uint64_t rows[] = {1ull << 40, 7, 3, UINT64_MAX, 1ull << 63};
  std::vector<RowDelta> batch;
  std::string bytes = EncodeDense<float>(delta);
  for (uint64_t r : rows) batch.push_back({u.id, r, bytes});
  std::string zb = EncodeDense<int32_t>({1});
  batch.push_back({z, 0, zb});
  bool dup;
  ASSERT_TRUE(s->ApplyBatch(0, 0, batch, &dup).ok());

  auto expect_row = [&](uint64_t row) {
    std::string init;
    InitRow(u, row, &init);
    std::vector<float> want = DecodeDense<float>(init);
    for (size_t i = 0; i < 3; ++i) want[i] += delta[i];
    return EncodeDense<float>(want);
  };
  EXPECT_EQ(GetOrDie(s.get(), u.id, 7), expect_row(7));

  std::vector<std::string> values;
  ASSERT_TRUE(s->MultiGet(u.id, {9, 7, 1ull << 63, 7}, &values).ok());
  ASSERT_EQ(values.size(), 4u);
  EXPECT_EQ(values[0], init9);
  EXPECT_EQ(values[1], expect_row(7));
  EXPECT_EQ(values[2], expect_row(1ull << 63));
  EXPECT_EQ(values[3], expect_row(7));
  ASSERT_TRUE(s->MultiGet(u.id, {}, &values).ok());
  EXPECT_TRUE(values.empty());

  std::vector<uint64_t> seen;
  ASSERT_TRUE(s->Scan(u.id, 0, [&](uint64_t row, std::string_view v) {
                 EXPECT_EQ(std::string(v), expect_row(row));
                 seen.push_back(row);
                 return true;
               }).ok());
  EXPECT_EQ(seen, (std::vector<uint64_t>{3, 7, 1ull << 40, 1ull << 63, UINT64_MAX}));
  seen.clear();
  ASSERT_TRUE(s->Scan(u.id, 8, [&](uint64_t row, std::string_view) {
                 seen.push_back(row);
                 return seen.size() < 2;
               }).ok());
  EXPECT_EQ(seen, (std::vector<uint64_t>{1ull << 40, 1ull << 63}));
  seen.clear();
  ASSERT_TRUE(s->Scan(z, 0, [&](uint64_t row, std::string_view v) {
                 EXPECT_EQ(std::string(v), zb);
                 seen.push_back(row);
                 return true;
               }).ok());
  EXPECT_EQ(seen, (std::vector<uint64_t>{0}));

  std::string v;
  EXPECT_EQ(s->Get(99, 0, &v).code(), StatusCode::kNotFound);
  EXPECT_EQ(s->MultiGet(99, {0}, &values).code(), StatusCode::kNotFound);
  EXPECT_EQ(s->Scan(99, 0, [](uint64_t, std::string_view) { return true; }).code(),
            StatusCode::kNotFound);

  ASSERT_TRUE(s->Flush().ok());
  EXPECT_EQ(GetOrDie(s.get(), u.id, 7), expect_row(7));
}

TEST_F(ShardStoreTest, ApproximateSizes) {
  auto s = OpenStore(Opts(1));
  uint32_t big =
      CreateOrDie(s.get(), MakeSchema("big", RowKind::kDense, ElementType::kF32, 100)).id;
  uint32_t small =
      CreateOrDie(s.get(), MakeSchema("small", RowKind::kDense, ElementType::kF32, 1)).id;
  // Random floats, so compression cannot shrink 1.2 MB of rows below 300 KB.
  std::mt19937 rng(1);
  std::uniform_real_distribution<float> dist(-1, 1);
  std::vector<std::string> rows(3000);
  std::vector<RowDelta> batch;
  for (uint64_t r = 0; r < rows.size(); ++r) {
    std::vector<float> v(100);
    for (float& x : v) x = dist(rng);
    rows[r] = EncodeDense<float>(v);
    batch.push_back({big, r, rows[r]});
  }
  bool dup;
  ASSERT_TRUE(s->ApplyBatch(0, 0, batch, &dup).ok());
  uint64_t disk = 0, keys = 0, big_bytes = 0, small_bytes = 0;
  ASSERT_TRUE(s->ApproximateTableSize(big, &big_bytes).ok());
  EXPECT_GT(big_bytes, 0u);  // memtable estimate
  ASSERT_TRUE(s->Flush().ok());
  ASSERT_TRUE(s->ApproximateSize(&disk, &keys).ok());
  EXPECT_GT(disk, 3000u * 100u);
  EXPECT_GE(keys, 3000u);
  ASSERT_TRUE(s->ApproximateTableSize(big, &big_bytes).ok());
  ASSERT_TRUE(s->ApproximateTableSize(small, &small_bytes).ok());
  EXPECT_GT(big_bytes, 3000u * 100u);
  EXPECT_LE(big_bytes, disk);
  EXPECT_EQ(small_bytes, 0u);
  EXPECT_EQ(s->ApproximateTableSize(99, &big_bytes).code(), StatusCode::kNotFound);
}

TEST_F(ShardStoreTest, ReadOnlyStoreRefusesWrites) {
  uint32_t t;
  {
    auto s = OpenStore(Opts(1));
    t = CreateOrDie(s.get(), MakeSchema("t", RowKind::kDense, ElementType::kI32, 1)).id;
    bool dup;
    ASSERT_TRUE(s->ApplyBatch(0, 0, {{t, 1, EncodeDense<int32_t>({4})}}, &dup).ok());
  }
  ShardStoreOptions o = Opts(1);
  o.read_only = true;
  auto s = OpenStore(o);
  ASSERT_NE(s, nullptr);
  EXPECT_TRUE(s->read_only());
  EXPECT_EQ(GetOrDie(s.get(), t, 1), EncodeDense<int32_t>({4}));
  EXPECT_EQ(s->AppliedClock(0), 1);
  bool dup;
  TableSchema created;
  EXPECT_EQ(s->ApplyBatch(0, 1, {}, &dup).code(), StatusCode::kFailedPrecondition);
  EXPECT_EQ(s->CreateTable(MakeSchema("x", RowKind::kDense, ElementType::kI32, 1), &created).code(),
            StatusCode::kFailedPrecondition);
  EXPECT_EQ(s->DropTable("t").code(), StatusCode::kFailedPrecondition);
  EXPECT_EQ(s->Flush().code(), StatusCode::kFailedPrecondition);
  EXPECT_EQ(s->CreateCheckpoint(tmp_.Sub("cp")).code(), StatusCode::kFailedPrecondition);
}

// Clients apply their batches from separate threads; integer sums are exact.
TEST_F(ShardStoreTest, ConcurrentClients) {
  constexpr uint32_t kClients = 4;
  constexpr int kClocks = 50;
  auto s = OpenStore(Opts(kClients));
  uint32_t t = CreateOrDie(s.get(), MakeSchema("t", RowKind::kDense, ElementType::kI64, 2)).id;
  std::vector<std::thread> threads;
  for (uint32_t c = 0; c < kClients; ++c) {
    threads.emplace_back([&, c] {
      std::string delta = EncodeDense<int64_t>({1, static_cast<int64_t>(c)});
      for (ClockT clock = 0; clock < kClocks; ++clock) {
        std::vector<RowDelta> batch;
        for (uint64_t r = 0; r < 20; ++r) batch.push_back({t, r, delta});
        bool dup;
        Status st = s->ApplyBatch(c, clock, batch, &dup);
        ASSERT_TRUE(st.ok()) << st.ToString();
        std::string v;
        ASSERT_TRUE(s->Get(t, clock % 20, &v).ok());
      }
    });
  }
  for (auto& th : threads) th.join();
  EXPECT_EQ(s->ShardClock(), kClocks);
  for (uint64_t r = 0; r < 20; ++r) {
    EXPECT_EQ(GetOrDie(s.get(), t, r), EncodeDense<int64_t>({kClients * kClocks, 6 * kClocks}));
  }
}

}  // namespace
}  // namespace pace
