// The batch admission rule: which Apply batch of a client a shard applies,
// skips as a duplicate, or refuses as a clock gap (docs/design.md, "Clock()
// and its batches"; docs/wire-protocol.md, "Apply parts"), and when it takes
// back the parts of a clock whose process ended before the clock was
// complete. One rule for every layer that must agree on it: the store decides
// with it when it writes a group (storage/), the shard service records the
// outcome with the engine and admits a new process by it (server/), the
// simulation's shard applies by it (consistency/sim/), and the client orders
// its batches and acknowledgements with PartBefore.
//
// Header-only, common/ types only: storage/ may include this one header of
// consistency/ (tests/layering/check_layering.sh).
//
// Thread-safe: pure functions.
#ifndef PACE_CONSISTENCY_BATCH_RULE_H_
#define PACE_CONSISTENCY_BATCH_RULE_H_

#include <cstdint>

#include "common/clock.h"

namespace pace {

// (clock, part) a before (clock, part) b, in the order a shard applies them.
inline bool PartBefore(ClockT ca, uint32_t pa, ClockT cb, uint32_t pb) {
  return ca < cb || (ca == cb && pa < pb);
}

// What a shard holds of one client: its batches of clocks < clock, and parts
// [0, parts) of clock `clock` (a clock whose batch was cut into parts and is
// not complete yet; 0 otherwise).
struct AppliedPosition {
  ClockT clock = 0;
  uint32_t parts = 0;
  bool operator==(const AppliedPosition& o) const { return clock == o.clock && parts == o.parts; }
};

// One batch: part `part` of the client's clock `clock`; `more`: parts of the
// clock follow it (it does not complete the clock).
struct BatchId {
  ClockT clock = 0;
  uint32_t part = 0;
  bool more = false;
};

enum class BatchAdmission {
  // The next batch: apply its deltas.
  kApply,
  // Already applied: skip it, acknowledge it as a duplicate.
  kDuplicate,
  // The last part of the open clock, below the parts the shard already has
  // of it: another incarnation of the client cut the clock into more parts
  // before it ended. Its deltas are a re-run's duplicate (skipped), but it
  // completes the clock.
  kCompletesClock,
  // A batch before it is missing: refuse it (nothing applied).
  kGap,
};

inline BatchAdmission ClassifyBatch(const AppliedPosition& applied, const BatchId& b) {
  if (b.clock < applied.clock) return BatchAdmission::kDuplicate;
  if (b.clock > applied.clock) return BatchAdmission::kGap;
  if (b.part < applied.parts) {
    return b.more ? BatchAdmission::kDuplicate : BatchAdmission::kCompletesClock;
  }
  if (b.part > applied.parts) return BatchAdmission::kGap;
  return BatchAdmission::kApply;
}

// Where the client stands after batch `b` was admitted as `admission`:
// moved on by kApply and kCompletesClock, unchanged otherwise.
inline AppliedPosition PositionAfter(const AppliedPosition& applied, const BatchId& b,
                                     BatchAdmission admission) {
  switch (admission) {
    case BatchAdmission::kApply:
      return b.more ? AppliedPosition{b.clock, b.part + 1} : AppliedPosition{b.clock + 1, 0};
    case BatchAdmission::kCompletesClock:
      return AppliedPosition{b.clock + 1, 0};
    case BatchAdmission::kDuplicate:
    case BatchAdmission::kGap:
      break;
  }
  return applied;
}

// --- Undo of an incomplete clock ---------------------------------------------
//
// The rule both the store (storage/shard_store_undo.cc) and the simulation's
// shard follow for the parts of a clock that a client process sent before it
// ended mid-clock (docs/storage-format.md section 4; docs/wire-protocol.md,
// "Apply parts").

// What a store holds of a client's clock AppliedClock(client) beyond its
// whole clocks (ShardStore::IncompleteClockOf): the parts applied, and
// whether they were kept for an undo and which process sent them.
struct IncompleteClock {
  ClockT clock = 0;
  uint32_t parts = 0;
  // Every part has its undo record (false only for parts written by a build
  // without undo records: they cannot be taken back).
  bool undoable = false;
  uint64_t incarnation = 0;  // the process that sent the parts (0: unknown)
};

// The rule of an undo: the parts of an incomplete clock are taken back when a
// process of the client other than the one that sent them starts (a nonzero
// incarnation that differs); the same process (a reconnect, a shard restart)
// re-sends its unacknowledged parts instead.
inline bool NeedsUndo(const IncompleteClock& c, uint64_t incarnation) {
  return c.parts > 0 && c.undoable && incarnation != 0 && incarnation != c.incarnation;
}

// Whether a Hello of client process `incarnation` waits for the shard's
// writer (refused with Unavailable until a writer task has run, and retried):
// the store holds parts another process sent (NeedsUndo: the task takes them
// back), or `served`, the last process of the client this shard served since
// it started (0: none), is another one: batches of that process may still be
// queued for the writer, and the new process must be told where the client
// stands after them (the task runs after them; it takes back the parts they
// leave). A Welcome sent before them would let the old batches land under
// the new process's re-run of the same clock.
inline bool HelloWaitsForWriter(const IncompleteClock& c, uint64_t incarnation, uint64_t served) {
  return NeedsUndo(c, incarnation) || (served != 0 && incarnation != served);
}

// Whether the parts of a client's incomplete clock are kept undoable, and the
// process that sent them.
struct UndoState {
  bool kept = false;
  uint64_t incarnation = 0;
};

// The undo state after batch `b` from process `incarnation` was admitted at
// `applied` as kApply or kCompletesClock (a duplicate changes nothing): a
// completed clock drops its records; its first part starts keeping them,
// for that process; later parts keep them as they are (parts after ones
// without records cannot be undone either).
inline UndoState UndoStateAfter(const UndoState& before, const AppliedPosition& applied,
                                const BatchId& b, BatchAdmission admission, uint64_t incarnation) {
  if (PositionAfter(applied, b, admission).parts == 0) return UndoState{};
  return applied.parts == 0 ? UndoState{true, incarnation} : before;
}

}  // namespace pace

#endif  // PACE_CONSISTENCY_BATCH_RULE_H_
