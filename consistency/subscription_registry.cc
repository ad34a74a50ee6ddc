#include "consistency/subscription_registry.h"

#include <algorithm>
#include <utility>

namespace pace {

size_t SubscriptionRegistry::Subscribe(SubscriberId sub, uint32_t table,
                                       const std::vector<uint64_t>& rows) {
  size_t& count = counts_[sub];
  if (rows.empty()) return 0;
  TableSubs& t = tables_[table];
  size_t added = 0;
  for (uint64_t r : rows) {
    uint32_t i = t.index.Find(r);
    if (i == RowSlotMap::kNone) {
      if (!t.free_slots.empty()) {
        i = t.free_slots.back();
        t.free_slots.pop_back();
      } else {
        i = static_cast<uint32_t>(t.slots.size());
        t.slots.emplace_back();
      }
      Slot& s = t.slots[i];
      s.row = r;
      s.dirty = false;
      t.index.Insert(r, i);
    }
    std::vector<SubscriberId>& subs = t.slots[i].subs;
    if (std::find(subs.begin(), subs.end(), sub) != subs.end()) continue;
    subs.push_back(sub);
    ++added;
  }
  count += added;
  num_subscriptions_ += added;
  return added;
}

bool SubscriptionRegistry::RemoveFromSlot(TableSubs& t, uint32_t i, SubscriberId sub) {
  Slot& s = t.slots[i];
  auto pos = std::find(s.subs.begin(), s.subs.end(), sub);
  if (pos == s.subs.end()) return false;
  *pos = s.subs.back();
  s.subs.pop_back();
  if (s.subs.empty()) {
    if (s.dirty) {
      s.dirty = false;  // its entry in t.dirty is skipped
      --num_dirty_;
    }
    t.index.Erase(s.row);
    s.subs.shrink_to_fit();
    t.free_slots.push_back(i);
  }
  return true;
}

size_t SubscriptionRegistry::Unsubscribe(SubscriberId sub, uint32_t table,
                                         const std::vector<uint64_t>& rows) {
  auto c = counts_.find(sub);
  if (c == counts_.end()) return 0;
  auto it = tables_.find(table);
  if (it == tables_.end()) return 0;
  TableSubs& t = it->second;
  size_t removed = 0;
  for (uint64_t r : rows) {
    const uint32_t i = t.index.Find(r);
    if (i != RowSlotMap::kNone && RemoveFromSlot(t, i, sub)) ++removed;
  }
  c->second -= removed;
  num_subscriptions_ -= removed;
  return removed;
}

size_t SubscriptionRegistry::RemoveSubscriber(SubscriberId sub) {
  auto c = counts_.find(sub);
  if (c == counts_.end()) return 0;
  size_t removed = 0;
  for (auto it = tables_.begin(); it != tables_.end();) {
    TableSubs& t = it->second;
    for (uint32_t i = 0; i < t.slots.size() && removed < c->second; ++i) {
      if (!t.slots[i].subs.empty() && RemoveFromSlot(t, i, sub)) ++removed;
    }
    if (t.index.size() == 0) {
      if (last_table_ == &t) last_table_ = nullptr;
      it = tables_.erase(it);
    } else {
      ++it;
    }
  }
  num_subscriptions_ -= removed;
  counts_.erase(c);
  return removed;
}

void SubscriptionRegistry::MarkDirty(const RowKey& key, SubscriberId writer) {
  // The writer is the only subscriber: nobody else could be pushed this
  // change, and the writer is not pushed its own (skipping the lookup is
  // most of a one-process job's apply cost here). A mark of another writer,
  // earlier or later, still pushes the row to it, with this change in.
  if (counts_.size() == 1 && counts_.begin()->first == writer) return;
  if (last_table_ == nullptr || last_table_id_ != key.table) {
    auto it = tables_.find(key.table);
    if (it == tables_.end()) return;
    last_table_id_ = key.table;
    last_table_ = &it->second;
  }
  TableSubs& t = *last_table_;
  const uint32_t i = t.index.Find(key.row);
  if (i == RowSlotMap::kNone) return;
  Slot& s = t.slots[i];
  if (s.dirty) {
    if (s.only_writer != writer) s.only_writer = kNoWriter;
    return;
  }
  s.dirty = true;
  s.only_writer = writer;
  t.dirty.push_back(i);
  ++num_dirty_;
}

PushPlan SubscriptionRegistry::PlanPush() {
  PushPlan plan;
  plan.rows.reserve(num_dirty_);
  plan.subscribers.reserve(counts_.size());
  for (const auto& [sub, count] : counts_) plan.subscribers.push_back(PushPlan::Entry{sub, {}});
  // The index in plan.subscribers of a subscriber (sorted by id).
  auto entry_of = [&plan](SubscriberId sub) -> PushPlan::Entry& {
    auto it = std::lower_bound(
        plan.subscribers.begin(), plan.subscribers.end(), sub,
        [](const PushPlan::Entry& e, SubscriberId id) { return e.subscriber < id; });
    return *it;  // every slot's subscriber is registered
  };

  std::vector<std::pair<uint64_t, uint32_t>> rows;  // (row, slot) of one table
  for (auto& [table, t] : tables_) {
    if (t.dirty.empty()) continue;
    rows.clear();
    rows.reserve(t.dirty.size());
    for (uint32_t i : t.dirty) {
      Slot& s = t.slots[i];
      if (!s.dirty) continue;  // lost its subscribers, or listed twice
      s.dirty = false;
      // Changed only by its sole subscriber: nobody needs it.
      if (s.subs.size() == 1 && s.subs[0] == s.only_writer) continue;
      rows.emplace_back(s.row, i);
    }
    t.dirty.clear();
    // Rows marked in key order (one batch, as the shard marks them) are
    // sorted already.
    if (!std::is_sorted(rows.begin(), rows.end())) std::sort(rows.begin(), rows.end());
    for (const auto& [row, i] : rows) {
      const uint32_t index = static_cast<uint32_t>(plan.rows.size());
      plan.rows.push_back(RowKey{table, row});
      const std::vector<SubscriberId>& subs = t.slots[i].subs;
      if (subs.size() == 1 && plan.subscribers.size() == 1) {
        plan.subscribers[0].row_indices.push_back(index);
        continue;
      }
      const SubscriberId skip = t.slots[i].only_writer;
      for (SubscriberId sub : subs) {
        if (sub != skip) entry_of(sub).row_indices.push_back(index);
      }
    }
  }
  num_dirty_ = 0;
  return plan;
}

bool SubscriptionRegistry::IsSubscribed(SubscriberId sub, const RowKey& key) const {
  auto it = tables_.find(key.table);
  if (it == tables_.end()) return false;
  const uint32_t i = it->second.index.Find(key.row);
  if (i == RowSlotMap::kNone) return false;
  const std::vector<SubscriberId>& subs = it->second.slots[i].subs;
  return std::find(subs.begin(), subs.end(), sub) != subs.end();
}

size_t SubscriptionRegistry::SubscriptionCount(SubscriberId sub) const {
  auto it = counts_.find(sub);
  return it == counts_.end() ? 0 : it->second;
}

}  // namespace pace
