// Thread roles that layers check each other against. The transport (net/)
// marks its I/O threads; the store (storage/) refuses, in builds with
// PACE_ASSERT_STORE_THREADS, to touch RocksDB on one (docs/design.md,
// "Threads": transport threads only move frames).
//
// Thread-safety: each flag is thread-local; no locking.
#ifndef PACE_COMMON_THREAD_ROLE_H_
#define PACE_COMMON_THREAD_ROLE_H_

namespace pace {

namespace thread_role_internal {
inline thread_local bool transport_thread = false;
}  // namespace thread_role_internal

// Marks the calling thread as a transport I/O thread for the rest of its life.
inline void MarkTransportThread() { thread_role_internal::transport_thread = true; }
// True on a thread that called MarkTransportThread.
inline bool IsTransportThread() { return thread_role_internal::transport_thread; }

}  // namespace pace

#endif  // PACE_COMMON_THREAD_ROLE_H_
