#include "common/malloc_tuning.h"

#include <limits.h>
#include <pthread.h>
#include <signal.h>
#include <sys/auxv.h>
#include <sys/mman.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <iterator>
#include <thread>

#if defined(__GLIBC__)
#include <gnu/libc-version.h>
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
  // huge pages it matters more: glibc madvises the main arena's heap as it
  // grows, and an 8a run took ~280k faults with thread arenas, 6k without.
  if (!SetsTunable(tunables, "glibc.malloc.arena_max")) mallopt(M_ARENA_MAX, kMallocArenas);
#endif
}

std::string HugePageTunables(const char* tunables, const std::string& thp_enabled,
                             const std::string& glibc_version) {
  if (SetsTunable(tunables, "glibc.malloc.hugetlb")) return "";
  // "always [madvise] never": the bracketed word is the mode.
  if (thp_enabled.empty() || thp_enabled.find("[never]") != std::string::npos) return "";
  int major = 0, minor = 0;
  if (std::sscanf(glibc_version.c_str(), "%d.%d", &major, &minor) != 2) return "";
  if (major < 2 || (major == 2 && minor < 35)) return "";  // no glibc.malloc.hugetlb
  const std::string item = "glibc.malloc.hugetlb=1";
  if (tunables == nullptr || *tunables == '\0') return item;
  return std::string(tunables) + ":" + item;
}

std::string HugePageRestartTunables() {
#if defined(__GLIBC__) && !defined(PACE_ASAN) && !defined(PACE_TSAN)  // they replace malloc
  // A secure-execution process (setuid, or file capabilities such as
  // cap_net_bind_service for a port below 1024): glibc drops GLIBC_TUNABLES
  // from its view of the environment, so a restart could not see its own
  // setting and would restart again without end.
  if (getauxval(AT_SECURE) != 0) return "";
  std::ifstream in("/sys/kernel/mm/transparent_hugepage/enabled");
  const std::string thp((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  return HugePageTunables(std::getenv("GLIBC_TUNABLES"), thp, gnu_get_libc_version());
#else
  return "";
#endif
}

void RestartWithHugePageHeap(char** argv) {
  const std::string after = HugePageRestartTunables();
  if (after.empty()) return;
  const char* before = std::getenv("GLIBC_TUNABLES");
  const std::string saved = before != nullptr ? before : "";
  // The binary's own path, not /proc/self/exe: the kernel names the process
  // (its comm, what ps, top and pgrep show) after the file executed.
  char self[PATH_MAX];
  const ssize_t n = readlink("/proc/self/exe", self, sizeof(self) - 1);
  if (n <= 0) return;
  self[n] = '\0';
  if (setenv("GLIBC_TUNABLES", after.c_str(), 1) != 0) return;
  execv(self, argv);
  // The exec failed (no /proc, a binary replaced or deleted since): run on
  // as started.
  if (before != nullptr) {
    setenv("GLIBC_TUNABLES", saved.c_str(), 1);
  } else {
    unsetenv("GLIBC_TUNABLES");
  }
}

}  // namespace pace
