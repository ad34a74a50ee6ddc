// Which sanitizer instruments this translation unit, the same with GCC and
// clang: PACE_ASAN (AddressSanitizer) and PACE_TSAN (ThreadSanitizer) are
// defined to 1 when it is on. GCC says so with __SANITIZE_ADDRESS__ and
// __SANITIZE_THREAD__; clang 14 defines neither and answers
// __has_feature(address_sanitizer) / __has_feature(thread_sanitizer).
#ifndef PACE_COMMON_SANITIZERS_H_
#define PACE_COMMON_SANITIZERS_H_

#if defined(__SANITIZE_ADDRESS__)
#define PACE_ASAN 1
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
#define PACE_ASAN 1
#endif
#endif

#if defined(__SANITIZE_THREAD__)
#define PACE_TSAN 1
#elif defined(__has_feature)
#if __has_feature(thread_sanitizer)
#define PACE_TSAN 1
#endif
#endif

#endif  // PACE_COMMON_SANITIZERS_H_
