// SubscriptionRegistry: the server side of ESSP push scheduling (DESIGN.md
// section 1, "ESSP (push)").
//
// It records which subscriber (a session id) subscribes to which rows, and
// which subscribed rows changed since the last shard-clock advance. On an
// advance the shard calls PlanPush() to learn, per subscriber, which of its
// rows to push, and the distinct rows to read once for all of them.
//
// Rows are only marked dirty while someone subscribes to them: a subscriber
// added later read the row after the change (the shard serializes reads with
// applies), so its copy already contains it.
//
// Costs: MarkDirty O(1); PlanPush O(d log d + d * k + n) for d dirty rows with
// k subscribers each and n subscribers; never O(all subscriptions).
//
// Thread-compatible: the owner serializes access.
#ifndef PACE_CONSISTENCY_SUBSCRIPTION_REGISTRY_H_
#define PACE_CONSISTENCY_SUBSCRIPTION_REGISTRY_H_

#include <cstddef>
#include <cstdint>
#include <map>
#include <unordered_map>
#include <unordered_set>
#include <vector>

#include "common/clock.h"

namespace pace {

using SubscriberId = uint64_t;

// What to push after one shard-clock advance.
struct PushPlan {
  // Distinct changed rows that have at least one subscriber, sorted by
  // (table, row). The shard reads each once and shares the value.
  std::vector<RowKey> rows;
  struct Entry {
    SubscriberId subscriber = 0;
    // Indices into `rows` of this subscriber's changed rows, ascending. May be
    // empty: the subscriber still gets its "all current" marker.
    std::vector<uint32_t> row_indices;
  };
  // One entry per registered subscriber, in increasing subscriber id.
  std::vector<Entry> subscribers;
};

class SubscriptionRegistry {
 public:
  // Subscribes `sub` to rows (table, r) for r in `rows`, registering `sub` if
  // new. Returns how many subscriptions were new (duplicates are ignored).
  size_t Subscribe(SubscriberId sub, uint32_t table, const std::vector<uint64_t>& rows);
  // Removes those subscriptions of `sub` (unknown ones are ignored). `sub`
  // stays registered (and keeps receiving the "all current" marker) until
  // RemoveSubscriber. Returns how many were removed.
  size_t Unsubscribe(SubscriberId sub, uint32_t table, const std::vector<uint64_t>& rows);
  // Forgets `sub` and all its subscriptions. Returns how many were removed.
  size_t RemoveSubscriber(SubscriberId sub);

  // Records that `key` changed. A no-op unless someone subscribes to it.
  void MarkDirty(const RowKey& key);
  // Returns what to push for the changes since the last call and clears the
  // dirty set.
  PushPlan PlanPush();

  bool HasSubscriber(SubscriberId sub) const { return subs_.count(sub) != 0; }
  bool IsSubscribed(SubscriberId sub, const RowKey& key) const;
  size_t num_subscribers() const { return subs_.size(); }
  // Total (subscriber, row) pairs.
  size_t num_subscriptions() const { return num_subscriptions_; }
  size_t num_dirty() const { return dirty_.size(); }
  // Subscriptions of one subscriber (0 if unknown).
  size_t SubscriptionCount(SubscriberId sub) const;

 private:
  using RowSet = std::unordered_set<RowKey, RowKeyHash>;
  bool RemoveOne(SubscriberId sub, const RowKey& key);

  std::map<SubscriberId, RowSet> subs_;
  // Row -> its subscribers; few per row (at most one per client process).
  std::unordered_map<RowKey, std::vector<SubscriberId>, RowKeyHash> row_subs_;
  RowSet dirty_;  // subset of row_subs_' keys at the time of marking
  size_t num_subscriptions_ = 0;
};

}  // namespace pace

#endif  // PACE_CONSISTENCY_SUBSCRIPTION_REGISTRY_H_
