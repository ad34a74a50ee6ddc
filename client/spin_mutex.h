// SpinMutex: a small lock for the cache stripes, whose critical sections are
// a hash lookup and a row copy. Uncontended it costs one atomic
// compare-exchange to acquire and one atomic decrement to release (a pthread
// mutex adds two calls), which is most of the overhead of a cache-hit Get.
// Under contention it spins briefly, then sleeps on a futex until the holder
// releases it: with more busy threads than cores (workers, the inbound
// thread and an embedded shard's threads), a holder is often preempted, and
// waiters that kept yielding burned the CPU it needed to finish.
//
// The state is 0 (free), 1 (held) or 2 (held, a waiter may sleep): the
// three-state futex mutex of Drepper, "Futexes Are Tricky" (2011).
//
// Satisfies Lockable: use with std::lock_guard / std::unique_lock and, for
// blocking waits, std::condition_variable_any. Thread-safe. Annotated as a
// capability for clang's thread-safety analysis (common/thread_annotations.h).
#ifndef PACE_CLIENT_SPIN_MUTEX_H_
#define PACE_CLIENT_SPIN_MUTEX_H_

#include <linux/futex.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <atomic>

#include "common/thread_annotations.h"

namespace pace::client {

class CAPABILITY("mutex") SpinMutex {
 public:
  void lock() ACQUIRE() {
    int c = 0;
    if (state_.compare_exchange_strong(c, 1, std::memory_order_acquire)) return;
    LockSlow();
  }
  bool try_lock() TRY_ACQUIRE(true) {
    int c = 0;
    return state_.load(std::memory_order_relaxed) == 0 &&
           state_.compare_exchange_strong(c, 1, std::memory_order_acquire);
  }
  void unlock() RELEASE() {
    if (state_.fetch_sub(1, std::memory_order_release) != 1) {
      state_.store(0, std::memory_order_release);
      Futex(FUTEX_WAKE_PRIVATE, 1);
    }
  }
  // Tells the analysis that the caller holds the lock (no runtime check):
  // for callbacks run by a method that REQUIRES it.
  void AssertHeld() const ASSERT_CAPABILITY(this) {}

 private:
  static constexpr int kSpins = 100;

  void LockSlow() {
    for (int spins = 0; spins < kSpins; ++spins) {
#if defined(__x86_64__) || defined(__i386__)
      __builtin_ia32_pause();
#endif
      int c = 0;
      if (state_.load(std::memory_order_relaxed) == 0 &&
          state_.compare_exchange_strong(c, 1, std::memory_order_acquire)) {
        return;
      }
    }
    // Announce a sleeper (2); whoever releases it then wakes one.
    while (state_.exchange(2, std::memory_order_acquire) != 0) Futex(FUTEX_WAIT_PRIVATE, 2);
  }
  void Futex(int op, int value) {
    syscall(SYS_futex, reinterpret_cast<int*>(&state_), op, value, nullptr, nullptr, 0);
  }

  static_assert(sizeof(std::atomic<int>) == sizeof(int), "the futex word is the atomic");
  std::atomic<int> state_{0};
};

// Holds a SpinMutex for its scope (an annotated std::lock_guard).
class SCOPED_CAPABILITY SpinLock {
 public:
  explicit SpinLock(SpinMutex* mu) ACQUIRE(mu) : mu_(mu) { mu_->lock(); }
  ~SpinLock() RELEASE() { mu_->unlock(); }
  SpinLock(const SpinLock&) = delete;
  SpinLock& operator=(const SpinLock&) = delete;

 private:
  SpinMutex* const mu_;
};

// An annotated std::unique_lock<SpinMutex>: may be unlocked and relocked, and
// is BasicLockable, so std::condition_variable_any can wait on it.
class SCOPED_CAPABILITY SpinUniqueLock {
 public:
  explicit SpinUniqueLock(SpinMutex* mu) ACQUIRE(mu) : mu_(mu) { mu_->lock(); }
  ~SpinUniqueLock() RELEASE() {
    if (owns_) mu_->unlock();
  }
  SpinUniqueLock(const SpinUniqueLock&) = delete;
  SpinUniqueLock& operator=(const SpinUniqueLock&) = delete;

  void lock() ACQUIRE() {
    mu_->lock();
    owns_ = true;
  }
  void unlock() RELEASE() {
    owns_ = false;
    mu_->unlock();
  }

 private:
  SpinMutex* const mu_;
  bool owns_ = true;
};

}  // namespace pace::client

#endif  // PACE_CLIENT_SPIN_MUTEX_H_
