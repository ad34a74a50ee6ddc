// Names the calling thread as `top -H`, `ps -L`, `perf report --sort comm` and
// gdb show it: "pace-writer", "pace-reader", "pace-worker-0", ... The kernel
// keeps 15 bytes of a name; a longer one is cut.
#ifndef PACE_COMMON_THREAD_NAME_H_
#define PACE_COMMON_THREAD_NAME_H_

#include <pthread.h>

#include <string>

namespace pace {

inline void SetThreadName(const std::string& name) {
  const std::string cut = name.substr(0, 15);
  pthread_setname_np(pthread_self(), cut.c_str());
}

}  // namespace pace

#endif  // PACE_COMMON_THREAD_NAME_H_
