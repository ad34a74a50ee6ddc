#include "consistency/parked_reads.h"

#include <gtest/gtest.h>

#include <memory>
#include <string>
#include <vector>

namespace pace {
namespace {

TEST(ParkedReadsTest, TakeReadyReturnsReadyItemsInArrivalOrder) {
  ParkedReads<std::string> p;
  p.Park(3, "a");
  p.Park(1, "b");
  p.Park(5, "c");
  p.Park(2, "d");
  p.Park(1, "e");
  EXPECT_EQ(p.size(), 5u);
  EXPECT_EQ(p.MinWaiting(), 1);
  EXPECT_TRUE(p.TakeReady(0).empty());
  EXPECT_EQ(p.TakeReady(3), (std::vector<std::string>{"a", "b", "d", "e"}));
  EXPECT_EQ(p.size(), 1u);
  EXPECT_EQ(p.MinWaiting(), 5);
  EXPECT_TRUE(p.TakeReady(4).empty());
  EXPECT_EQ(p.TakeReady(100), (std::vector<std::string>{"c"}));
  EXPECT_TRUE(p.empty());
}

TEST(ParkedReadsTest, HoldsMoveOnlyItems) {
  ParkedReads<std::unique_ptr<int>> p;
  p.Park(1, std::make_unique<int>(7));
  auto ready = p.TakeReady(1);
  ASSERT_EQ(ready.size(), 1u);
  EXPECT_EQ(*ready[0], 7);
}

TEST(ParkedReadsTest, RemoveIfDropsMatchingItemsEverywhere) {
  struct Item {
    uint64_t session;
    int n;
  };
  ParkedReads<Item> p;
  p.Park(2, {1, 0});
  p.Park(2, {2, 1});
  p.Park(4, {1, 2});
  p.Park(6, {1, 3});
  p.Park(6, {2, 4});
  EXPECT_EQ(p.RemoveIf([](const Item& i) { return i.session == 1; }), 3u);
  EXPECT_EQ(p.size(), 2u);
  EXPECT_EQ(p.MinWaiting(), 2);
  auto ready = p.TakeReady(10);
  ASSERT_EQ(ready.size(), 2u);
  EXPECT_EQ(ready[0].n, 1);
  EXPECT_EQ(ready[1].n, 4);
  EXPECT_EQ(p.RemoveIf([](const Item&) { return true; }), 0u);
}

TEST(ParkedReadsTest, NegativeAndZeroMinVersionsAreReadyAtClockZero) {
  ParkedReads<int> p;
  p.Park(-5, 1);
  p.Park(0, 2);
  EXPECT_EQ(p.TakeReady(0), (std::vector<int>{1, 2}));
}

}  // namespace
}  // namespace pace
