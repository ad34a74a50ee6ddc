// A GoogleTest fixture for tests that run the project's binaries: a fresh
// temporary directory per test and Run, which starts a binary from
// BinaryDir() with its stderr in a file of its own there. Header-only (for
// tests that link GoogleTest and pace_test_process). Not thread-safe.
#ifndef PACE_TESTS_TESTING_BINARY_TEST_H_
#define PACE_TESTS_TESTING_BINARY_TEST_H_

#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "tests/testing/run_binary.h"
#include "tests/testing/subprocess.h"

namespace pace::testing {

class BinaryTest : public ::testing::Test {
 protected:
  // `name` in the test's temporary directory.
  std::string Path(const std::string& name) const { return dir_.path() + "/" + name; }
  // A new stderr file in the temporary directory.
  std::string NextErrPath() { return Path("stderr." + std::to_string(runs_++)); }
  // RunBinary with the next stderr file.
  RunResult Run(const std::vector<std::string>& args, const std::vector<std::string>& env = {}) {
    return RunBinary(args, NextErrPath(), env);
  }

  TempDir dir_;
  int runs_ = 0;
};

}  // namespace pace::testing

#endif  // PACE_TESTS_TESTING_BINARY_TEST_H_
