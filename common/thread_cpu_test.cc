#include "common/thread_cpu.h"

#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <thread>

#include "common/thread_name.h"

namespace pace {
namespace {

TEST(ThreadCpuTest, KindDropsTheIndexOfOneOfSeveralAlike) {
  EXPECT_EQ(ThreadKind("pace-worker-1"), "pace-worker");
  EXPECT_EQ(ThreadKind("pace-reader-10"), "pace-reader");
  EXPECT_EQ(ThreadKind("pace-writer"), "pace-writer");
  EXPECT_EQ(ThreadKind("rocksdb:low"), "rocksdb:low");
  EXPECT_EQ(ThreadKind("worker7"), "worker");
  EXPECT_EQ(ThreadKind("42"), "42");
  EXPECT_EQ(ThreadKind(""), "");
}

// Spins on a CPU for about `ms` of wall time.
void Burn(int ms) {
  const auto until = std::chrono::steady_clock::now() + std::chrono::milliseconds(ms);
  std::atomic<uint64_t> x{0};
  while (std::chrono::steady_clock::now() < until) x.fetch_add(1, std::memory_order_relaxed);
}

// Two threads of one kind that burn CPU between two readings show up, summed
// under their kind, with about what they spent; the process's total counts
// them too, also once they have ended.
TEST(ThreadCpuTest, NamedThreadsCpuIsSummedByKindBetweenReadings) {
  std::atomic<int> done{0};
  std::atomic<bool> go{false}, leave{false};
  auto body = [&](int i) {
    SetThreadName("cputest-" + std::to_string(i));
    while (!go.load()) std::this_thread::yield();
    Burn(300);
    done.fetch_add(1);
    while (!leave.load()) std::this_thread::sleep_for(std::chrono::milliseconds(1));
  };
  std::thread a(body, 0), b(body, 1);
  std::this_thread::sleep_for(std::chrono::milliseconds(50));  // both named
  const CpuReading before = ReadThreadCpu();
  go = true;
  while (done.load() < 2) std::this_thread::sleep_for(std::chrono::milliseconds(5));
  const CpuReading after = ReadThreadCpu();
  leave = true;
  a.join();
  b.join();
  const CpuReading d = CpuBetween(before, after);
  ASSERT_EQ(d.by_kind.count("cputest"), 1u);
  // ~0.6 s of CPU (clock ticks of 10 ms; a loaded machine gives the threads
  // less CPU than wall time, never more than they burned in wall time).
  EXPECT_GE(d.by_kind.at("cputest"), 0.1);
  EXPECT_LE(d.by_kind.at("cputest"), 1.0);
  EXPECT_GE(d.process, d.by_kind.at("cputest") - 0.05);
  EXPECT_EQ(d.by_kind.count("cputest-0"), 0u);
  const CpuReading end = ReadThreadCpu();
  EXPECT_EQ(end.by_kind.count("cputest"), 0u);  // ended: counted in the process only
  EXPECT_GE(end.process, after.process);
}

}  // namespace
}  // namespace pace
