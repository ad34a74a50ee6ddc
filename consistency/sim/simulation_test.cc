// Runs many seeded schedules of the protocol simulation. The default suite
// (consistency_sim_test) runs 10,000; the slow one (consistency_sim_slow_test,
// label slow) 1,000,000. PACE_SIM_SCHEDULES=N sets the count; PACE_SIM_SEED=N
// replays one seed with a trace of its events.
#include "consistency/sim/simulation.h"

#include <gtest/gtest.h>

#include <chrono>
#include <cstdint>
#include <cstdlib>
#include <iostream>
#include <string>
#include <utility>

#ifndef PACE_SIM_DEFAULT_SCHEDULES
#define PACE_SIM_DEFAULT_SCHEDULES 10000
#endif

namespace pace::sim {
namespace {

uint64_t EnvOr(const char* name, uint64_t dflt) {
  const char* v = std::getenv(name);
  return v != nullptr && *v != '\0' ? std::strtoull(v, nullptr, 10) : dflt;
}

TEST(SimulationTest, SeededSchedulesKeepTheProtocolsPromises) {
  if (const char* seed = std::getenv("PACE_SIM_SEED"); seed != nullptr && *seed != '\0') {
    std::string trace;
    SimOptions o;
    o.trace = &trace;
    const uint64_t s = std::strtoull(seed, nullptr, 10);
    SimResult r = RunSchedule(s, o);
    std::cout << trace << "seed " << s << ": " << r.config << "\n"
              << (r.ok ? "ok" : r.error) << "\n";
    EXPECT_TRUE(r.ok) << r.error;
    return;
  }
  const uint64_t n = EnvOr("PACE_SIM_SCHEDULES", PACE_SIM_DEFAULT_SCHEDULES);
  const uint64_t first = EnvOr("PACE_SIM_FIRST_SEED", 1);
  const auto start = std::chrono::steady_clock::now();
  int64_t events = 0, reads = 0, pushes = 0, crashes = 0, disconnects = 0, resent = 0, parts = 0,
          parts_resent = 0, parts_skipped = 0, kills = 0, kills_mid_clock = 0, parts_undone = 0,
          absent = 0;
  uint64_t failures = 0;
  for (uint64_t seed = first; seed < first + n; ++seed) {
    SimResult r = RunSchedule(seed);
    events += r.events;
    reads += r.reads_checked;
    pushes += r.pushes;
    crashes += r.crashes;
    disconnects += r.disconnects;
    resent += r.resent_batches;
    parts += r.parts_sent;
    parts_resent += r.parts_resent;
    parts_skipped += r.parts_skipped;
    absent += r.rows_absent;
    kills += r.client_kills;
    kills_mid_clock += r.client_kills_mid_clock;
    parts_undone += r.parts_undone;
    if (!r.ok && ++failures <= 3) {
      ADD_FAILURE() << "seed " << seed << " failed: " << r.error << "\n  schedule: " << r.config
                    << "\n  replay: PACE_SIM_SEED=" << seed;
    }
  }
  const double secs =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  std::cout << n << " schedules in " << secs << " s (" << failures << " failed): " << events
            << " events, " << reads << " reads checked, " << pushes << " pushes, " << crashes
            << " shard crashes, " << disconnects << " disconnects, " << resent
            << " batches re-sent, " << parts << " parts sent early (" << parts_resent
            << " re-sent, " << parts_skipped << " skipped as duplicates of the open clock), "
            << kills << " client processes killed (" << kills_mid_clock
            << " mid-clock, after sending parts of it), " << parts_undone
            << " parts taken back for a new process, " << absent
            << " rows without a record sent absent\n";
  EXPECT_EQ(failures, 0u);
  // The schedules exercise what they claim to.
  EXPECT_GT(reads, static_cast<int64_t>(n));
  EXPECT_GT(absent, 0);
  if (n >= 1000) {
    EXPECT_GT(pushes, 0);
    EXPECT_GT(crashes, 0);
    EXPECT_GT(disconnects, 0);
    EXPECT_GT(resent, 0);
    EXPECT_GT(parts, 0);
    EXPECT_GT(parts_resent, 0);
    EXPECT_GT(parts_skipped, 0);
    EXPECT_GT(kills_mid_clock, 0);
    EXPECT_GT(parts_undone, 0);
  }
}

// The schedules find a wrong rule: each error planted in the rules the
// simulated clients apply, or in the shards' undo of a killed process's
// parts, fails one of the first schedules.
TEST(SimulationTest, FindsEachPlantedClientBug) {
  const std::pair<PlantedBug, const char*> bugs[] = {
      {PlantedBug::kNoDuplicateBoundOnResend, "no duplicate bound for re-sent batches"},
      {PlantedBug::kRebaseEverySealedDelta, "every sealed delta rebased"},
      {PlantedBug::kPurgeLaterBatches, "an Ack purging later batches"},
      {PlantedBug::kKeepSubscriptionsAcrossReconnects, "subscriptions kept across reconnects"},
      {PlantedBug::kNoUndo, "no undo of a killed process's parts"},
      {PlantedBug::kUndoTwice, "parts taken back twice"},
      {PlantedBug::kServeBeforeTheWriter, "a new process served before the writer"},
      {PlantedBug::kIgnoreValueBound, "a clock started past the value bound"},
  };
  constexpr uint64_t kSeeds = 20000;
  for (const auto& [bug, name] : bugs) {
    SimOptions o;
    o.planted_bug = bug;
    uint64_t seed = 1;
    SimResult r;
    for (; seed <= kSeeds; ++seed) {
      r = RunSchedule(seed, o);
      if (!r.ok) break;
    }
    EXPECT_FALSE(r.ok) << name << ": not found in " << kSeeds << " schedules";
    std::cout << name << ": found by seed " << seed << ": " << r.error << "\n";
  }
}

}  // namespace
}  // namespace pace::sim
