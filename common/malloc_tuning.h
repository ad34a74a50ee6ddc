// The heap settings of PaceDB's processes (paced, pace_mf, pace_lda, pacectl).
//
// A clock moves each touched row through a few short-lived buffers (a batch's
// deltas, a read reply's rows, a log stage), some of them tens of megabytes.
// With glibc's defaults a buffer over the dynamic mmap threshold is mapped and
// unmapped each time, and a free at the top of the heap past 128 KiB returns
// the memory to the kernel: the next clock faults the same pages in again and
// the kernel zeroes each one (clear_page was 15% of an 8a run's CPU). The
// process's peak (VmHWM), which the memory budgets bound, is not raised by
// keeping freed memory for reuse; only the resident size after a peak is.
//
// The heap a model-scale job grows (a gigabyte of cached rows, the shard's
// copy, the clocks' parts) is faulted in a page at a time, and on a virtual
// machine a fault is costly: 4 KiB pages cost an 8a run ~260k faults, a third
// of its CPU (docs/data-path.md, "The heap in huge pages"). glibc grows the
// heap in transparent huge pages when GLIBC_TUNABLES has
// glibc.malloc.hugetlb=1, which glibc reads only as a process starts.
#ifndef PACE_COMMON_MALLOC_TUNING_H_
#define PACE_COMMON_MALLOC_TUNING_H_

#include <cstddef>
#include <cstdint>
#include <string>

namespace pace {

// Keeps freed heap memory for reuse instead of returning it to the kernel at
// once: buffers up to 1 GiB come from the heap (not mmap), and the heap's top
// is trimmed only past 1 GiB free (an explicit malloc_trim, as paced's after a
// flood of replies, still returns it; a larger top pad would make that trim
// keep the pad), and all threads allocate from one arena. Call once at
// the start of main, before threads start. A no-op where glibc's mallopt is
// missing. A GLIBC_TUNABLES setting of one of these knobs (mmap_threshold,
// trim_threshold, arena_max) wins over it.
void TuneMallocForClocks();

// Faults the heap's free top in ahead of the allocations, on a thread of its
// own (`pace-prefault`), so that allocating threads do not. glibc grows the
// heap from under its arena lock, and the first touch of each new page (a
// 2 MiB huge page zeroed by the kernel, slow on a virtual machine whose host
// backs the page only then) happened there: every thread that allocated
// meanwhile slept on that lock. In a model-scale MF run (8a) the workers slept
// 1.8 s of ~7 on it, and zeroing fresh pages was 42% of all CPU samples
// (docs/data-path.md, "Fresh pages under malloc's lock"). With this, each
// growth of the heap keeps `ahead_bytes` past the allocation (M_TOP_PAD), and
// the thread populates that pad (madvise MADV_POPULATE_WRITE, which writes
// nothing) as soon as the heap grows: the next allocations find their pages
// mapped. The resident size is at most `ahead_bytes` above the heap in use.
// Call once, at the start of main after the flags are read; later calls do
// nothing. Does nothing for ahead_bytes 0, under a sanitizer (they replace
// malloc), where glibc or the kernel (before 5.14) lacks what it needs, or
// where GLIBC_TUNABLES sets glibc.malloc.top_pad. Returns whether it started.
bool StartHeapPrefault(size_t ahead_bytes);

// The pad StartHeapPrefault is given for a process budget of
// `memory_budget_bytes` (0: none): 32 MiB, and under a budget at most a
// sixteenth of it, so that the pad stays within what the budget leaves over.
size_t HeapPrefaultBytes(uint64_t memory_budget_bytes);

// For tests: the bytes the prefault thread has populated so far.
uint64_t HeapPrefaultedBytes();

// Restarts the process (execv of its binary, /proc/self/exe's target, with
// the same `argv` and process id) with
// glibc.malloc.hugetlb=1 added to GLIBC_TUNABLES, so that its heap grows in
// transparent huge pages. Returns without it (and changes nothing) where that
// would not help or is not wanted: GLIBC_TUNABLES already sets
// glibc.malloc.hugetlb (=0 is the way to turn this off), the kernel's
// transparent huge pages are off ("[never]") or absent, glibc is older than
// 2.35, a sanitizer replaces malloc, the process runs in secure-execution
// mode (setuid or file capabilities: glibc ignores GLIBC_TUNABLES there), or
// the exec fails. Call first in main,
// before any thread starts, output is written or `argv` is changed.
void RestartWithHugePageHeap(char** argv);

// What RestartWithHugePageHeap would set GLIBC_TUNABLES to in this process
// ("" where it would run on): this build, glibc, kernel and environment.
std::string HugePageRestartTunables();

// The decision of RestartWithHugePageHeap, for tests: the GLIBC_TUNABLES
// value to restart with, or "" to run on. `tunables` is the current value
// (nullptr: unset), `thp_enabled` the contents of
// /sys/kernel/mm/transparent_hugepage/enabled ("" if absent), `glibc_version`
// gnu_get_libc_version()'s.
std::string HugePageTunables(const char* tunables, const std::string& thp_enabled,
                             const std::string& glibc_version);

}  // namespace pace

#endif  // PACE_COMMON_MALLOC_TUNING_H_
