// ReadFile: the whole contents of a small file (a log, a report, a token) as
// a string; the one copy the tests and tools share. Header-only; thread-safe.
#ifndef PACE_COMMON_READ_FILE_H_
#define PACE_COMMON_READ_FILE_H_

#include <fstream>
#include <sstream>
#include <string>

namespace pace {

// The whole file; "" if it cannot be read.
inline std::string ReadFile(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

}  // namespace pace

#endif  // PACE_COMMON_READ_FILE_H_
