// The writer's memtable switch (ShardStore::Impl::MaybeSwitchMemtableLocked):
// a store written one small group per clock keeps only a few groups' versions
// of its rows in the active memtable instead of one per clock until
// write_buffer_mb fills, and every value stays exact through the flushes.
#include <gtest/gtest.h>

#include <chrono>
#include <string>
#include <thread>
#include <vector>

#include "common/row.h"
#include "storage/shard_store.h"
#include "storage/testing/storage_test_util.h"

namespace pace {
namespace {

using testing_util::MakeSchema;

constexpr uint64_t kRows = 2000;
constexpr uint32_t kWidth = 16;
constexpr int kClocks = 40;

uint64_t Property(const ShardStore& s, const char* name) {
  uint64_t v = 0;
  EXPECT_TRUE(s.GetIntProperty(name, &v)) << name;
  return v;
}

// Waits (no time limit: a stuck flush fails the test by the suite's timeout)
// until no memtable is waiting for its background flush, so the next group's
// switch is never skipped for one.
void WaitForFlushes(const ShardStore& s) {
  while (Property(s, "rocksdb.num-immutable-mem-table") > 0) {
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
}

class MemtableSwitchTest : public ::testing::TestWithParam<size_t> {};

TEST_P(MemtableSwitchTest, SmallGroupsKeepFewVersionsPerRowAndExactValues) {
  testing_util::ScopedTempDir tmp;
  const std::string dir = tmp.Sub("s");
  ShardStoreOptions o;
  o.num_clients = 1;
  o.write_buffer_mb = 64;       // 40 groups of ~300 KB never fill it
  o.row_cache_mb = GetParam();  // Puts of cached rows, or merge operands
  o.clock_log = false;          // the write path of rows written per group
  std::unique_ptr<ShardStore> store;
  ASSERT_TRUE(ShardStore::Open(o, dir, &store).ok());
  TableSchema t;
  ASSERT_TRUE(
      store->CreateTable(MakeSchema("t", RowKind::kDense, ElementType::kI64, kWidth), &t).ok());
  std::vector<uint64_t> ids(kRows);
  for (uint64_t r = 0; r < kRows; ++r) ids[r] = r;
  std::vector<std::string> values;
  ASSERT_TRUE(store->MultiGet(t.id, ids, &values).ok());  // cached (when the cache is on)

  uint64_t most_entries = 0;
  for (int c = 0; c < kClocks; ++c) {
    WaitForFlushes(*store);
    std::vector<RowDelta> deltas;
    std::vector<std::string> bytes(kRows);
    for (uint64_t r = 0; r < kRows; ++r) {
      bytes[r] = EncodeDense<int64_t>(std::vector<int64_t>(kWidth, static_cast<int64_t>(r + 1)));
      deltas.push_back(RowDelta{t.id, r, bytes[r]});
    }
    std::vector<BatchRequest> group = {{0, c, &deltas}};
    std::vector<BatchResult> results;
    ASSERT_TRUE(store->ApplyBatches(group, &results).ok());
    ASSERT_TRUE(results[0].status.ok()) << results[0].status.ToString();
    most_entries = std::max(most_entries, Property(*store, "rocksdb.num-entries-active-mem-table"));
  }
  // Without the switch the active memtable ends with all 40 clocks' entries
  // (80,000); with it, at most a few groups' worth (4 + the one that went
  // over the limit).
  EXPECT_LE(most_entries, 5 * kRows + 8) << "entries of the active memtable";
  WaitForFlushes(*store);
  EXPECT_GT(Property(*store, "rocksdb.total-sst-files-size"), 0u) << "no memtable was flushed";

  auto check = [&](const ShardStore& s) {
    std::vector<std::string> got;
    ASSERT_TRUE(s.MultiGet(t.id, ids, &got).ok());
    ASSERT_EQ(got.size(), kRows);
    for (uint64_t r = 0; r < kRows; ++r) {
      const std::vector<int64_t> v = DecodeDense<int64_t>(got[r]);
      ASSERT_EQ(v, std::vector<int64_t>(kWidth, static_cast<int64_t>((r + 1) * kClocks)))
          << "row " << r;
    }
    EXPECT_EQ(s.AppliedClocks(), (std::vector<ClockT>{kClocks}));
  };
  check(*store);
  store.reset();
  ASSERT_TRUE(ShardStore::Open(o, dir, &store).ok());
  check(*store);
}

INSTANTIATE_TEST_SUITE_P(RowCache, MemtableSwitchTest, ::testing::Values(size_t{0}, size_t{64}),
                         [](const auto& info) { return info.param == 0 ? "Off" : "On"; });

}  // namespace
}  // namespace pace
