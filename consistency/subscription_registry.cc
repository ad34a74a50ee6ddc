#include "consistency/subscription_registry.h"

#include <algorithm>
#include <utility>

namespace pace {

size_t SubscriptionRegistry::Subscribe(SubscriberId sub, uint32_t table,
                                       const std::vector<uint64_t>& rows) {
  RowSet& mine = subs_[sub];
  size_t added = 0;
  for (uint64_t r : rows) {
    RowKey key{table, r};
    if (!mine.insert(key).second) continue;
    row_subs_[key].push_back(sub);
    ++added;
  }
  num_subscriptions_ += added;
  return added;
}

bool SubscriptionRegistry::RemoveOne(SubscriberId sub, const RowKey& key) {
  auto it = row_subs_.find(key);
  if (it == row_subs_.end()) return false;
  std::vector<SubscriberId>& v = it->second;
  auto pos = std::find(v.begin(), v.end(), sub);
  if (pos == v.end()) return false;
  *pos = v.back();
  v.pop_back();
  if (v.empty()) {
    row_subs_.erase(it);
    dirty_.erase(key);
  }
  return true;
}

size_t SubscriptionRegistry::Unsubscribe(SubscriberId sub, uint32_t table,
                                         const std::vector<uint64_t>& rows) {
  auto it = subs_.find(sub);
  if (it == subs_.end()) return 0;
  size_t removed = 0;
  for (uint64_t r : rows) {
    RowKey key{table, r};
    if (it->second.erase(key) == 0) continue;
    RemoveOne(sub, key);
    ++removed;
  }
  num_subscriptions_ -= removed;
  return removed;
}

size_t SubscriptionRegistry::RemoveSubscriber(SubscriberId sub) {
  auto it = subs_.find(sub);
  if (it == subs_.end()) return 0;
  size_t removed = it->second.size();
  for (const RowKey& key : it->second) RemoveOne(sub, key);
  subs_.erase(it);
  num_subscriptions_ -= removed;
  return removed;
}

void SubscriptionRegistry::MarkDirty(const RowKey& key) {
  if (row_subs_.count(key) != 0) dirty_.insert(key);
}

PushPlan SubscriptionRegistry::PlanPush() {
  PushPlan plan;
  plan.rows.assign(dirty_.begin(), dirty_.end());
  dirty_.clear();
  std::sort(plan.rows.begin(), plan.rows.end());

  plan.subscribers.reserve(subs_.size());
  std::unordered_map<SubscriberId, size_t> slot;
  slot.reserve(subs_.size());
  for (const auto& [sub, rows] : subs_) {
    slot.emplace(sub, plan.subscribers.size());
    plan.subscribers.push_back(PushPlan::Entry{sub, {}});
  }
  for (uint32_t i = 0; i < plan.rows.size(); ++i) {
    auto it = row_subs_.find(plan.rows[i]);
    if (it == row_subs_.end()) continue;  // cannot happen: unsubscribing clears dirty
    for (SubscriberId sub : it->second) {
      plan.subscribers[slot[sub]].row_indices.push_back(i);
    }
  }
  return plan;
}

bool SubscriptionRegistry::IsSubscribed(SubscriberId sub, const RowKey& key) const {
  auto it = subs_.find(sub);
  return it != subs_.end() && it->second.count(key) != 0;
}

size_t SubscriptionRegistry::SubscriptionCount(SubscriberId sub) const {
  auto it = subs_.find(sub);
  return it == subs_.end() ? 0 : it->second.size();
}

}  // namespace pace
