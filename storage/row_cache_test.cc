#include "storage/row_cache.h"

#include <gtest/gtest.h>

#include <map>
#include <random>
#include <string>
#include <utility>

namespace pace {
namespace {

// A written row whose sum has `bytes` heap bytes (beyond the inline buffer).
CachedRow RowOf(size_t bytes, char fill = 'x') {
  CachedRow r;
  r.written = true;
  r.sum.assign(bytes, fill);
  return r;
}

// What an entry made by RowOf(bytes) is charged: its heap buffer (the
// allocated capacity, which may exceed the size) plus the fixed overhead.
size_t ChargeOf(size_t bytes) {
  const size_t capacity = RowOf(bytes).sum.capacity();
  return RowCache::kEntryOverhead + (capacity > std::string().capacity() ? capacity + 1 : 0);
}

TEST(RowCacheTest, LookupPeekAndCounters) {
  RowCache c(1 << 20);
  EXPECT_EQ(c.Lookup(1, 7), nullptr);
  c.Insert(1, 7, RowOf(100, 'a'));
  c.Insert(2, 7, RowOf(100, 'b'));  // same row id, other table
  ASSERT_NE(c.Lookup(1, 7), nullptr);
  EXPECT_EQ(c.Lookup(1, 7)->sum, std::string(100, 'a'));
  ASSERT_NE(c.Peek(2, 7), nullptr);
  EXPECT_EQ(c.Peek(2, 7)->sum, std::string(100, 'b'));
  EXPECT_EQ(c.Peek(3, 7), nullptr);
  EXPECT_EQ(c.entries(), 2u);
  EXPECT_EQ(c.bytes(), 2 * ChargeOf(100));
  EXPECT_EQ(c.counters().hits, 2u);    // Peek does not count
  EXPECT_EQ(c.counters().misses, 1u);  // the first Lookup
  EXPECT_EQ(c.counters().inserts, 2u);

  // Replacing keeps one entry.
  c.Insert(1, 7, RowOf(20, 'c'));
  EXPECT_EQ(c.entries(), 2u);
  EXPECT_EQ(c.Peek(1, 7)->sum, std::string(20, 'c'));
  EXPECT_EQ(c.bytes(), ChargeOf(20) + ChargeOf(100));
}

TEST(RowCacheTest, EvictsLeastRecentlyUsed) {
  const size_t each = ChargeOf(1000);
  RowCache c(3 * each);
  c.Insert(1, 1, RowOf(1000));
  c.Insert(1, 2, RowOf(1000));
  c.Insert(1, 3, RowOf(1000));
  ASSERT_NE(c.Lookup(1, 1), nullptr);  // 1 is now the most recent; 2 the least
  ASSERT_NE(c.Peek(1, 2), nullptr);    // Peek does not refresh 2
  c.Insert(1, 4, RowOf(1000));
  EXPECT_EQ(c.Peek(1, 2), nullptr);
  EXPECT_NE(c.Peek(1, 1), nullptr);
  EXPECT_NE(c.Peek(1, 3), nullptr);
  EXPECT_NE(c.Peek(1, 4), nullptr);
  EXPECT_EQ(c.counters().evictions, 1u);
  EXPECT_LE(c.bytes(), c.capacity());
}

TEST(RowCacheTest, RechargeEvictsWhenARowGrows) {
  RowCache c(ChargeOf(100) + ChargeOf(3000) - 1);
  c.Insert(1, 1, RowOf(100));
  c.Insert(1, 2, RowOf(100));
  CachedRow* r = c.Peek(1, 2);
  ASSERT_NE(r, nullptr);
  r->sum = RowOf(3000).sum;  // a sparse row that grew
  c.Recharge(1, 2);
  // 1 was least recently used and goes; 2 fits alone.
  EXPECT_EQ(c.Peek(1, 1), nullptr);
  ASSERT_NE(c.Peek(1, 2), nullptr);
  EXPECT_EQ(c.bytes(), ChargeOf(3000));
  // Growing beyond the whole capacity evicts the row itself.
  c.Peek(1, 2)->sum = RowOf(10000).sum;
  c.Recharge(1, 2);
  EXPECT_EQ(c.Peek(1, 2), nullptr);
  EXPECT_EQ(c.bytes(), 0u);
  c.Recharge(1, 99);  // not cached: no-op
}

TEST(RowCacheTest, TooLargeIsNotKept) {
  RowCache c(ChargeOf(100));
  c.Insert(1, 1, RowOf(100));
  c.Insert(1, 2, RowOf(5000));
  EXPECT_EQ(c.Peek(1, 2), nullptr);
  EXPECT_NE(c.Peek(1, 1), nullptr);  // nothing was evicted for it
}

TEST(RowCacheTest, EraseTableAndClear) {
  RowCache c(1 << 20);
  for (uint64_t r = 0; r < 10; ++r) {
    c.Insert(1, r, RowOf(50));
    c.Insert(2, r, RowOf(50));
  }
  c.Erase(2, 3);
  EXPECT_EQ(c.Peek(2, 3), nullptr);
  c.EraseTable(1);
  EXPECT_EQ(c.entries(), 9u);
  for (uint64_t r = 0; r < 10; ++r) EXPECT_EQ(c.Peek(1, r), nullptr);
  EXPECT_NE(c.Peek(2, 4), nullptr);
  EXPECT_EQ(c.bytes(), 9 * ChargeOf(50));
  c.Clear();
  EXPECT_EQ(c.entries(), 0u);
  EXPECT_EQ(c.bytes(), 0u);
}

TEST(RowCacheTest, ChargesTheInitializerToo) {
  RowCache c(1 << 20);
  CachedRow r;
  r.init.assign(400, 'i');  // never written, nonzero initializer
  c.Insert(5, 5, std::move(r));
  EXPECT_EQ(c.bytes(), ChargeOf(400));
  EXPECT_FALSE(c.Peek(5, 5)->written);
}

// Random inserts, erases and lookups of dense, strided and random row ids in
// two tables against a std::map (no evictions: a large budget).
TEST(RowCacheTest, MatchesAMapUnderRandomOperations) {
  RowCache c(size_t{1} << 30);
  std::map<std::pair<uint32_t, uint64_t>, std::string> model;
  std::mt19937_64 rng(5);
  auto random_key = [&rng]() -> std::pair<uint32_t, uint64_t> {
    const uint32_t table = 1 + static_cast<uint32_t>(rng() % 2);
    switch (rng() % 3) {
      case 0:
        return {table, rng() % 4000};  // dense
      case 1:
        return {table, (rng() % 500) * 64};  // strided: same offset in a block
      default:
        return {table, rng()};
    }
  };
  for (int step = 0; step < 100000; ++step) {
    const auto key = random_key();
    const int op = static_cast<int>(rng() % 4);
    if (op == 0) {
      c.Erase(key.first, key.second);
      model.erase(key);
    } else if (op == 1) {
      CachedRow r = RowOf(20, static_cast<char>('a' + step % 26));
      model[key] = r.sum;
      c.Insert(key.first, key.second, std::move(r));
    } else {
      const CachedRow* got =
          op == 2 ? c.Lookup(key.first, key.second) : c.Peek(key.first, key.second);
      auto it = model.find(key);
      ASSERT_EQ(got != nullptr, it != model.end()) << "step " << step;
      if (got != nullptr) {
        ASSERT_EQ(got->sum, it->second) << "step " << step;
      }
    }
    if (step % 10000 == 0) {
      ASSERT_EQ(c.entries(), model.size());
      for (const auto& [k, v] : model) {
        const CachedRow* got = c.Peek(k.first, k.second);
        ASSERT_NE(got, nullptr) << k.first << "/" << k.second;
        ASSERT_EQ(got->sum, v);
      }
    }
  }
  c.EraseTable(1);
  for (auto it = model.begin(); it != model.end();) {
    it = it->first.first == 1 ? model.erase(it) : std::next(it);
  }
  ASSERT_EQ(c.entries(), model.size());
  for (const auto& [k, v] : model) ASSERT_NE(c.Peek(k.first, k.second), nullptr);
}

// Dirty rows (the clock log's rows not yet written back) are never evicted
// and never replaced by a reader's fill; CleanAll makes them evictable.
TEST(RowCacheTest, DirtyRowsStayUntilCleaned) {
  const size_t each = ChargeOf(1000);
  RowCache c(3 * each);
  c.Insert(1, 1, RowOf(1000, 'a'));
  EXPECT_TRUE(c.MarkDirty(1, 1));
  EXPECT_FALSE(c.MarkDirty(1, 99));  // not cached
  c.InsertDirty(1, 2, RowOf(1000, 'b'));
  EXPECT_EQ(c.dirty_entries(), 2u);
  EXPECT_EQ(c.dirty_bytes(), 2 * each);
  // Clean rows come and go; the dirty ones stay, even over the capacity.
  for (uint64_t r = 10; r < 20; ++r) c.Insert(1, r, RowOf(1000, 'c'));
  c.InsertDirty(1, 3, RowOf(1000, 'd'));
  c.InsertDirty(1, 4, RowOf(1000, 'e'));
  for (uint64_t r : {1, 2, 3, 4}) ASSERT_NE(c.Peek(1, r), nullptr) << r;
  EXPECT_EQ(c.dirty_entries(), 4u);
  EXPECT_GT(c.bytes(), c.capacity());
  // A reader's fill does not replace a dirty row (it is newer).
  c.Insert(1, 1, RowOf(1000, 'z'));
  EXPECT_EQ(c.Peek(1, 1)->sum, std::string(1000, 'a'));
  // A growing dirty row is re-charged as dirty.
  c.Peek(1, 2)->sum.assign(5000, 'b');
  c.Recharge(1, 2);
  EXPECT_EQ(c.dirty_bytes(), 3 * each + ChargeOf(5000));
  size_t seen = 0;
  c.ForEachDirty([&](uint32_t t, uint64_t, const CachedRow&) { seen += t == 1; });
  EXPECT_EQ(seen, 4u);
  // Cleaned, they are ordinary rows again and the cache shrinks to its capacity.
  c.CleanAll();
  EXPECT_EQ(c.dirty_entries(), 0u);
  EXPECT_EQ(c.dirty_bytes(), 0u);
  EXPECT_LE(c.bytes(), c.capacity());
  // Dropping a table drops its dirty rows too.
  c.InsertDirty(5, 1, RowOf(10));
  c.EraseTable(5);
  EXPECT_EQ(c.Peek(5, 1), nullptr);
  EXPECT_EQ(c.dirty_entries(), 0u);
  EXPECT_EQ(c.dirty_bytes(), 0u);
}

TEST(RowCacheTest, DirtyHandlesStayValidWhileCleanRowsComeAndGo) {
  const size_t each = ChargeOf(1000);
  RowCache c(4 * each);
  c.Insert(1, 7, RowOf(1000, 'a'));
  const uint32_t h7 = c.PinDirty(1, 7);
  ASSERT_NE(h7, RowCache::kNoHandle);
  EXPECT_EQ(c.PinDirty(1, 7), h7);  // pinning again: the same row
  EXPECT_EQ(c.PinDirty(1, 8), RowCache::kNoHandle);
  const uint32_t h8 = c.InsertDirty(1, 8, RowOf(1000, 'b'));
  EXPECT_EQ(c.dirty_entries(), 2u);
  // Many clean rows are inserted and evicted (the node slab grows and its
  // free list is reused): the handles still name rows 7 and 8.
  for (uint64_t r = 100; r < 1100; ++r) c.Insert(2, r, RowOf(1000, 'c'));
  EXPECT_EQ(c.DirtyRow(h7), c.Peek(1, 7));
  EXPECT_EQ(c.DirtyRow(h8), c.Peek(1, 8));
  EXPECT_EQ(c.DirtyRow(h8)->sum, std::string(1000, 'b'));
  // Growing a row through its handle is re-charged as dirty.
  c.DirtyRow(h7)->sum.assign(3000, 'a');
  c.RechargeDirty(h7);
  EXPECT_EQ(c.dirty_bytes(), each + ChargeOf(3000));
  EXPECT_EQ(c.Peek(1, 7)->sum.size(), 3000u);
}

}  // namespace
}  // namespace pace
