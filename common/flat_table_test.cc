#include "common/flat_table.h"

#include <gtest/gtest.h>

#include <random>
#include <unordered_map>

namespace pace {
namespace {

// A slot whose hash collides on purpose (few distinct homes), so probe runs
// are long, wrap around the end of the array, and erases shift many slots.
struct Slot {
  uint64_t key = 0;
  uint32_t value = 0;  // 0: empty
};
struct CollidingPolicy {
  static bool IsEmpty(const Slot& s) { return s.value == 0; }
  static size_t Hash(const Slot& s) { return HashOf(s.key); }
  static size_t HashOf(uint64_t key) {
    return static_cast<size_t>((key % 5) * 0x9E3779B97F4A7C15ull >> 7);
  }
};

TEST(FlatTableTest, MatchesAStdMapUnderCollidingInsertsAndErases) {
  FlatTable<Slot, CollidingPolicy> table;
  std::unordered_map<uint64_t, uint32_t> want;
  std::mt19937_64 rnd(7);
  auto match = [](uint64_t k) { return [k](const Slot& s) { return s.key == k; }; };
  for (int i = 0; i < 20000; ++i) {
    const uint64_t k = rnd() % 300;
    const size_t h = CollidingPolicy::HashOf(k);
    if (rnd() % 3 == 0) {
      Slot removed;
      const bool erased = table.Erase(h, match(k), &removed);
      ASSERT_EQ(erased, want.count(k) == 1) << k;
      if (erased) {
        EXPECT_EQ(removed.value, want[k]);
      }
      want.erase(k);
    } else if (table.Find(h, match(k)) == nullptr) {
      const uint32_t v = static_cast<uint32_t>(i + 1);
      Slot* s = table.Insert(h, Slot{k, v});
      EXPECT_EQ(s->key, k);
      want[k] = v;
    }
    ASSERT_EQ(table.size(), want.size());
    if (i % 997 == 0) {
      for (uint64_t q = 0; q < 300; ++q) {
        const Slot* s = table.Find(CollidingPolicy::HashOf(q), match(q));
        ASSERT_EQ(s != nullptr, want.count(q) == 1) << q;
        if (s != nullptr) {
          EXPECT_EQ(s->value, want[q]);
        }
      }
    }
  }
  EXPECT_LE(2 * table.size(), table.capacity());
  size_t seen = 0;
  table.ForEach([&](Slot& s) {
    ++seen;
    EXPECT_EQ(want.at(s.key), s.value);
  });
  EXPECT_EQ(seen, want.size());
  table.Clear();
  EXPECT_EQ(table.size(), 0u);
  EXPECT_EQ(table.Find(CollidingPolicy::HashOf(1), match(1)), nullptr);
}

TEST(FlatMapTest, FindInsertErase) {
  FlatMap<uint64_t, uint32_t, UINT32_MAX> m;
  EXPECT_EQ(m.Find(5), m.kNone);
  for (uint64_t r = 0; r < 1000; ++r) m.Insert(r * 1000003, static_cast<uint32_t>(r));
  EXPECT_EQ(m.size(), 1000u);
  for (uint64_t r = 0; r < 1000; r += 2) EXPECT_TRUE(m.Erase(r * 1000003));
  EXPECT_FALSE(m.Erase(0));
  for (uint64_t r = 0; r < 1000; ++r) {
    EXPECT_EQ(m.Find(r * 1000003), r % 2 == 0 ? m.kNone : static_cast<uint32_t>(r));
  }
  EXPECT_EQ(m.size(), 500u);
}

}  // namespace
}  // namespace pace
