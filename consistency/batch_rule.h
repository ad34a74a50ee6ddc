// The batch admission rule: which Apply batch of a client a shard applies,
// skips as a duplicate, or refuses as a clock gap (docs/design.md, "Clock()
// and its batches"; docs/wire-protocol.md, "Apply parts"). One rule for every
// layer that must agree on it: the store decides with it when it writes a
// group (storage/), the shard service records the outcome with the engine
// (server/), the simulation's shard applies by it (consistency/sim/), and the
// client orders its batches and acknowledgements with PartBefore.
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

}  // namespace pace

#endif  // PACE_CONSISTENCY_BATCH_RULE_H_
