// SubscriptionRegistry: the server side of ESSP push scheduling (docs/design.md,
// "ESSP: push").
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
// Costs: MarkDirty O(1) (one probe of a flat per-table hash map, no
// allocation once the dirty list has grown); PlanPush O(d log d + d * k + n)
// for d dirty rows with k subscribers each and n subscribers; never O(all
// subscriptions). RemoveSubscriber is O(all subscribed rows).
//
// Layout: per table, a RowSlotMap from row id to a slot in a dense vector of
// per-row state (the row, its subscribers, a dirty flag) and the list of slots
// marked dirty since the last PlanPush.
//
// Thread-compatible: the owner serializes access.
#ifndef PACE_CONSISTENCY_SUBSCRIPTION_REGISTRY_H_
#define PACE_CONSISTENCY_SUBSCRIPTION_REGISTRY_H_

#include <cstddef>
#include <cstdint>
#include <map>
#include <vector>

#include "common/clock.h"
#include "common/flat_table.h"

namespace pace {

// Row id -> index of the row's state in a dense vector (common/flat_table.h).
using RowSlotMap = FlatMap<uint64_t, uint32_t, UINT32_MAX>;

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

  // A writer that is nobody's subscriber id (see MarkDirty).
  static constexpr SubscriberId kNoWriter = ~SubscriberId{0};

  // Records that `key` changed, by subscriber `writer`'s batch (its session),
  // or kNoWriter when that is unknown. A no-op unless someone subscribes to
  // it. A row changed since the last PlanPush only by one subscriber's own
  // batches is not pushed to that subscriber: its cache already holds its
  // own updates (read-my-writes), so the value would be exactly what it has.
  // (In a one-process job nothing is pushed back at all, and with a single
  // subscriber its own marks are not even recorded.)
  void MarkDirty(const RowKey& key, SubscriberId writer = kNoWriter);
  // Returns what to push for the changes since the last call and clears the
  // dirty set.
  PushPlan PlanPush();

  bool HasSubscriber(SubscriberId sub) const { return counts_.count(sub) != 0; }
  bool IsSubscribed(SubscriberId sub, const RowKey& key) const;
  size_t num_subscribers() const { return counts_.size(); }
  // Total (subscriber, row) pairs.
  size_t num_subscriptions() const { return num_subscriptions_; }
  size_t num_dirty() const { return num_dirty_; }
  // Subscriptions of one subscriber (0 if unknown).
  size_t SubscriptionCount(SubscriberId sub) const;

 private:
  // One subscribed row of a table.
  struct Slot {
    uint64_t row = 0;
    bool dirty = false;  // changed since the last PlanPush (and in `dirty`)
    // While dirty: the one subscriber whose batches made every change since
    // the last PlanPush (it is not pushed the row), or kNoWriter.
    SubscriberId only_writer = kNoWriter;
    // Its subscribers; few per row (at most one per client process). Empty:
    // the slot is free.
    std::vector<SubscriberId> subs;
  };
  struct TableSubs {
    RowSlotMap index;  // row -> index into slots
    std::vector<Slot> slots;
    std::vector<uint32_t> free_slots;
    // Slots marked dirty since the last PlanPush; an entry whose slot is no
    // longer dirty (its row lost its subscribers) is skipped.
    std::vector<uint32_t> dirty;
  };
  // Removes `sub` from slot `i` of `t`, freeing the slot when it was the last.
  // Returns false if `sub` was not there.
  bool RemoveFromSlot(TableSubs& t, uint32_t i, SubscriberId sub);

  // By table id, so PlanPush emits rows sorted by table.
  std::map<uint32_t, TableSubs> tables_;
  // Registered subscribers and their number of subscriptions.
  std::map<SubscriberId, size_t> counts_;
  size_t num_subscriptions_ = 0;
  size_t num_dirty_ = 0;
  // MarkDirty's last table (tables_ nodes are stable; reset when one is erased).
  uint32_t last_table_id_ = 0;
  TableSubs* last_table_ = nullptr;
};

}  // namespace pace

#endif  // PACE_CONSISTENCY_SUBSCRIPTION_REGISTRY_H_
