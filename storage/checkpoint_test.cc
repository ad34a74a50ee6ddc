#include "storage/checkpoint.h"

#include <gtest/gtest.h>

#include <atomic>
#include <fstream>
#include <sstream>
#include <thread>

#include "common/read_file.h"
#include "common/row.h"
#include "storage/shard_store.h"
#include "storage/testing/storage_test_util.h"

namespace pace {
namespace {

using testing_util::MakeSchema;

CheckpointManifest SampleManifest() {
  CheckpointManifest m;
  m.identity = ShardIdentity{kStorageFormatVersion, 1, 3, 2};
  TableSchema a = MakeSchema("a.b-c_d", RowKind::kDense, ElementType::kF32, 8);
  a.id = 1;
  a.consistency = Consistency::kEssp;
  a.staleness = 2;
  a.init = Initializer{InitKind::kUniform, -0.1, 0.30000000000000004, 0xffffffffffffffffull};
  TableSchema b = MakeSchema("b", RowKind::kSparse, ElementType::kI64, 0);
  b.id = 7;
  b.consistency = Consistency::kAsync;
  m.tables = {a, b};
  m.applied_clocks = {5, 3};
  m.shard_clock = 3;
  m.created_unix_ms = 1700000000123;
  return m;
}

void WriteFile(const std::string& path, const std::string& data) {
  std::ofstream f(path, std::ios::binary | std::ios::trunc);
  f << data;
}

TEST(CheckpointManifestTest, RoundTrip) {
  CheckpointManifest m = SampleManifest();
  std::string text = EncodeCheckpointManifest(m);
  EXPECT_EQ(text.rfind("PACE-CHECKPOINT 1\n", 0), 0u) << text;
  CheckpointManifest out;
  Status st = ParseCheckpointManifest(text, &out);
  ASSERT_TRUE(st.ok()) << st.ToString() << "\n" << text;
  EXPECT_EQ(out.format_version, kStorageFormatVersion);
  EXPECT_EQ(out.identity.shard_id, 1u);
  EXPECT_EQ(out.identity.num_shards, 3u);
  EXPECT_EQ(out.identity.num_clients, 2u);
  EXPECT_EQ(out.applied_clocks, m.applied_clocks);
  EXPECT_EQ(out.shard_clock, 3);
  EXPECT_EQ(out.created_unix_ms, m.created_unix_ms);
  ASSERT_EQ(out.tables.size(), 2u);
  EXPECT_TRUE(SameSchema(out.tables[0], m.tables[0]));
  EXPECT_EQ(out.tables[0].id, 1u);
  EXPECT_TRUE(SameSchema(out.tables[1], m.tables[1]));
}

TEST(CheckpointManifestTest, DamageIsCorruption) {
  std::string text = EncodeCheckpointManifest(SampleManifest());
  CheckpointManifest out;
  // Every truncation and every single-byte change is detected.
  for (size_t len = 0; len < text.size(); ++len) {
    EXPECT_EQ(ParseCheckpointManifest(text.substr(0, len), &out).code(), StatusCode::kCorruption)
        << len;
  }
  for (size_t i = 0; i < text.size(); ++i) {
    std::string bad = text;
    bad[i] = static_cast<char>(bad[i] ^ 0x01);
    EXPECT_EQ(ParseCheckpointManifest(bad, &out).code(), StatusCode::kCorruption) << i;
  }
  EXPECT_EQ(ParseCheckpointManifest("garbage\n", &out).code(), StatusCode::kCorruption);
}

// Re-signs edited text so only the semantic checks can reject it.
std::string Resign(const std::string& body_without_checksum) {
  // Encode a manifest, then splice: the checksum covers everything before it.
  std::string text = body_without_checksum;
  uint64_t h = 0xcbf29ce484222325ull;
  for (char c : text) {
    h ^= static_cast<uint8_t>(c);
    h *= 0x100000001b3ull;
  }
  char buf[17];
  std::snprintf(buf, sizeof(buf), "%016llx", static_cast<unsigned long long>(h));
  return text + "checksum=fnv1a64:" + buf + "\n";
}

std::string Body(const std::string& text) { return text.substr(0, text.rfind("checksum=")); }

std::string Replace(std::string s, const std::string& from, const std::string& to) {
  size_t pos = s.find(from);
  EXPECT_NE(pos, std::string::npos) << from;
  if (pos != std::string::npos) s.replace(pos, from.size(), to);
  return s;
}

TEST(CheckpointManifestTest, InconsistentContentIsCorruption) {
  std::string body = Body(EncodeCheckpointManifest(SampleManifest()));
  CheckpointManifest out;
  ASSERT_TRUE(ParseCheckpointManifest(Resign(body), &out).ok());
  const std::vector<std::pair<std::string, std::string>> edits = {
      {"shard_clock=3", "shard_clock=4"},
      {"applied_clocks=5,3", "applied_clocks=5"},
      {"applied_clocks=5,3", "applied_clocks=5,x"},
      {"table_count=2", "table_count=3"},
      {"kind:dense", "kind:wide"},
      {"width:8", "width:0"},
      {"id:7", "id:1"},
      {"shard_id=1", "shard_id=3"},
      {"num_clients=2\n", ""},
      {"PACE-CHECKPOINT 1", "PACE-CHECKPOINT 9"},
  };
  for (const auto& [from, to] : edits) {
    EXPECT_EQ(ParseCheckpointManifest(Resign(Replace(body, from, to)), &out).code(),
              StatusCode::kCorruption)
        << from << " -> " << to;
  }
  // Unknown fields are tolerated (formats only append fields).
  EXPECT_TRUE(ParseCheckpointManifest(Resign(body + "future_field=1\n"), &out).ok());
  // Another storage format version is Incompatible, not Corruption.
  EXPECT_EQ(ParseCheckpointManifest(
                Resign(Replace(body, "format_version=" + std::to_string(kStorageFormatVersion),
                               "format_version=" + std::to_string(kStorageFormatVersion + 1))),
                &out)
                .code(),
            StatusCode::kIncompatible);
}

class CheckpointStoreTest : public ::testing::Test {
 protected:
  void SetUp() override { ASSERT_FALSE(tmp_.path().empty()); }
  static ShardStoreOptions Opts() {
    ShardStoreOptions o;
    o.num_clients = 2;
    o.block_cache_mb = 8;
    o.write_buffer_mb = 4;
    return o;
  }
  testing_util::ScopedTempDir tmp_;
};

TEST_F(CheckpointStoreTest, CreateOpenRestore) {
  std::unique_ptr<ShardStore> s;
  ASSERT_TRUE(ShardStore::Open(Opts(), tmp_.Sub("data"), &s).ok());
  TableSchema t;
  ASSERT_TRUE(s->CreateTable(MakeSchema("t", RowKind::kDense, ElementType::kI64, 2), &t).ok());
  TableSchema sp;
  ASSERT_TRUE(s->CreateTable(MakeSchema("s", RowKind::kSparse, ElementType::kI32, 0), &sp).ok());
  bool dup;
  std::string one = EncodeDense<int64_t>({1, 1});
  std::string sparse = EncodeSparse<int32_t>(std::map<uint32_t, int32_t>{{3, 3}});
  for (ClockT c = 0; c < 3; ++c) {
    ASSERT_TRUE(s->ApplyBatch(0, c, {{t.id, 1, one}, {sp.id, 2, sparse}}, &dup).ok());
  }
  ASSERT_TRUE(s->ApplyBatch(1, 0, {{t.id, 2, one}}, &dup).ok());

  const std::string cp = tmp_.Sub("cp1");
  ASSERT_TRUE(s->CreateCheckpoint(cp).ok());
  EXPECT_EQ(s->CreateCheckpoint(cp).code(), StatusCode::kAlreadyExists);
  // Later writes do not reach the checkpoint.
  ASSERT_TRUE(s->ApplyBatch(1, 1, {{t.id, 1, one}}, &dup).ok());

  CheckpointManifest m;
  ASSERT_TRUE(ShardStore::ReadCheckpointManifest(cp, &m).ok());
  EXPECT_EQ(m.applied_clocks, (std::vector<ClockT>{3, 1}));
  EXPECT_EQ(m.shard_clock, 1);
  EXPECT_EQ(m.identity.num_clients, 2u);
  ASSERT_EQ(m.tables.size(), 2u);
  EXPECT_EQ(m.tables[0].name, "t");
  EXPECT_GT(m.created_unix_ms, 0);

  // Restore into a fresh dir (the checkpoint stays pristine) and open it.
  const std::string restored = tmp_.Sub("restored");
  ASSERT_TRUE(ShardStore::RestoreCheckpoint(cp, restored).ok());
  EXPECT_EQ(ShardStore::RestoreCheckpoint(cp, restored).code(), StatusCode::kAlreadyExists);
  std::string v;
  {
    std::unique_ptr<ShardStore> r;
    ASSERT_TRUE(ShardStore::Open(Opts(), restored, &r).ok());
    EXPECT_EQ(r->AppliedClocks(), (std::vector<ClockT>{3, 1}));
    ASSERT_TRUE(r->Get(t.id, 1, &v).ok());
    EXPECT_EQ(v, EncodeDense<int64_t>({3, 3}));
    ASSERT_TRUE(r->Get(sp.id, 2, &v).ok());
    EXPECT_EQ(v, EncodeSparse<int32_t>(std::map<uint32_t, int32_t>{{3, 9}}));
    ASSERT_TRUE(r->ApplyBatch(1, 1, {{t.id, 1, one}}, &dup).ok());  // writable
    EXPECT_FALSE(dup);
  }
  // Opening the checkpoint itself, read-only, shows the checkpointed state.
  ShardStoreOptions ro = Opts();
  ro.read_only = true;
  std::unique_ptr<ShardStore> c;
  ASSERT_TRUE(ShardStore::Open(ro, cp, &c).ok());
  ASSERT_TRUE(c->Get(t.id, 1, &v).ok());
  EXPECT_EQ(v, EncodeDense<int64_t>({3, 3}));
  EXPECT_EQ(c->ShardClock(), 1);
  c.reset();
  // And the source store still has its later write.
  ASSERT_TRUE(s->Get(t.id, 1, &v).ok());
  EXPECT_EQ(v, EncodeDense<int64_t>({4, 4}));

  // A store opened on the checkpoint dir works too.
  ASSERT_TRUE(ShardStore::Open(Opts(), cp, &c).ok());
  EXPECT_EQ(c->AppliedClock(0), 3);
}

TEST_F(CheckpointStoreTest, DamagedOrMissingManifest) {
  std::unique_ptr<ShardStore> s;
  ASSERT_TRUE(ShardStore::Open(Opts(), tmp_.Sub("data"), &s).ok());
  const std::string cp = tmp_.Sub("cp");
  ASSERT_TRUE(s->CreateCheckpoint(cp).ok());
  const std::string path = cp + "/PACE-CHECKPOINT";
  std::string text = ReadFile(path);
  ASSERT_FALSE(text.empty());
  CheckpointManifest m;
  WriteFile(path, Replace(text, "num_shards=1", "num_shards=2"));
  Status st = ShardStore::ReadCheckpointManifest(cp, &m);
  EXPECT_EQ(st.code(), StatusCode::kCorruption) << st.ToString();
  EXPECT_EQ(ShardStore::RestoreCheckpoint(cp, tmp_.Sub("r")).code(), StatusCode::kCorruption);
  WriteFile(path, text.substr(0, text.size() / 2));
  EXPECT_EQ(ShardStore::ReadCheckpointManifest(cp, &m).code(), StatusCode::kCorruption);
  std::remove(path.c_str());
  EXPECT_EQ(ShardStore::ReadCheckpointManifest(cp, &m).code(), StatusCode::kNotFound);
  EXPECT_EQ(ShardStore::ReadCheckpointManifest(tmp_.Sub("nope"), &m).code(), StatusCode::kNotFound);
}

// A checkpoint taken while batches keep arriving is one consistent state,
// and its manifest describes exactly that state.
TEST_F(CheckpointStoreTest, ConsistentUnderConcurrentWrites) {
  std::unique_ptr<ShardStore> s;
  ShardStoreOptions o = Opts();
  o.num_clients = 1;
  o.write_buffer_mb = 1;
  ASSERT_TRUE(ShardStore::Open(o, tmp_.Sub("data"), &s).ok());
  TableSchema t;
  ASSERT_TRUE(s->CreateTable(MakeSchema("t", RowKind::kDense, ElementType::kI64, 1), &t).ok());
  const std::string one = EncodeDense<int64_t>({1});
  std::vector<RowDelta> batch;
  for (uint64_t r = 0; r < 40; ++r) batch.push_back({t.id, r, one});
  std::atomic<bool> stop{false};
  std::thread writer([&] {
    bool dup;
    for (ClockT c = 0; !stop.load() && c < 100000; ++c) {
      Status st = s->ApplyBatch(0, c, batch, &dup);
      ASSERT_TRUE(st.ok()) << st.ToString();
    }
  });
  for (int i = 0; i < 3; ++i) {
    const std::string cp = tmp_.Sub("cp" + std::to_string(i));
    Status st = s->CreateCheckpoint(cp);
    ASSERT_TRUE(st.ok()) << st.ToString();
    CheckpointManifest m;
    ASSERT_TRUE(ShardStore::ReadCheckpointManifest(cp, &m).ok());
    ShardStoreOptions ro = o;
    ro.read_only = true;
    std::unique_ptr<ShardStore> c;
    ASSERT_TRUE(ShardStore::Open(ro, cp, &c).ok());
    ASSERT_EQ(c->AppliedClocks(), m.applied_clocks);
    std::string v;
    for (uint64_t r = 0; r < 40; ++r) {
      ASSERT_TRUE(c->Get(t.id, r, &v).ok());
      ASSERT_EQ(DecodeDense<int64_t>(v), std::vector<int64_t>({m.applied_clocks[0]})) << r;
    }
  }
  stop.store(true);
  writer.join();
}

}  // namespace
}  // namespace pace
