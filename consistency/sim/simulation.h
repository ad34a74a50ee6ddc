// A deterministic simulation of the PaceDB protocol (docs/design.md, "Semantics"),
// FoundationDB style: one seeded scheduler drives N shards — each the real
// ShardEngine over an in-memory store with crash semantics (a crash loses
// every batch not yet committed, and the engine's parked reads, sessions and
// subscriptions) — and M client processes whose protocol decisions are the
// real client rules of consistency/client_engine.h, the ones client/ calls
// (install, rebase or refetch of an arriving row, pull or wait for a push,
// what an Ack releases and when a duplicate Ack is another sender's, the
// re-send set and duplicate bound after a reconnect, re-subscription), over
// the simulation's own cache entries: coalesced deltas per clock, sent as
// random numbers of Apply parts (docs/wire-protocol.md "Apply parts"),
// the read rule by ReadPolicy, random evictions. Messages get random
// delays; each connection is FIFO (as TCP), different connections reorder
// freely; connections drop and shards crash at random moments.
//
// Client processes are killed too, most right after sending a part of a
// clock: a new process of the client (another Hello incarnation) starts,
// resumes from the smallest applied clock its shards welcome it with, and
// re-runs its clocks with other deltas and cuts. Its shards decide as the
// real ones by consistency/batch_rule.h: a Hello waits for the writer
// (HelloWaitsForWriter), whose task takes back the parts of the incomplete
// clock another process sent (NeedsUndo, from undo records kept by
// UndoStateAfter as the store keeps them).
//
// Every value carries its provenance (which client's which clock went into
// it) inside its bytes, which the engine treats as opaque, so each read a
// worker makes is checked against the ground truth:
//   - arithmetic: the value is exactly the sum of the deltas it claims, none
//     twice;
//   - the read rule: it holds every update of every clock < c - s (not
//     async);
//   - read-my-writes: it holds every update this process made before;
// whenever a worker starts a clock, no row of a vap table has more than its
// value bound (L1) in its process's unacknowledged batches; and at the end
// the stores hold exactly every update once (exact integer totals), each
// clock's from the process that completed it at that shard (parts of a
// killed process's unfinished clock taken back, a re-run of a clock a shard
// had completed skipped), every applied clock is complete and no undo record
// is left. A schedule that deadlocks or runs too long fails too.
//
// Everything is a pure function of the seed: a failing seed replays exactly.
#ifndef PACE_CONSISTENCY_SIM_SIMULATION_H_
#define PACE_CONSISTENCY_SIM_SIMULATION_H_

#include <cstdint>
#include <string>

namespace pace::sim {

struct SimResult {
  bool ok = true;
  std::string error;   // the first violation, when !ok
  std::string config;  // the schedule's shape (shards, clients, tables, faults)
  int64_t events = 0;
  int64_t reads_checked = 0;
  int64_t pushes = 0;
  int64_t crashes = 0;
  int64_t disconnects = 0;
  int64_t resent_batches = 0;
  int64_t parts_sent = 0;              // Apply parts with more (a clock sent in parts)
  int64_t parts_resent = 0;            // ... of them re-sent after a reconnect
  int64_t parts_skipped = 0;           // re-sent parts a shard skipped as duplicates
  int64_t client_kills = 0;            // client processes killed (a new one re-ran their clocks)
  int64_t client_kills_mid_clock = 0;  // ... after sending parts of their process clock
  int64_t parts_undone = 0;            // parts a shard took back for a new process
  int64_t rows_absent = 0;  // rows that arrived without a record (the client computed them)
};

// A deliberate error in the client rules (consistency/client_engine.h,
// consistency/value_bound.h) as the simulated clients apply them, or in the
// shard's undo of an incomplete clock: the test that the schedules would find
// a wrong rule plants each.
enum class PlantedBug {
  kNone,
  // Does not raise the duplicate bound when re-sending after a reconnect: a
  // re-sent batch the shard had is taken for another sender's.
  kNoDuplicateBoundOnResend,
  // Rebases as if the value held none of this client's batches: deltas the
  // value holds count twice.
  kRebaseEverySealedDelta,
  // An Ack purges every sealed delta of its rows, later batches' too: a
  // value that predates those batches lacks them.
  kPurgeLaterBatches,
  // Keeps subscriptions across a reconnect, as if they outlived the session.
  kKeepSubscriptionsAcrossReconnects,
  // The shard never takes back the parts a killed process sent (as parts
  // without undo records): a new process's re-run of that clock comes on top
  // of them.
  kNoUndo,
  // The shard takes the parts back twice.
  kUndoTwice,
  // The shard serves a new process of a client before its writer has the
  // batches an earlier process sent (HelloWaitsForWriter without `served`).
  kServeBeforeTheWriter,
  // A worker starts its next clock whatever its process has in flight: the
  // value bound of vap tables (ValueBoundLedger) is not waited for.
  kIgnoreValueBound,
};

struct SimOptions {
  // Give up (and fail) after this many events.
  int64_t max_events = 400000;
  // Append a line per event to *trace (for replaying a failing seed).
  std::string* trace = nullptr;
  // Default: none.
  PlantedBug planted_bug = PlantedBug::kNone;
};

// Runs the schedule of `seed`.
SimResult RunSchedule(uint64_t seed, const SimOptions& options = SimOptions());

}  // namespace pace::sim

#endif  // PACE_CONSISTENCY_SIM_SIMULATION_H_
