// Taking back an incomplete clock is exact across crashes, with real
// processes: a child applies parts of a clock and is SIGKILLed; another child
// takes them back (ShardStore::UndoIncompleteClock, as a new process of the
// client would have the shard do) and is SIGKILLed at a random moment of the
// undo or after it. Every time, the store holds either every part or none of
// them (never half, never a part taken back twice), and after the undo is
// completed (again, if the kill came first) every row equals what clock 0
// alone left.
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/wait.h>

#include <chrono>
#include <cstdio>
#include <memory>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include "tests/storage/undo_crash_workload.h"
#include "tests/testing/subprocess.h"

namespace pace::undo_crash {
namespace {

using ::pace::testing::Subprocess;
using ::pace::testing::TempDir;

constexpr int kTimeoutMs = 60000;

// Runs the child in `mode` on `dir`; SIGKILLs it `kill_after_us` after its
// "opened" line (< 0: let it run to its own kill). Returns its lines.
std::vector<std::string> RunChild(const std::string& dir, const std::string& mode,
                                  int64_t kill_after_us) {
  Subprocess p;
  EXPECT_TRUE(p.Start({PACE_UNDO_CRASH_CHILD, "--dir=" + dir, "--mode=" + mode}).ok());
  std::vector<std::string> lines;
  std::string line;
  while (p.ReadLine(&line, kTimeoutMs).ok()) {
    lines.push_back(line);
    if (line == "opened" && kill_after_us >= 0) {
      std::this_thread::sleep_for(std::chrono::microseconds(kill_after_us));
      p.Signal(SIGKILL);
    }
  }
  int st = 0;
  EXPECT_TRUE(p.Wait(kTimeoutMs, &st).ok());
  EXPECT_TRUE(WIFSIGNALED(st) && WTERMSIG(st) == SIGKILL) << "child ended with status " << st;
  return lines;
}

// Rows that differ from the values with `parts` parts of clock 1 applied.
size_t RowsDiffering(ShardStore* s, uint32_t table, uint32_t parts) {
  std::vector<uint64_t> rows(kRows);
  for (uint32_t r = 0; r < kRows; ++r) rows[r] = r;
  std::vector<std::string> values;
  Status st = s->MultiGet(table, rows, &values);
  EXPECT_TRUE(st.ok()) << st.ToString();
  size_t differ = 0;
  for (uint32_t r = 0; r < kRows && st.ok(); ++r) {
    const std::vector<int64_t> v = DecodeDense<int64_t>(values[r]);
    bool same = v.size() == kWidth;
    for (uint32_t i = 0; same && i < kWidth; ++i) same = v[i] == Value(r, i, parts);
    differ += same ? 0 : 1;
  }
  return differ;
}

TEST(StorageUndoCrashTest, AnUndoKilledAnywhereHappensExactlyOnce) {
  TempDir tmp;
  std::mt19937 rng(11);
  int64_t undo_us = 0;  // how long an undo takes here (the first, unkilled round)
  int killed_before = 0, killed_after = 0;
  for (int round = 0; round < 10; ++round) {
    SCOPED_TRACE("round " + std::to_string(round));
    const std::string dir = tmp.Sub("store" + std::to_string(round));
    std::vector<std::string> lines = RunChild(dir, "parts", -1);
    ASSERT_EQ(lines, std::vector<std::string>{"parts"});
    // Round 0 measures the undo; the others are killed from its start to a
    // little past its end.
    const int64_t kill_us = round == 0 ? -1 : static_cast<int64_t>(rng() % (undo_us * 3 / 2 + 1));
    lines = RunChild(dir, "undo", kill_us);
    ASSERT_FALSE(lines.empty());
    ASSERT_EQ(lines[0], "opened");
    if (round == 0) {
      ASSERT_EQ(lines.size(), 2u);
      undo_us = 1000 * std::stoll(lines[1].substr(lines[1].find(' ') + 1));
      if (undo_us < 1000) undo_us = 1000;
    }
    std::unique_ptr<ShardStore> s;
    ASSERT_TRUE(ShardStore::Open(StoreOptions(), dir, &s).ok());
    StatusOr<TableSchema> table = s->FindTable("counts");
    ASSERT_TRUE(table.ok());
    const uint32_t t = table->id;
    EXPECT_EQ(s->AppliedClock(0), 1);
    const uint32_t parts = s->AppliedParts(0);
    // All of the parts, or none: never a part half taken back.
    ASSERT_TRUE(parts == 0 || parts == kUndoParts) << parts;
    EXPECT_EQ(RowsDiffering(s.get(), t, parts), 0u) << parts << " parts";
    (parts == 0 ? killed_after : killed_before) += round > 0;
    // Completing it: once, whatever happened before.
    UndoResult r;
    ASSERT_TRUE(s->UndoIncompleteClock(0, kNewIncarnation, &r).ok());
    EXPECT_EQ(r.undone, parts > 0);
    ASSERT_TRUE(s->UndoIncompleteClock(0, kNewIncarnation + 1, &r).ok());
    EXPECT_FALSE(r.undone);
    EXPECT_EQ(s->AppliedParts(0), 0u);
    EXPECT_EQ(RowsDiffering(s.get(), t, 0), 0u);
    s.reset();
    ASSERT_TRUE(ShardStore::Open(StoreOptions(), dir, &s).ok());
    EXPECT_EQ(RowsDiffering(s.get(), t, 0), 0u);
    EXPECT_EQ(s->AppliedParts(0), 0u);
  }
  std::printf("undo of %u parts x %u rows: %lld us; kills before its commit %d, after %d\n",
              kUndoParts, kRows, static_cast<long long>(undo_us), killed_before, killed_after);
}

}  // namespace
}  // namespace pace::undo_crash
