// SpinMutex: a small test-and-test-and-set lock for the cache stripes, whose
// critical sections are a hash lookup and a row copy. Uncontended it costs one
// atomic exchange to acquire and a plain store to release (a pthread mutex
// costs two atomic operations and two calls), which is most of the overhead
// of a cache-hit Get. Under contention it spins briefly, then yields.
//
// Satisfies Lockable: use with std::lock_guard / std::unique_lock and, for
// blocking waits, std::condition_variable_any. Thread-safe. Annotated as a
// capability for clang's thread-safety analysis (common/thread_annotations.h).
#ifndef PACE_CLIENT_SPIN_MUTEX_H_
#define PACE_CLIENT_SPIN_MUTEX_H_

#include <atomic>
#include <thread>

#include "common/thread_annotations.h"

namespace pace::client {

class CAPABILITY("mutex") SpinMutex {
 public:
  void lock() ACQUIRE() {
    for (int spins = 0; locked_.exchange(true, std::memory_order_acquire);) {
      while (locked_.load(std::memory_order_relaxed)) {
        if (++spins < 64) {
#if defined(__x86_64__) || defined(__i386__)
          __builtin_ia32_pause();
#endif
        } else {
          std::this_thread::yield();
        }
      }
    }
  }
  bool try_lock() TRY_ACQUIRE(true) {
    return !locked_.load(std::memory_order_relaxed) &&
           !locked_.exchange(true, std::memory_order_acquire);
  }
  void unlock() RELEASE() { locked_.store(false, std::memory_order_release); }
  // Tells the analysis that the caller holds the lock (no runtime check):
  // for callbacks run by a method that REQUIRES it.
  void AssertHeld() const ASSERT_CAPABILITY(this) {}

 private:
  std::atomic<bool> locked_{false};
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
