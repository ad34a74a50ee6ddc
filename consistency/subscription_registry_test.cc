#include "consistency/subscription_registry.h"

#include <gtest/gtest.h>

#include <vector>

namespace pace {
namespace {

// The rows planned for `sub`, as keys.
std::vector<RowKey> RowsFor(const PushPlan& plan, SubscriberId sub) {
  for (const auto& e : plan.subscribers) {
    if (e.subscriber != sub) continue;
    std::vector<RowKey> out;
    for (uint32_t i : e.row_indices) out.push_back(plan.rows[i]);
    return out;
  }
  ADD_FAILURE() << "subscriber " << sub << " not in plan";
  return {};
}

TEST(SubscriptionRegistryTest, PlansChangedSubscribedRowsPerSubscriber) {
  SubscriptionRegistry reg;
  EXPECT_EQ(reg.Subscribe(1, 7, {10, 11, 12}), 3u);
  EXPECT_EQ(reg.Subscribe(2, 7, {11, 13}), 2u);
  EXPECT_EQ(reg.Subscribe(1, 7, {10}), 0u);  // duplicate
  EXPECT_EQ(reg.num_subscriptions(), 5u);

  reg.MarkDirty({7, 11});
  reg.MarkDirty({7, 12});
  reg.MarkDirty({7, 99});  // nobody subscribes: not tracked
  reg.MarkDirty({8, 11});  // other table
  reg.MarkDirty({7, 11});  // twice
  EXPECT_EQ(reg.num_dirty(), 2u);

  PushPlan plan = reg.PlanPush();
  EXPECT_EQ(plan.rows, (std::vector<RowKey>{{7, 11}, {7, 12}}));  // each once
  ASSERT_EQ(plan.subscribers.size(), 2u);
  EXPECT_EQ(plan.subscribers[0].subscriber, 1u);
  EXPECT_EQ(RowsFor(plan, 1), (std::vector<RowKey>{{7, 11}, {7, 12}}));
  EXPECT_EQ(RowsFor(plan, 2), (std::vector<RowKey>{{7, 11}}));
  EXPECT_EQ(reg.num_dirty(), 0u);

  // Nothing changed: every subscriber is still listed, with no rows.
  plan = reg.PlanPush();
  EXPECT_TRUE(plan.rows.empty());
  ASSERT_EQ(plan.subscribers.size(), 2u);
  EXPECT_TRUE(plan.subscribers[0].row_indices.empty());
  EXPECT_TRUE(plan.subscribers[1].row_indices.empty());
}

TEST(SubscriptionRegistryTest, UnsubscribedRowsAreNoLongerPlanned) {
  SubscriptionRegistry reg;
  reg.Subscribe(1, 1, {1, 2});
  reg.Subscribe(2, 1, {1});
  reg.MarkDirty({1, 1});
  reg.MarkDirty({1, 2});
  EXPECT_EQ(reg.Unsubscribe(1, 1, {1, 2, 3}), 2u);
  EXPECT_FALSE(reg.IsSubscribed(1, {1, 1}));
  EXPECT_TRUE(reg.HasSubscriber(1));
  PushPlan plan = reg.PlanPush();
  EXPECT_EQ(plan.rows, (std::vector<RowKey>{{1, 1}}));  // row 2 lost its only subscriber
  EXPECT_TRUE(RowsFor(plan, 1).empty());
  EXPECT_EQ(RowsFor(plan, 2), (std::vector<RowKey>{{1, 1}}));
}

TEST(SubscriptionRegistryTest, RemoveSubscriberDropsEverything) {
  SubscriptionRegistry reg;
  reg.Subscribe(1, 1, {1, 2, 3});
  reg.Subscribe(2, 1, {3});
  EXPECT_EQ(reg.RemoveSubscriber(1), 3u);
  EXPECT_EQ(reg.RemoveSubscriber(1), 0u);
  EXPECT_FALSE(reg.HasSubscriber(1));
  EXPECT_EQ(reg.num_subscribers(), 1u);
  EXPECT_EQ(reg.num_subscriptions(), 1u);
  reg.MarkDirty({1, 1});
  reg.MarkDirty({1, 3});
  PushPlan plan = reg.PlanPush();
  EXPECT_EQ(plan.rows, (std::vector<RowKey>{{1, 3}}));
  ASSERT_EQ(plan.subscribers.size(), 1u);
  EXPECT_EQ(plan.subscribers[0].subscriber, 2u);
}

TEST(SubscriptionRegistryTest, ChangesBeforeSubscribingAreNotPlanned) {
  SubscriptionRegistry reg;
  reg.MarkDirty({1, 5});
  reg.Subscribe(1, 1, {5});
  EXPECT_TRUE(reg.PlanPush().rows.empty());
}

TEST(SubscriptionRegistryTest, PlanCostDependsOnDirtyRowsNotSubscriptions) {
  SubscriptionRegistry reg;
  std::vector<uint64_t> rows;
  for (uint64_t r = 0; r < 100000; ++r) rows.push_back(r);
  reg.Subscribe(1, 1, rows);
  reg.Subscribe(2, 1, rows);
  // Many clocks touching one row each: fast only if PlanPush is independent of
  // the 200k subscriptions (a full scan per clock would take many seconds).
  for (int clock = 0; clock < 20000; ++clock) {
    reg.MarkDirty({1, static_cast<uint64_t>(clock)});
    PushPlan plan = reg.PlanPush();
    ASSERT_EQ(plan.rows.size(), 1u);
    ASSERT_EQ(plan.subscribers[1].row_indices.size(), 1u);
  }
}

}  // namespace
}  // namespace pace
