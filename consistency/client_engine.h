// The client half of the protocol (docs/design.md, "Read-my-writes",
// "Clock() and its batches", "Apply parts", "ESSP: push"): what a client process does with
// a row value a shard sends it (install, rebase on its own unacknowledged
// deltas, or drop and read again), with a row it cannot serve (pull it or
// wait for a push), with an Ack (which batches and deltas it
// releases, and when a duplicate Ack proves another sender), and after a
// reconnect (which batches it re-sends, which duplicates it then expects,
// which rows it subscribes again).
//
// Like ShardEngine, these rules hold no data, do no I/O and take no locks:
// client/ calls them under its locks on the entries and batches it already
// has (client/row_cache.h, client/client_impl.h), and the simulation
// (consistency/sim/) calls the same functions on its own entries, so the
// schedules it runs check the rules clients run.
//
// The rules are templates over the caller's types (no virtual call and no
// allocation per row), which need these members:
//   pending delta  clock (ClockT), part (uint32_t), sealed (bool: sent in
//                  the batch of (clock, part))
//   sent batch     clock, part, more (parts of its clock follow)
//   cached row     version (Version), subscribed (bool)
//                  (AsksForRow: ReadInFlightAtMost(Version))
//
// Thread-safe: pure functions; the caller holds whatever guards what it
// passes.
#ifndef PACE_CONSISTENCY_CLIENT_ENGINE_H_
#define PACE_CONSISTENCY_CLIENT_ENGINE_H_

#include <cstddef>
#include <cstdint>

#include "common/clock.h"
#include "consistency/batch_rule.h"

namespace pace::client_engine {

// --- Rows arriving: install, rebase, refetch ------------------------------

// A row value from a shard: in the ReadReply to a Read of ours (`read`; the
// Read asked to `subscribe` or not) or in a Push.
struct RowArrival {
  Version version = 0;    // the shard's version of the value
  AppliedPosition holds;  // this process's (applied clock, parts) in it
  bool read = false;
  bool subscribe = false;
};

// The cached row it arrives for.
struct CachedRow {
  bool has_value = false;
  Version version = 0;
  bool subscribed = false;
  bool waited_for = false;  // a reader blocks on the row
};

enum class Arrival {
  // A Push of a row no longer subscribed (it raced our eviction of the row
  // and its Unsubscribe): ignore it.
  kStalePush,
  // The value predates an Ack this process already processed, so the deltas
  // it lacks were purged and it cannot be rebased: not installed (a correct
  // shard never sends one).
  kRefetch,
  // Install it as the server value plus this process's sealed deltas the
  // value does not hold (Rebase).
  kInstall,
  // Older than the cached value: keep the cached one.
  kOlder,
};

struct ArrivalDecision {
  Arrival action = Arrival::kStalePush;
  // kRefetch of a pushed value: the row's value and subscription are no
  // longer current; forget both.
  bool drop_value = false;
  // kRefetch: read the row again, with min_version `read_min_version` (and
  // subscribing again if its table is pushed), because a reader waits for
  // it or it was subscribed.
  bool send_read = false;
  Version read_min_version = 0;
  // kInstall, kOlder: a subscribing Read was answered: pushes now keep the
  // row current.
  bool subscribe = false;
  // kInstall, kOlder: a pushed value was taken (a push counter's event).
  bool pushed = false;
};

// What to do with `in`, for a row in state `row`, this process having
// processed the Acks of every batch before `acked` from the row's shard.
inline ArrivalDecision DecideArrival(const CachedRow& row, const RowArrival& in,
                                     const AppliedPosition& acked) {
  ArrivalDecision d;
  if (!in.read && !row.subscribed) return d;  // kStalePush
  if (PartBefore(in.holds.clock, in.holds.parts, acked.clock, acked.parts)) {
    d.action = Arrival::kRefetch;
    d.drop_value = !in.read;
    d.send_read = row.waited_for || !in.read;
    d.read_min_version = in.version;
    return d;
  }
  d.action = !row.has_value || in.version >= row.version ? Arrival::kInstall : Arrival::kOlder;
  d.subscribe = in.read && in.subscribe;
  d.pushed = !in.read;
  return d;
}

// Whether pending delta `p` belongs on top of a server value that holds
// this process's batches before `holds`: it was sent, in a batch the value
// does not hold.
template <typename Pending>
inline bool MissingFrom(const Pending& p, const AppliedPosition& holds) {
  return p.sealed && !PartBefore(p.clock, p.part, holds.clock, holds.parts);
}

// Rebases a server value that holds `holds`: calls add(p) for each pending
// delta the value lacks, in the row's order. The value then equals the
// server's plus every sealed delta, each once (client/row_cache.h, the
// invariant); open deltas stay apart.
template <typename PendingList, typename Add>
inline void Rebase(const PendingList& pending, const AppliedPosition& holds, Add&& add) {
  for (const auto& p : pending) {
    if (MissingFrom(p, holds)) add(p);
  }
}

// The version a reader may count on for a cached row: a subscribed row is
// current as of the shard's last PushDone (`pushed`) too.
inline Version EffectiveVersion(Version version, bool subscribed, Version pushed) {
  return subscribed && pushed > version ? pushed : version;
}

// --- Reads: pull or wait -----------------------------------------------------

// A reader at clock c cannot serve a row (it has no value, or its effective
// version is not fresh for c by the table's ReadPolicy). Whether it asks the
// shard, with Read{min_version = `need` (ReadPolicy::MinVersion(c)),
// subscribe = `pushed_table`}: not for a subscribed row of a pushed table
// (the push refreshes it), nor while a Read of the row is in flight that the
// shard answers as soon as `need` (a Read with a larger min_version may wait
// for this very process's next clock). The row needs
// ReadInFlightAtMost(Version).
template <typename Row>
inline bool AsksForRow(const Row& row, bool pushed_table, Version need) {
  if (pushed_table && row.subscribed) return false;
  return !row.ReadInFlightAtMost(need);
}

// --- Acks: which batches and deltas they release ---------------------------

// The position after batch `b` is acknowledged: as the shard's applied
// position moves when it applies it (a part leaves its clock open).
template <typename Batch>
inline AppliedPosition AckedAfter(const Batch& b) {
  return PositionAfter(AppliedPosition{b.clock, b.part}, BatchId{b.clock, b.part, b.more},
                       BatchAdmission::kApply);
}

struct AckOutcome {
  // The first `batches` unacknowledged batches are acknowledged (0: an Ack
  // repeated after a re-send; nothing changes).
  size_t batches = 0;
  // When batches > 0: every batch before this position is acknowledged.
  AppliedPosition acked;
  // Every clock below this one is acknowledged whole (0: none of those
  // batches ends a clock).
  ClockT whole_clocks = 0;
};

// What an Ack of (clock, part) acknowledges of `unacked` (the batches sent
// to its shard and not acknowledged, in the order sent): the batches up to
// and including (clock, part) (the shard applies in order, so an Ack of a
// batch acknowledges every one before it).
template <typename BatchList>
inline AckOutcome TakeAck(const BatchList& unacked, ClockT clock, uint32_t part) {
  AckOutcome o;
  for (const auto& b : unacked) {
    if (PartBefore(clock, part, b.clock, b.part)) break;
    ++o.batches;
    o.acked = AckedAfter(b);
    if (!b.more) o.whole_clocks = b.clock + 1;
  }
  return o;
}

// Whether an Ack of batch (clock, part) acknowledges pending delta `p` of a
// row in that batch: the delta was sent in it or in an earlier batch. The
// acknowledged deltas are in the shard's value now: purge them.
template <typename Pending>
inline bool AckedBy(const Pending& p, ClockT clock, uint32_t part) {
  return p.sealed && !PartBefore(clock, part, p.clock, p.part);
}

// An Ack{duplicate} of (clock, part) says the shard had the batch already.
// That is expected only below `duplicates_below`: batches the shard had
// before this process started, or re-sent after a reconnect
// (DuplicatesBelowAfterResend). At or above it, this process sent the batch
// once, so another sender applied it first (another process is this client,
// or the job was resumed twice): the client must stop.
inline bool DuplicateFromAnotherSender(ClockT clock, uint32_t part,
                                       const AppliedPosition& duplicates_below) {
  return !PartBefore(clock, part, duplicates_below.clock, duplicates_below.parts);
}

// --- Reconnects ------------------------------------------------------------

// After a reconnect to a shard, the client re-sends every batch of
// `unacked`, in the order sent (the shard skips the ones it applied: their
// Acks were lost), before any new batch. Returns duplicates_below from then
// on: any re-sent batch may come back as a duplicate.
template <typename BatchList>
inline AppliedPosition DuplicatesBelowAfterResend(const AppliedPosition& duplicates_below,
                                                  const BatchList& unacked) {
  if (unacked.empty() || unacked.back().clock + 1 <= duplicates_below.clock) {
    return duplicates_below;
  }
  return AppliedPosition{unacked.back().clock + 1, 0};
}

// A subscription lives in the shard's session: after a reconnect each
// subscribed row of the shard is subscribed again. Until the reply the row
// keeps the version the old session vouched for (its effective version with
// the shard's last PushDone, `pushed`) and is not subscribed. Returns true if
// the row was subscribed: the caller then sends a subscribing Read of it
// with min_version 0.
template <typename Row>
inline bool EndSessionSubscription(Row* row, Version pushed) {
  if (!row->subscribed) return false;
  row->version = EffectiveVersion(row->version, true, pushed);
  row->subscribed = false;
  return true;
}

}  // namespace pace::client_engine

#endif  // PACE_CONSISTENCY_CLIENT_ENGINE_H_
