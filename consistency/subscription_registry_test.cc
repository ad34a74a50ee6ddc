#include "consistency/subscription_registry.h"

#include <gtest/gtest.h>

#include <map>
#include <random>
#include <set>
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

// A row changed only by one subscriber's own batches is not pushed back to
// it (its cache has its own updates); a change by anyone else is.
TEST(SubscriptionRegistryTest, OwnChangesAreNotPushedBackToTheWriter) {
  SubscriptionRegistry reg;
  reg.Subscribe(1, 7, {10, 11, 12, 13});
  reg.Subscribe(2, 7, {11, 13});
  reg.MarkDirty({7, 10}, 1);  // only 1 subscribes, only 1 wrote: nobody
  reg.MarkDirty({7, 11}, 1);  // 2 gets it, 1 does not
  reg.MarkDirty({7, 12}, 1);
  reg.MarkDirty({7, 12}, 2);  // 2 wrote it too: 1 gets it
  reg.MarkDirty({7, 13}, 2);
  reg.MarkDirty({7, 13});  // unknown writer: everybody
  PushPlan plan = reg.PlanPush();
  EXPECT_EQ(plan.rows, (std::vector<RowKey>{{7, 11}, {7, 12}, {7, 13}}));
  EXPECT_EQ(RowsFor(plan, 1), (std::vector<RowKey>{{7, 12}, {7, 13}}));
  EXPECT_EQ(RowsFor(plan, 2), (std::vector<RowKey>{{7, 11}, {7, 13}}));

  // The writer is forgotten at each plan: a later change by 2 alone goes to 1.
  reg.MarkDirty({7, 11}, 2);
  reg.MarkDirty({7, 10}, 1);
  plan = reg.PlanPush();
  EXPECT_EQ(plan.rows, (std::vector<RowKey>{{7, 11}}));
  EXPECT_EQ(RowsFor(plan, 1), (std::vector<RowKey>{{7, 11}}));
  EXPECT_TRUE(RowsFor(plan, 2).empty());
}

TEST(SubscriptionRegistryTest, TheOnlySubscribersOwnChangesAreNotRecorded) {
  SubscriptionRegistry reg;
  reg.Subscribe(1, 7, {10, 11, 12});
  reg.MarkDirty({7, 10}, 1);  // the only subscriber's own change: nothing to push
  reg.MarkDirty({7, 11}, 1);
  reg.MarkDirty({7, 11}, 3);  // another writer (no subscriber): 1 gets the row
  reg.MarkDirty({7, 12}, 3);
  reg.MarkDirty({7, 12}, 1);  // its own change after another's: still pushed
  EXPECT_EQ(reg.num_dirty(), 2u);
  PushPlan plan = reg.PlanPush();
  EXPECT_EQ(RowsFor(plan, 1), (std::vector<RowKey>{{7, 11}, {7, 12}}));
  // A second subscriber: the first one's changes are recorded again.
  reg.Subscribe(2, 7, {10});
  reg.MarkDirty({7, 10}, 1);
  plan = reg.PlanPush();
  EXPECT_EQ(RowsFor(plan, 2), (std::vector<RowKey>{{7, 10}}));
  EXPECT_TRUE(RowsFor(plan, 1).empty());
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

// RowSlotMap is common/'s FlatMap; this drives it with long probe runs.
TEST(RowSlotMapTest, MatchesAStdMapUnderRandomInsertsAndErases) {
  RowSlotMap map;
  std::map<uint64_t, uint32_t> model;
  std::mt19937_64 rng(3);
  for (int step = 0; step < 200000; ++step) {
    // Small key range: long probe runs, many erases inside them.
    const uint64_t row = rng() % 3000 * 0x100000001ull;
    if (rng() % 3 == 0) {
      map.Erase(row);
      model.erase(row);
    } else if (model.count(row) == 0) {
      const uint32_t slot = static_cast<uint32_t>(step);
      map.Insert(row, slot);
      model[row] = slot;
    }
    if (step % 1000 == 0) {
      ASSERT_EQ(map.size(), model.size());
      for (uint64_t r = 0; r < 3000; ++r) {
        const uint64_t key = r * 0x100000001ull;
        auto it = model.find(key);
        ASSERT_EQ(map.Find(key), it == model.end() ? RowSlotMap::kNone : it->second)
            << "row " << key << " at step " << step;
      }
    }
  }
}

// Random subscribe/unsubscribe/remove/mark/plan against a model of sets.
TEST(SubscriptionRegistryTest, MatchesAModelUnderRandomOperations) {
  SubscriptionRegistry reg;
  std::map<SubscriberId, std::set<RowKey>> subs;  // registered subscribers
  std::set<RowKey> dirty;                         // subscribed rows changed
  std::mt19937_64 rng(11);
  auto random_rows = [&rng](size_t n) {
    std::vector<uint64_t> rows;
    for (size_t i = 0; i < n; ++i) rows.push_back(rng() % 200);
    return rows;
  };
  auto subscribed = [&subs](const RowKey& k) {
    for (const auto& [sub, rows] : subs) {
      if (rows.count(k) != 0) return true;
    }
    return false;
  };
  for (int step = 0; step < 20000; ++step) {
    const SubscriberId sub = 1 + rng() % 4;
    const uint32_t table = 1 + static_cast<uint32_t>(rng() % 3);
    switch (rng() % 6) {
      case 0: {
        std::vector<uint64_t> rows = random_rows(1 + rng() % 8);
        size_t added = 0;
        std::set<RowKey>& mine = subs[sub];
        for (uint64_t r : rows) added += mine.insert(RowKey{table, r}).second;
        ASSERT_EQ(reg.Subscribe(sub, table, rows), added);
        break;
      }
      case 1: {
        std::vector<uint64_t> rows = random_rows(1 + rng() % 8);
        size_t removed = 0;
        auto it = subs.find(sub);
        if (it != subs.end()) {
          for (uint64_t r : rows) removed += it->second.erase(RowKey{table, r});
        }
        ASSERT_EQ(reg.Unsubscribe(sub, table, rows), removed);
        for (uint64_t r : rows) {
          if (!subscribed(RowKey{table, r})) dirty.erase(RowKey{table, r});
        }
        break;
      }
      case 2: {
        if (rng() % 8 != 0) break;
        auto it = subs.find(sub);
        const size_t n = it == subs.end() ? 0 : it->second.size();
        if (it != subs.end()) subs.erase(it);
        ASSERT_EQ(reg.RemoveSubscriber(sub), n);
        for (auto d = dirty.begin(); d != dirty.end();) {
          d = subscribed(*d) ? std::next(d) : dirty.erase(d);
        }
        break;
      }
      case 3:
      case 4: {
        const RowKey k{table, rng() % 200};
        reg.MarkDirty(k);
        if (subscribed(k)) dirty.insert(k);
        break;
      }
      default: {
        // Rows that lost every subscriber since marking are not planned,
        // even if subscribed again since (the new reader read the change).
        std::vector<RowKey> want(dirty.begin(), dirty.end());
        ASSERT_EQ(reg.num_dirty(), want.size());
        PushPlan plan = reg.PlanPush();
        ASSERT_EQ(plan.rows, want);
        ASSERT_EQ(plan.subscribers.size(), subs.size());
        size_t e = 0;
        for (const auto& [id, rows] : subs) {
          ASSERT_EQ(plan.subscribers[e].subscriber, id);
          std::vector<RowKey> mine;
          for (const RowKey& k : want) {
            if (rows.count(k) != 0) mine.push_back(k);
          }
          ASSERT_EQ(RowsFor(plan, id), mine);
          ++e;
        }
        dirty.clear();
        break;
      }
    }
    size_t total = 0;
    for (const auto& [id, rows] : subs) {
      total += rows.size();
      ASSERT_EQ(reg.SubscriptionCount(id), rows.size());
    }
    ASSERT_EQ(reg.num_subscriptions(), total);
    ASSERT_EQ(reg.num_subscribers(), subs.size());
  }
}

}  // namespace
}  // namespace pace
