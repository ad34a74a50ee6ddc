// One process budget, held over a table larger than it (the budget's
// integration test): an embedded pace_memory_workload with --memory_mb=96
// writes a table of >= 512 MiB (1M rows x 128 f32), then two workers read and
// update random rows for three clocks while adding known amounts to integer
// control rows. Its peak RSS (VmHWM, measured by the process itself from
// /proc/self/status) stays below 160 MiB and the control rows are exact.
#include <gtest/gtest.h>
#include <sys/wait.h>

#include <cstdlib>
#include <map>
#include <string>
#include <vector>

#include "tests/memory/memory_test_util.h"
#include "tests/testing/subprocess.h"

namespace pace::testing {
namespace {

constexpr uint64_t kMiB = uint64_t{1} << 20;

// Runs pace_memory_workload with `flags` on a fresh data dir in `dir` and
// collects its `workload` key=values into *kv; the process must exit 0 with
// its control rows exact.
void RunWorkload(const TempDir& dir, const std::vector<std::string>& flags,
                 std::map<std::string, std::string>* kv) {
  std::vector<std::string> argv = {BinaryDir() + "/pace_memory_workload",
                                   "--data_dir=" + dir.path() + "/d"};
  argv.insert(argv.end(), flags.begin(), flags.end());
  Subprocess proc;
  ASSERT_TRUE(proc.Start(argv, dir.path() + "/stderr.log").ok());
  CollectKeyValues(&proc, "workload", 240000, kv);
  int status = 0;
  ASSERT_TRUE(proc.Wait(30000, &status).ok());
  ASSERT_TRUE(WIFEXITED(status)) << "the workload did not exit";
  EXPECT_EQ(WEXITSTATUS(status), 0) << "see " << dir.path() << "/stderr.log";
  EXPECT_EQ((*kv)["control_exact"], "true");
}

TEST(MemoryBudgetTest, EmbeddedProcessStaysWithinItsBudgetOverALargerTable) {
  TempDir dir;
  std::map<std::string, std::string> kv;
  RunWorkload(dir,
              {"--memory_mb=96", "--rows=1048576", "--width=128", "--fill_rows_per_clock=16384",
               "--workers=2", "--clocks=3", "--ops_per_clock=4000"},
              &kv);
  if (HasFatalFailure()) return;
  EXPECT_GE(U64(kv, "data_dir_bytes"), 512 * kMiB) << "the table is smaller than the test needs";
  const uint64_t peak = U64(kv, "peak_rss_bytes");
  EXPECT_GT(peak, 0u);
#if !defined(__SANITIZE_THREAD__) && !defined(__SANITIZE_ADDRESS__)
  // Not in sanitizer builds (make tsan / make asan): their shadow memory is
  // RSS too (TSan: 656 MiB here), so the bound says nothing about the budget.
  EXPECT_LT(peak, 160 * kMiB) << "peak RSS " << peak / kMiB << " MiB with --memory_mb=96";
#endif
  EXPECT_GT(U64(kv, "rows_fetched"), 0u);
  // Client::Stats().memory lists the client's and the in-process shard's
  // components, each within its bound (the resolved shares of 96 MiB).
  for (const char* c : {"memory.client.cache", "memory.client.unacked", "memory.shard.block_cache",
                        "memory.shard.row_cache"}) {
    ASSERT_TRUE(kv.count(c)) << c;
    const std::string& v = kv[c];
    const uint64_t used = std::strtoull(v.c_str(), nullptr, 10);
    const uint64_t bound = std::strtoull(v.c_str() + v.find('/') + 1, nullptr, 10);
    EXPECT_GT(bound, 0u) << c;
    EXPECT_LT(bound, 96 * kMiB) << c;
    EXPECT_LE(used, bound + bound / 20) << c;  // RocksDB's LRU may overshoot a little
  }
  EXPECT_TRUE(kv.count("memory.shard.memtables"));
}

// The open-delta bound for the worker that holds the process clock (the
// partial Apply): one worker writes 256k rows x 128 f32 (128 MiB of deltas)
// in ONE clock, in Incs of 1024 rows, under --memory_mb=64 (open deltas 7 MiB,
// unacknowledged 3 MiB). It cannot wait for anyone, so its clock leaves in
// parts (Apply{more}) as it goes: the process peaks far below the clock's
// 128 MiB of deltas, and the control rows of the random phase after it are
// exact.
TEST(MemoryBudgetTest, TheProcessClocksHolderSendsAClockLargerThanTheBudgetInParts) {
  TempDir dir;
  std::map<std::string, std::string> kv;
  RunWorkload(dir,
              {"--memory_mb=64", "--rows=262144", "--width=128", "--fill_rows_per_clock=262144",
               "--fill_inc_rows=1024", "--workers=2", "--clocks=2", "--ops_per_clock=1000"},
              &kv);
  if (HasFatalFailure()) return;
  // One clock, many parts: 128 MiB in parts of ~1.9 MiB.
  EXPECT_GE(U64(kv, "fill_batches_sent"), 32u);
  const uint64_t peak = U64(kv, "fill_peak_rss_bytes");
  EXPECT_GT(peak, 0u);
#if !defined(__SANITIZE_THREAD__) && !defined(__SANITIZE_ADDRESS__)
  // Without parts the open deltas alone would be 128 MiB (and each sealed
  // byte is held ~3 times on its way to the memtable).
  EXPECT_LT(peak, 112 * kMiB) << "peak RSS " << peak / kMiB << " MiB while filling";
#endif
  EXPECT_EQ(U64(kv, "open_delta_waits"), 0u);  // the holder never waits for others
}

}  // namespace
}  // namespace pace::testing
