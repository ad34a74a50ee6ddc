#include "storage/reshard.h"

#include <gtest/gtest.h>

#include <filesystem>
#include <map>
#include <memory>

#include "common/hash.h"
#include "common/row.h"
#include "storage/testing/storage_test_util.h"

namespace pace {
namespace {

using testing_util::MakeSchema;
using testing_util::ScopedTempDir;

constexpr uint32_t kClients = 2;
constexpr uint64_t kRows = 300;

std::vector<TableSchema> Tables() {
  TableSchema counts = MakeSchema("counts", RowKind::kDense, ElementType::kI64, 3);
  counts.id = 1;
  TableSchema emb = MakeSchema("emb", RowKind::kDense, ElementType::kF32, 4);
  emb.id = 2;
  emb.init = Initializer{InitKind::kUniform, -0.5, 0.5, 11};
  TableSchema sp = MakeSchema("sp", RowKind::kSparse, ElementType::kI32, 0);
  sp.id = 4;  // id 3 was dropped: the next automatic id stays 5
  return {counts, emb, sp};
}

// A job's stores: shard k of `dirs.size()`.
struct Job {
  std::vector<std::unique_ptr<ShardStore>> shards;

  Status Open(const std::vector<std::string>& dirs, bool create) {
    shards.clear();
    for (uint32_t k = 0; k < dirs.size(); ++k) {
      ShardStoreOptions o;
      o.shard_id = k;
      o.num_shards = static_cast<uint32_t>(dirs.size());
      o.num_clients = kClients;
      o.create_if_missing = create;
      o.job = "reshard-test";
      o.row_cache_mb = 1;
      o.write_buffer_mb = 1;
      std::unique_ptr<ShardStore> s;
      RETURN_IF_ERROR(ShardStore::Open(o, dirs[k], &s));
      if (create) {
        for (const TableSchema& t : Tables()) {
          TableSchema created;
          RETURN_IF_ERROR(s->CreateTable(t, &created));
        }
      }
      shards.push_back(std::move(s));
    }
    return Status::OK();
  }

  // Every client's clock `clock`: deterministic deltas to rows spread over
  // the tables, each sent to the shard that owns the row.
  void ApplyClock(ClockT clock) {
    const uint32_t n = static_cast<uint32_t>(shards.size());
    for (ClientId p = 0; p < kClients; ++p) {
      std::vector<std::vector<std::string>> bytes(n);
      std::vector<std::vector<RowDelta>> deltas(n);
      for (uint64_t i = 0; i < 40; ++i) {
        const uint64_t row = (clock * 97 + p * 31 + i * 7) % kRows;
        const uint32_t table = i % 3 == 0 ? 1 : (i % 3 == 1 ? 2 : 4);
        std::string b;
        if (table == 1) {
          b = EncodeDense<int64_t>({static_cast<int64_t>(clock + 1), -3, static_cast<int64_t>(i)});
        } else if (table == 2) {
          b = EncodeDense<float>({0.25f * static_cast<float>(clock), 0.1f, -1.5f, 1e-3f});
        } else {
          b = EncodeSparse<int32_t>(std::vector<std::pair<uint32_t, int32_t>>{
              {static_cast<uint32_t>(i), 1}, {1000, static_cast<int32_t>(clock)}});
        }
        const uint32_t k = ShardOf(table, row, n);
        bytes[k].push_back(std::move(b));
        deltas[k].push_back(RowDelta{table, row, {}});
      }
      for (uint32_t k = 0; k < n; ++k) {
        std::map<std::pair<uint32_t, uint64_t>, std::string> merged;  // one delta per row
        for (size_t d = 0; d < deltas[k].size(); ++d) {
          auto key = std::make_pair(deltas[k][d].table, deltas[k][d].row);
          if (merged.count(key) == 0) merged[key] = bytes[k][d];
        }
        std::vector<RowDelta> batch;
        for (const auto& [key, b] : merged) batch.push_back(RowDelta{key.first, key.second, b});
        bool dup = false;
        Status s = shards[k]->ApplyBatch(p, clock, batch, &dup);
        ASSERT_TRUE(s.ok()) << s.ToString();
      }
    }
  }

  // Every row of every table read from the shard that owns it.
  std::map<std::pair<uint32_t, uint64_t>, std::string> Rows() const {
    std::map<std::pair<uint32_t, uint64_t>, std::string> out;
    const uint32_t n = static_cast<uint32_t>(shards.size());
    for (const TableSchema& t : Tables()) {
      for (uint64_t r = 0; r < kRows; ++r) {
        std::string v;
        Status s = shards[ShardOf(t.id, r, n)]->Get(t.id, r, &v);
        EXPECT_TRUE(s.ok()) << s.ToString();
        out[{t.id, r}] = v;
      }
    }
    return out;
  }

  std::vector<std::string> Checkpoint(const std::string& base) {
    std::vector<std::string> dirs;
    std::filesystem::create_directories(base);
    for (size_t k = 0; k < shards.size(); ++k) {
      dirs.push_back(base + "/ckpt" + std::to_string(k));
      Status s = shards[k]->CreateCheckpoint(dirs.back());
      EXPECT_TRUE(s.ok()) << s.ToString();
    }
    return dirs;
  }
};

std::vector<std::string> Dirs(const std::string& base, uint32_t n) {
  std::vector<std::string> d;
  for (uint32_t k = 0; k < n; ++k) d.push_back(base + "/shard" + std::to_string(k));
  return d;
}

class ReshardTest : public ::testing::Test {
 protected:
  std::string P(const std::string& name) const { return tmp_.path() + "/" + name; }
  ScopedTempDir tmp_{"reshard-test"};
};

// 2 shards -> 3 -> 1: every row's value and every applied clock carried over,
// and the re-sharded job continued for more clocks ends equal to a job that
// ran on one shard throughout.
TEST_F(ReshardTest, TwoToThreeToOneIsExact) {
  Job reference, two;
  ASSERT_TRUE(reference.Open({P("reference")}, true).ok());
  ASSERT_TRUE(two.Open(Dirs(P("two"), 2), true).ok());
  for (ClockT c = 0; c < 5; ++c) {
    reference.ApplyClock(c);
    two.ApplyClock(c);
  }
  ASSERT_EQ(two.Rows(), reference.Rows());
  std::vector<std::string> ckpts = two.Checkpoint(P("two"));
  two.shards.clear();

  ReshardOptions o;
  o.num_shards = 3;
  ReshardResult r;
  Status s = ReshardCheckpoints({ckpts[1], ckpts[0]}, P("three"), o, &r);
  ASSERT_TRUE(s.ok()) << s.ToString();
  EXPECT_EQ(r.source_shards, 2u);
  EXPECT_EQ(r.shard_clock, 5);
  EXPECT_EQ(r.job, "reshard-test");
  ASSERT_EQ(r.shard_dirs.size(), 3u);
  EXPECT_EQ(r.shard_rows[0] + r.shard_rows[1] + r.shard_rows[2], r.rows);
  EXPECT_FALSE(std::filesystem::exists(P("three.reshard-tmp")));

  Job three;
  ASSERT_TRUE(three.Open(r.shard_dirs, false).ok());
  for (const auto& shard : three.shards) {
    EXPECT_EQ(shard->ShardClock(), 5);
    EXPECT_EQ(shard->AppliedClocks(), (std::vector<ClockT>{5, 5}));
    EXPECT_EQ(shard->identity().job, "reshard-test");
    // Only rows the hash places here.
    for (const TableSchema& t : Tables()) {
      ASSERT_TRUE(shard
                      ->Scan(t.id, 0,
                             [&](uint64_t row, std::string_view) {
                               EXPECT_EQ(ShardOf(t.id, row, 3), shard->identity().shard_id);
                               return true;
                             })
                      .ok());
    }
  }
  EXPECT_EQ(three.Rows(), reference.Rows());
  // A new table on shard 0 gets the next automatic id of the old shard 0.
  TableSchema fresh = MakeSchema("fresh", RowKind::kDense, ElementType::kI32, 1);
  TableSchema created;
  ASSERT_TRUE(three.shards[0]->CreateTable(fresh, &created).ok());
  EXPECT_EQ(created.id, 5u);
  ASSERT_TRUE(three.shards[0]->DropTable("fresh").ok());

  for (ClockT c = 5; c < 8; ++c) {
    reference.ApplyClock(c);
    three.ApplyClock(c);
  }
  EXPECT_EQ(three.Rows(), reference.Rows());

  ckpts = three.Checkpoint(P("three-ckpt"));
  three.shards.clear();
  o.num_shards = 1;
  s = ReshardCheckpoints(ckpts, P("one"), o, &r);
  ASSERT_TRUE(s.ok()) << s.ToString();
  Job one;
  ASSERT_TRUE(one.Open(r.shard_dirs, false).ok());
  EXPECT_EQ(one.shards[0]->ShardClock(), 8);
  EXPECT_EQ(one.Rows(), reference.Rows());
}

// Another number of clients: every new client starts at the clock all old
// ones finished; refused while they are at different clocks.
TEST_F(ReshardTest, ChangesTheNumberOfClientsAtAClockAllFinished) {
  Job two;
  ASSERT_TRUE(two.Open(Dirs(P("two"), 2), true).ok());
  two.ApplyClock(0);
  two.ApplyClock(1);
  bool dup = false;
  for (auto& shard : two.shards) ASSERT_TRUE(shard->ApplyBatch(0, 2, {}, &dup).ok());
  std::vector<std::string> uneven = two.Checkpoint(P("uneven"));  // clocks 3, 2
  for (auto& shard : two.shards) ASSERT_TRUE(shard->ApplyBatch(1, 2, {}, &dup).ok());
  std::vector<std::string> even = two.Checkpoint(P("even"));  // clocks 3, 3
  const auto rows = two.Rows();
  two.shards.clear();
  ReshardOptions o;
  o.num_shards = 3;
  o.num_clients = 3;
  ReshardResult r;
  Status s = ReshardCheckpoints(uneven, P("out"), o, &r);
  EXPECT_EQ(s.code(), StatusCode::kInvalidArgument) << s.ToString();
  EXPECT_NE(s.message().find("clients are at different clocks (client 0: 3, client 1: 2)"),
            std::string::npos)
      << s.ToString();
  s = ReshardCheckpoints(even, P("out"), o, &r);
  ASSERT_TRUE(s.ok()) << s.ToString();
  EXPECT_EQ(r.num_clients, 3u);
  for (uint32_t j = 0; j < 3; ++j) {
    ShardStoreOptions so;
    so.shard_id = j;
    so.num_shards = 3;
    so.num_clients = 3;
    so.job = "reshard-test";
    std::unique_ptr<ShardStore> store;
    ASSERT_TRUE(ShardStore::Open(so, r.shard_dirs[j], &store).ok());
    EXPECT_EQ(store->AppliedClocks(), (std::vector<ClockT>{3, 3, 3}));
    for (const auto& [key, value] : rows) {
      if (ShardOf(key.first, key.second, 3) != j) continue;
      std::string v;
      ASSERT_TRUE(store->Get(key.first, key.second, &v).ok());
      EXPECT_EQ(v, value);
    }
  }
}

TEST_F(ReshardTest, RefusesWhatIsNotOneJobAtOneClock) {
  Job two;
  ASSERT_TRUE(two.Open(Dirs(P("two"), 2), true).ok());
  two.ApplyClock(0);
  std::vector<std::string> at1 = two.Checkpoint(P("at1"));
  two.ApplyClock(1);
  std::vector<std::string> at2 = two.Checkpoint(P("at2"));
  ReshardOptions o;
  o.num_shards = 3;
  ReshardResult r;

  Status s = ReshardCheckpoints({at1[0]}, P("out"), o, &r);
  EXPECT_EQ(s.code(), StatusCode::kInvalidArgument);
  EXPECT_NE(s.message().find("give one checkpoint of each of the job's 2 shards"),
            std::string::npos)
      << s.ToString();
  s = ReshardCheckpoints({at1[0], at2[1]}, P("out"), o, &r);
  EXPECT_EQ(s.code(), StatusCode::kInvalidArgument);
  EXPECT_NE(s.message().find("differ in their applied clocks"), std::string::npos) << s.ToString();
  s = ReshardCheckpoints({at1[0], at1[0]}, P("out"), o, &r);
  EXPECT_EQ(s.code(), StatusCode::kInvalidArgument);
  EXPECT_NE(s.message().find("both checkpoints of shard 0"), std::string::npos) << s.ToString();
  EXPECT_FALSE(std::filesystem::exists(P("out")));

  // A killed run's staging directory is replaced; a non-empty target refused.
  std::filesystem::create_directories(P("out.reshard-tmp/shard-0"));
  s = ReshardCheckpoints(at2, P("out"), o, &r);
  ASSERT_TRUE(s.ok()) << s.ToString();
  s = ReshardCheckpoints(at2, P("out"), o, &r);
  EXPECT_EQ(s.code(), StatusCode::kAlreadyExists) << s.ToString();
}

}  // namespace
}  // namespace pace
