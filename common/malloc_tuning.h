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
#ifndef PACE_COMMON_MALLOC_TUNING_H_
#define PACE_COMMON_MALLOC_TUNING_H_

namespace pace {

// Keeps freed heap memory for reuse instead of returning it to the kernel at
// once: buffers up to 1 GiB come from the heap (not mmap), and the heap's top
// is trimmed only past 1 GiB free (an explicit malloc_trim, as paced's after a
// flood of replies, still returns it; a larger top pad would make that trim
// keep the pad), and all threads allocate from one arena. Call once at
// the start of main, before threads start. A no-op where glibc's mallopt is
// missing. An explicit GLIBC_TUNABLES setting of the same knobs wins.
void TuneMallocForClocks();

}  // namespace pace

#endif  // PACE_COMMON_MALLOC_TUNING_H_
