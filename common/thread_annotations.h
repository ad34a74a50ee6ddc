// Clang thread-safety analysis attributes (Abseil's base/thread_annotations.h
// names). They expand to nothing on compilers without the analysis, so GCC
// builds are unchanged; `make thread-safety` builds with clang and
// -Wthread-safety -Werror. Use them with pace::Mutex (common/mutex.h):
// libstdc++'s std::mutex carries no capability attributes.
#ifndef PACE_COMMON_THREAD_ANNOTATIONS_H_
#define PACE_COMMON_THREAD_ANNOTATIONS_H_

#if defined(__clang__)
#define PACE_THREAD_ANNOTATION_(x) __attribute__((x))
#else
#define PACE_THREAD_ANNOTATION_(x)
#endif

#define CAPABILITY(x) PACE_THREAD_ANNOTATION_(capability(x))
#define SCOPED_CAPABILITY PACE_THREAD_ANNOTATION_(scoped_lockable)
#define GUARDED_BY(x) PACE_THREAD_ANNOTATION_(guarded_by(x))
#define PT_GUARDED_BY(x) PACE_THREAD_ANNOTATION_(pt_guarded_by(x))
#define ACQUIRED_BEFORE(...) PACE_THREAD_ANNOTATION_(acquired_before(__VA_ARGS__))
#define ACQUIRED_AFTER(...) PACE_THREAD_ANNOTATION_(acquired_after(__VA_ARGS__))
#define REQUIRES(...) PACE_THREAD_ANNOTATION_(requires_capability(__VA_ARGS__))
#define REQUIRES_SHARED(...) PACE_THREAD_ANNOTATION_(requires_shared_capability(__VA_ARGS__))
#define EXCLUSIVE_LOCKS_REQUIRED(...) REQUIRES(__VA_ARGS__)
#define SHARED_LOCKS_REQUIRED(...) REQUIRES_SHARED(__VA_ARGS__)
#define ACQUIRE(...) PACE_THREAD_ANNOTATION_(acquire_capability(__VA_ARGS__))
#define ACQUIRE_SHARED(...) PACE_THREAD_ANNOTATION_(acquire_shared_capability(__VA_ARGS__))
#define RELEASE(...) PACE_THREAD_ANNOTATION_(release_capability(__VA_ARGS__))
#define RELEASE_SHARED(...) PACE_THREAD_ANNOTATION_(release_shared_capability(__VA_ARGS__))
#define RELEASE_GENERIC(...) PACE_THREAD_ANNOTATION_(release_generic_capability(__VA_ARGS__))
#define TRY_ACQUIRE(...) PACE_THREAD_ANNOTATION_(try_acquire_capability(__VA_ARGS__))
#define TRY_ACQUIRE_SHARED(...) PACE_THREAD_ANNOTATION_(try_acquire_shared_capability(__VA_ARGS__))
#define EXCLUDES(...) PACE_THREAD_ANNOTATION_(locks_excluded(__VA_ARGS__))
#define LOCKS_EXCLUDED(...) EXCLUDES(__VA_ARGS__)
#define ASSERT_CAPABILITY(x) PACE_THREAD_ANNOTATION_(assert_capability(x))
#define RETURN_CAPABILITY(x) PACE_THREAD_ANNOTATION_(lock_returned(x))
#define NO_THREAD_SAFETY_ANALYSIS PACE_THREAD_ANNOTATION_(no_thread_safety_analysis)

#endif  // PACE_COMMON_THREAD_ANNOTATIONS_H_
