// Helpers of the memory-bound tests: run pace_memory_workload and collect its
// "key=value" lines; a process's VmHWM.
#ifndef PACE_TESTS_MEMORY_MEMORY_TEST_UTIL_H_
#define PACE_TESTS_MEMORY_MEMORY_TEST_UTIL_H_

#include <sys/types.h>
#include <sys/wait.h>

#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <map>
#include <string>
#include <vector>

#include "tests/testing/subprocess.h"

namespace pace::testing {

// Reads every stdout line of `proc` until it closes (or timeout_ms passes
// without a line) into key=value pairs; echoes them for the test log.
inline void CollectKeyValues(Subprocess* proc, const char* who, int timeout_ms,
                             std::map<std::string, std::string>* out) {
  std::string line;
  while (proc->ReadLine(&line, timeout_ms).ok()) {
    std::printf("[%s] %s\n", who, line.c_str());
    const size_t eq = line.find('=');
    if (eq != std::string::npos) (*out)[line.substr(0, eq)] = line.substr(eq + 1);
  }
  std::fflush(stdout);
}

inline uint64_t U64(const std::map<std::string, std::string>& kv, const std::string& key) {
  auto it = kv.find(key);
  return it == kv.end() ? 0 : std::strtoull(it->second.c_str(), nullptr, 10);
}

// VmHWM of a running process, bytes (0 if unknown).
inline uint64_t PeakRssOf(pid_t pid) {
  const std::string path = "/proc/" + std::to_string(pid) + "/status";
  FILE* f = std::fopen(path.c_str(), "r");
  if (f == nullptr) return 0;
  char line[256];
  uint64_t kb = 0;
  while (std::fgets(line, sizeof(line), f) != nullptr) {
    if (std::strncmp(line, "VmHWM:", 6) == 0) kb = std::strtoull(line + 6, nullptr, 10);
  }
  std::fclose(f);
  return kb << 10;
}

}  // namespace pace::testing

#endif  // PACE_TESTS_MEMORY_MEMORY_TEST_UTIL_H_
