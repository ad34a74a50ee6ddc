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
// machine the first touch of a page can cost as much as its zeroing many
// times over. The heap stays in 4 KiB pages: on a virtual machine whose host
// takes freed memory back (a balloon's free page reporting), 2 MiB pages are
// the ones it took and has to back again, at ~450 MB/s here against ~2.5
// GB/s for 4 KiB pages freed recently (docs/data-path.md, "The heap in 4 KiB
// pages again"). GLIBC_TUNABLES=glibc.malloc.hugetlb=1 still asks glibc for
// huge pages, where they pay.
#ifndef PACE_COMMON_MALLOC_TUNING_H_
#define PACE_COMMON_MALLOC_TUNING_H_

#include <cstddef>
#include <cstdint>

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
// heap from under its arena lock, and the first touch of each new page
// (zeroed by the kernel, slow on a virtual machine whose host backs the page
// only then) happened there: every thread that allocated
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

}  // namespace pace

#endif  // PACE_COMMON_MALLOC_TUNING_H_
