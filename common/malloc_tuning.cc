#include "common/malloc_tuning.h"

#include <pthread.h>
#include <signal.h>
#include <sys/mman.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdlib>
#include <cstring>
#include <thread>

#if defined(__GLIBC__)
#include <malloc.h>
#endif

#include "common/memory_budget.h"
#include "common/sanitizers.h"

namespace pace {
namespace {

// Whether the GLIBC_TUNABLES value `tunables` (NAME=VALUE items separated by
// ':') sets `name`.
bool SetsTunable(const char* tunables, const char* name) {
  if (tunables == nullptr) return false;
  const size_t n = std::strlen(name);
  for (const char* p = tunables; *p != '\0';) {
    if (std::strncmp(p, name, n) == 0 && p[n] == '=') return true;
    const char* colon = std::strchr(p, ':');
    if (colon == nullptr) break;
    p = colon + 1;
  }
  return false;
}

#ifndef MADV_POPULATE_WRITE
#define MADV_POPULATE_WRITE 23  // Linux 5.14
#endif

std::atomic<bool> prefault_started{false};
std::atomic<uint64_t> prefaulted_bytes{0};

// The prefault thread: whenever the heap's end (sbrk(0)) has moved up, the
// last `ahead` bytes before it (the pad glibc left past the allocation that
// grew it) are populated. Polls every millisecond while the heap grows, up to
// every 64 ms while it does not.
void PrefaultLoop(uintptr_t ahead, uintptr_t done) {
  pthread_setname_np(pthread_self(), "pace-prefault");
  // Signals are for the process's other threads (a stop signal's handler
  // thread waits for them with the signals blocked elsewhere).
  sigset_t all;
  sigfillset(&all);
  pthread_sigmask(SIG_BLOCK, &all, nullptr);
  const uintptr_t page = static_cast<uintptr_t>(sysconf(_SC_PAGESIZE));
  auto idle = std::chrono::milliseconds(1);
  for (;;) {
    const uintptr_t end = reinterpret_cast<uintptr_t>(sbrk(0));
    if (end > done) {
      const uintptr_t from = std::max(done, end - std::min(end, ahead)) & ~(page - 1);
      // A failure (the range trimmed meanwhile) leaves those pages to be
      // faulted in by their first user, as without this thread.
      if (madvise(reinterpret_cast<void*>(from), end - from, MADV_POPULATE_WRITE) == 0) {
        prefaulted_bytes.fetch_add(end - from, std::memory_order_relaxed);
      }
      idle = std::chrono::milliseconds(1);
    } else {
      idle = std::min(idle * 2, std::chrono::milliseconds(64));
    }
    done = end;  // below `done` after a trim: from there on
    std::this_thread::sleep_for(idle);
  }
}

}  // namespace

bool StartHeapPrefault(size_t ahead_bytes) {
#if defined(__GLIBC__) && !defined(PACE_ASAN) && !defined(PACE_TSAN)
  if (ahead_bytes == 0 || SetsTunable(std::getenv("GLIBC_TUNABLES"), "glibc.malloc.top_pad")) {
    return false;
  }
  if (prefault_started.exchange(true)) return false;
  // The kernel must know MADV_POPULATE_WRITE: try it on a page of our own.
  const size_t page = static_cast<size_t>(sysconf(_SC_PAGESIZE));
  void* probe = mmap(nullptr, page, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  if (probe == MAP_FAILED) return false;
  const bool supported = madvise(probe, page, MADV_POPULATE_WRITE) == 0;
  munmap(probe, page);
  if (!supported) return false;
  constexpr size_t kMaxPad = size_t{1} << 30;  // mallopt takes an int
  if (mallopt(M_TOP_PAD, static_cast<int>(std::min(ahead_bytes, kMaxPad))) != 1) return false;
  // The heap's end now: growth from here on is populated (taken here, not by
  // the thread, which may first run after the next growth).
  const uintptr_t end = reinterpret_cast<uintptr_t>(sbrk(0));
  std::thread(PrefaultLoop, static_cast<uintptr_t>(ahead_bytes), end).detach();
  return true;
#else
  (void)ahead_bytes;
  return false;
#endif
}

size_t HeapPrefaultBytes(uint64_t memory_budget_bytes) {
  constexpr uint64_t kPad = uint64_t{32} << 20;
  return static_cast<size_t>(memory_budget_bytes == 0 ? kPad
                                                      : std::min(kPad, memory_budget_bytes / 16));
}

uint64_t HeapPrefaultedBytes() { return prefaulted_bytes.load(std::memory_order_relaxed); }

void TuneMallocForClocks() {
#if defined(__GLIBC__)
  const char* tunables = std::getenv("GLIBC_TUNABLES");
  constexpr int kMiB = 1 << 20;
  if (!SetsTunable(tunables, "glibc.malloc.mmap_threshold")) {
    mallopt(M_MMAP_THRESHOLD, 1024 * kMiB);
  }
  if (!SetsTunable(tunables, "glibc.malloc.trim_threshold")) {
    mallopt(M_TRIM_THRESHOLD, 1024 * kMiB);
  }
  // One arena whatever the budget (common/memory_budget.h says why a budget
  // needs it). Without a budget too: every thread arena grows its heap with an
  // mprotect per page range it first uses, and the workers' arenas grew all
  // the time (8a: sysmalloc and mprotect 5-10% of a worker's CPU, system time
  // 1.2 s against 0.9 with one arena, peak RSS 1.36 GB against 1.21). With
  // glibc.malloc.hugetlb=1 it matters more: glibc advises only the main
  // arena's heap, and an 8a run took ~280k faults with thread arenas, 6k
  // without.
  if (!SetsTunable(tunables, "glibc.malloc.arena_max")) mallopt(M_ARENA_MAX, kMallocArenas);
#endif
}

}  // namespace pace
