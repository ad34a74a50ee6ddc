#include "client/row_cache.h"

#include <gtest/gtest.h>

#include <string>
#include <vector>

namespace pace::client {
namespace {

TableSchema I64Schema(uint32_t width) {
  TableSchema s;
  s.id = 1;
  s.name = "t";
  s.type = ElementType::kI64;
  s.width = width;
  return s;
}

std::string Dense(std::vector<int64_t> v) { return EncodeDense(v); }

class RowCacheTest : public ::testing::Test {
 protected:
  TableState table_{I64Schema(2), 0, nullptr};
  CacheStripe st_;
};

TEST_F(RowCacheTest, IncGoesToOplogAndCachedValue) {
  st_.budget = 1 << 20;
  CacheEntry* e = st_.FindOrCreate(RowKey{1, 5}, 0, &table_);
  st_.AddDelta(e, 0, Dense({1, 2}));
  st_.AddDelta(e, 0, Dense({10, 20}));  // same clock: coalesced
  st_.AddDelta(e, 1, Dense({100, 200}));
  ASSERT_EQ(e->pending.size(), 2u);
  EXPECT_EQ(DecodeDense<int64_t>(e->FindPending(0)->delta), (std::vector<int64_t>{11, 22}));
  EXPECT_FALSE(e->has_value);
  // Server value of applied clock 0 lacks both clocks.
  st_.InstallValue(e, Dense({1000, 1000}), 0, 0);
  EXPECT_EQ(DecodeDense<int64_t>(e->value), (std::vector<int64_t>{1111, 1222}));
  // A value that already holds clock 0 (applied 1) gets only clock 1 added.
  st_.InstallValue(e, Dense({2011, 2022}), 1, 1);
  EXPECT_EQ(DecodeDense<int64_t>(e->value), (std::vector<int64_t>{2111, 2222}));
  st_.AddDelta(e, 1, Dense({1, 1}));
  EXPECT_EQ(DecodeDense<int64_t>(e->value), (std::vector<int64_t>{2112, 2223}));
  EXPECT_EQ(st_.bytes, st_.Charge(*e));
}

TEST_F(RowCacheTest, DirtyListsPerClock) {
  CacheEntry* a = st_.FindOrCreate(RowKey{1, 1}, 0, &table_);
  CacheEntry* b = st_.FindOrCreate(RowKey{1, 2}, 0, &table_);
  st_.AddDelta(a, 3, Dense({1, 1}));
  st_.AddDelta(b, 4, Dense({1, 1}));
  st_.AddDelta(a, 4, Dense({1, 1}));
  st_.AddDelta(a, 3, Dense({1, 1}));
  EXPECT_EQ(st_.TakeDirty(3), (std::vector<CacheEntry*>{a}));
  EXPECT_EQ(st_.TakeDirty(4), (std::vector<CacheEntry*>{b, a}));
  EXPECT_TRUE(st_.TakeDirty(4).empty());
}

TEST_F(RowCacheTest, AckPurgesAndErasesEmptyEntries) {
  CacheEntry* e = st_.FindOrCreate(RowKey{1, 1}, 0, &table_);
  st_.AddDelta(e, 0, Dense({1, 1}));
  st_.AddDelta(e, 1, Dense({1, 1}));
  st_.PurgeAcked(RowKey{1, 1}, 0);
  ASSERT_NE(st_.Find(RowKey{1, 1}), nullptr);
  EXPECT_EQ(e->pending.size(), 1u);
  st_.PurgeAcked(RowKey{1, 1}, 1);
  EXPECT_EQ(st_.Find(RowKey{1, 1}), nullptr);
}

TEST_F(RowCacheTest, EvictionKeepsOplogAndSkipsPinned) {
  const size_t one = kEntryOverheadBytes + 16;
  st_.budget = 2 * one + one / 2;  // room for two rows
  std::vector<CacheEntry*> es;
  for (uint64_t r = 0; r < 4; ++r) {
    CacheEntry* e = st_.FindOrCreate(RowKey{1, r}, 0, &table_);
    st_.InstallValue(e, Dense({0, 0}), 0, 0);
    es.push_back(e);
  }
  st_.AddDelta(es[0], 0, Dense({5, 5}));  // un-sent update
  es[1]->waiters = 1;                     // pinned by a reader
  int evicted = 0;
  st_.EvictOverBudget([&](CacheEntry*) { ++evicted; });
  EXPECT_LE(st_.bytes, st_.budget);
  EXPECT_EQ(evicted, 2);
  EXPECT_TRUE(es[1]->has_value);
  // Row 0 lost its value (if chosen) but never its pending delta.
  CacheEntry* e0 = st_.Find(RowKey{1, 0});
  ASSERT_NE(e0, nullptr);
  ASSERT_EQ(e0->pending.size(), 1u);
  EXPECT_EQ(DecodeDense<int64_t>(e0->pending[0].delta), (std::vector<int64_t>{5, 5}));
  size_t with_value = 0;
  for (uint64_t r = 0; r < 4; ++r) {
    CacheEntry* e = st_.Find(RowKey{1, r});
    if (e != nullptr && e->has_value) ++with_value;
  }
  EXPECT_EQ(with_value, st_.ring.size());
  EXPECT_EQ(with_value, 2u);
}

TEST_F(RowCacheTest, DenseCellAndSparseRows) {
  CacheEntry* e = st_.FindOrCreate(RowKey{1, 1}, 0, &table_);
  st_.InstallValue(e, Dense({1, 1}), 0, 0);
  st_.AddDenseCell(e, 0, 1, 41.0);
  EXPECT_EQ(DecodeDense<int64_t>(e->value), (std::vector<int64_t>{1, 42}));
  EXPECT_EQ(DecodeDense<int64_t>(e->FindPending(0)->delta), (std::vector<int64_t>{0, 41}));

  TableSchema ss = I64Schema(0);
  ss.kind = RowKind::kSparse;
  TableState sparse(ss, 1, nullptr);
  CacheEntry* s = st_.FindOrCreate(RowKey{2, 1}, 0, &sparse);
  std::vector<std::pair<uint32_t, int64_t>> d1{{3, 5}}, d2{{1, 2}, {3, -5}};
  st_.AddDelta(s, 0, EncodeSparse(d1));
  st_.InstallValue(s, EncodeSparse(std::vector<std::pair<uint32_t, int64_t>>{{7, 1}}), 0, 0);
  st_.AddDelta(s, 0, EncodeSparse(d2));
  auto v = DecodeSparse<int64_t>(s->value);
  EXPECT_EQ(v, (std::vector<std::pair<uint32_t, int64_t>>{{1, 2}, {7, 1}}));
}

}  // namespace
}  // namespace pace::client
