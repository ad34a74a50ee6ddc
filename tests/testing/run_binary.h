// Test helpers for running the project's binaries (pace_mf, pace_gen, paced,
// pacectl, ...) found in BinaryDir(): start one, read its stdout to the end,
// wait for it and collect its stderr. Not thread-safe; one owner per call.
#ifndef PACE_TESTS_TESTING_RUN_BINARY_H_
#define PACE_TESTS_TESTING_RUN_BINARY_H_

#include <string>
#include <vector>

#include "common/read_file.h"
#include "common/status.h"
#include "tests/testing/subprocess.h"

namespace pace::testing {

inline constexpr int kRunTimeoutMs = 120000;

struct RunResult {
  int exit_code = -1;  // -1: killed by a signal, or did not exit in time
  std::string out;     // stdout
  std::string err;     // stderr (and why the run failed, if it could not be run)
};

using ::pace::ReadFile;  // common/read_file.h
// The lines of `text`, without their '\n'.
std::vector<std::string> Lines(const std::string& text);

// Starts BinaryDir()/args[0] with the rest of `args`; stderr goes to
// `err_path`. `env` entries (NAME=VALUE) are set through /usr/bin/env.
Status StartBinary(Subprocess* p, std::vector<std::string> args, const std::string& err_path,
                   const std::vector<std::string>& env = {});
// Reads the child's stdout to its end, waits for it (timeout_ms for each)
// and reads `err_path`.
RunResult FinishBinary(Subprocess* p, const std::string& err_path, int timeout_ms = kRunTimeoutMs);
// StartBinary + FinishBinary.
RunResult RunBinary(const std::vector<std::string>& args, const std::string& err_path,
                    const std::vector<std::string>& env = {});

}  // namespace pace::testing

#endif  // PACE_TESTS_TESTING_RUN_BINARY_H_
