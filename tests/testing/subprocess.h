// Test helpers for real processes: spawn a binary, read its stdout lines,
// kill it with a signal, wait for it. Used by multi-process integration and
// crash tests. Not thread-safe; one owner per Subprocess.
#ifndef PACE_TESTS_TESTING_SUBPROCESS_H_
#define PACE_TESTS_TESTING_SUBPROCESS_H_

#include <sys/types.h>

#include <cstdint>
#include <string>
#include <vector>

#include "common/scoped_temp_dir.h"
#include "common/status.h"

namespace pace::testing {

class Subprocess {
 public:
  Subprocess() = default;
  // Kills (SIGKILL) and reaps the child if it is still running.
  ~Subprocess();
  Subprocess(const Subprocess&) = delete;
  Subprocess& operator=(const Subprocess&) = delete;

  // Starts `argv[0]` with the arguments; its stdout is a pipe readable with
  // ReadLine, its stderr goes to `stderr_path` (or is inherited if empty).
  Status Start(const std::vector<std::string>& argv, const std::string& stderr_path = "");
  // The child gets this RLIMIT_NOFILE (set between fork and exec) on every
  // later Start.
  void SetOpenFileLimit(uint64_t soft, uint64_t hard) {
    nofile_soft_ = soft;
    nofile_hard_ = hard;
  }
  // Reads one line of the child's stdout (without '\n'), waiting up to timeout_ms.
  Status ReadLine(std::string* line, int timeout_ms);
  // Sends `sig` to the child.
  void Signal(int sig);
  // Waits for the child to exit, up to timeout_ms; *exit_status as waitpid's.
  Status Wait(int timeout_ms, int* wait_status);
  // SIGKILL + reap.
  void Kill();
  pid_t pid() const { return pid_; }
  bool running() const { return pid_ > 0; }

 private:
  pid_t pid_ = -1;
  int stdout_fd_ = -1;
  uint64_t nofile_soft_ = 0;  // 0: inherit
  uint64_t nofile_hard_ = 0;
  std::string buffer_;
};

// The directory holding the test binaries (and paced, pace_mf, …): the
// directory of /proc/self/exe.
std::string BinaryDir();

// A field of /proc/PID/status in KiB ("VmRSS", "VmHWM"); 0 if the process or
// the field is gone.
uint64_t ProcStatusKb(pid_t pid, const std::string& field);

// A fresh empty temporary directory, removed by the destructor.
using TempDir = ::pace::ScopedTempDir;

// Starts `paced` on an ephemeral loopback port and returns its port, parsed
// from its "paced listening on HOST:PORT" line. `extra` flags are appended.
// Tests not about authentication: unless `extra` has --token_file=F,
// --insecure or --noinsecure (paced's default: a token created in
// DATA_DIR/token), --insecure is added. With `metrics_port`, its metrics
// port is parsed from the "paced metrics on HOST:PORT" line (0 if there was
// none: `extra` has no --metrics_listen).
Status StartPaced(Subprocess* proc, const std::string& data_dir, uint32_t shard,
                  uint32_t num_shards, uint32_t num_clients, const std::vector<std::string>& extra,
                  uint16_t* port, uint16_t fixed_port = 0, uint16_t* metrics_port = nullptr);

}  // namespace pace::testing

#endif  // PACE_TESTS_TESTING_SUBPROCESS_H_
