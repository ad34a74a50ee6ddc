#include "client/spin_mutex.h"

#include <gtest/gtest.h>
#include <sys/resource.h>

#include <atomic>
#include <chrono>
#include <thread>
#include <vector>

namespace pace::client {
namespace {

// More threads than this machine has cores, each adding under the lock: the
// total is exact (mutual exclusion holds through the sleeping slow path).
TEST(SpinMutexTest, ExcludesUnderOversubscription) {
  SpinMutex mu;
  uint64_t counter = 0;
  constexpr int kThreads = 8, kAdds = 200000;
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t) {
    threads.emplace_back([&] {
      for (int i = 0; i < kAdds; ++i) {
        SpinLock l(&mu);
        ++counter;
      }
    });
  }
  for (std::thread& t : threads) t.join();
  EXPECT_EQ(counter, uint64_t{kThreads} * kAdds);
}

// try_lock takes a free lock and fails on a held one. (Outside the
// thread-safety analysis, which cannot follow a lock taken inside an EXPECT.)
void ExpectTryLockTakesAFreeLockOnly(SpinMutex* mu) NO_THREAD_SAFETY_ANALYSIS {
  EXPECT_TRUE(mu->try_lock());
  EXPECT_FALSE(mu->try_lock());
  mu->unlock();
}

double ThreadCpuSeconds() {
  rusage u{};
  getrusage(RUSAGE_THREAD, &u);
  return u.ru_utime.tv_sec + u.ru_stime.tv_sec + (u.ru_utime.tv_usec + u.ru_stime.tv_usec) / 1e6;
}

// A thread waiting for a lock held for a long time sleeps instead of
// spinning or yielding: it uses a small fraction of the wait's CPU time.
TEST(SpinMutexTest, LongWaitSleeps) {
  SpinMutex mu;
  mu.lock();
  std::atomic<bool> got{false};
  double waiter_cpu = 0;
  std::thread waiter([&] {
    const double before = ThreadCpuSeconds();
    mu.lock();
    waiter_cpu = ThreadCpuSeconds() - before;
    got = true;
    mu.unlock();
  });
  std::this_thread::sleep_for(std::chrono::milliseconds(500));
  EXPECT_FALSE(got.load());
  mu.unlock();
  waiter.join();
  EXPECT_TRUE(got.load());
  EXPECT_LT(waiter_cpu, 0.1) << "the waiter burned CPU while the lock was held";
  ExpectTryLockTakesAFreeLockOnly(&mu);
}

}  // namespace
}  // namespace pace::client
