// pacectl as a library: command parsing, dispatch and output, so tests can
// run commands in-process. pacectl_main.cc maps gflags onto CtlOptions and
// calls RunCtl. The commands and their output are documented in
// docs/pacectl.md.
//
// Thread-compatible: RunCtl uses only its arguments (and the stores or
// servers they name).
#ifndef PACE_TOOLS_CTL_CTL_H_
#define PACE_TOOLS_CTL_CTL_H_

#include <cstdint>
#include <ostream>
#include <set>
#include <string>
#include <vector>

namespace pace::ctl {

// Process exit codes (docs/pacectl.md, "Exit codes and errors").
inline constexpr int kExitOk = 0;
inline constexpr int kExitUserError = 1;   // bad usage, unknown table, I/O or connection failure
inline constexpr int kExitCorruption = 2;  // corrupt data found

struct CtlOptions {
  // Offline mode: the shard's data directory, opened read-only (works beside
  // a running paced). For `checkpoint restore`, the directory to restore into.
  // Default: "" (unset).
  // Several shards of one job: a comma-separated list (any order; each
  // store's identity names its shard). Accepted by tables, get and export.
  std::string data_dir;
  // Online mode: "host:port" of a paced. Exactly one of data_dir / server is
  // needed by most commands. Default: "" (unset).
  std::string server;
  // Online mode over a whole job: "host:port,..." of every shard, index =
  // shard id (as the clients' --servers). Default: "" (unset).
  std::string servers;
  // File holding the job's token (online). Default: "" (no token).
  std::string token_file;
  // Machine output: one JSON document on stdout. Default: false.
  bool json = false;
  // export: "csv" or "npy". Default: "" (required by export).
  std::string format;
  // export: the output file, "-" for stdout; checkpoint restore
  // --num_shards: the directory of the new shards' data dirs. Default: ""
  // (required by export and re-shard).
  std::string out;
  // scan: the first row to list. Default: 0.
  uint64_t start = 0;
  // scan: the most rows to list, 0 for all. Default: 0.
  uint64_t limit = 0;
  // export --format=npy: refuse arrays with more rows. Default: 50M.
  uint64_t max_rows = 50'000'000;
  // export --format=npy: the array's number of rows (e.g. the vocabulary
  // size); 0: max written row + 1. Default: 0.
  uint64_t rows = 0;
  // Online: time to connect and handshake, and to wait for each reply.
  // Defaults: 5000 ms, 30000 ms.
  int connect_timeout_ms = 5000;
  int timeout_ms = 30000;
  // RocksDB block cache of the offline store, MiB. Default: 32.
  uint32_t block_cache_mb = 32;
  // checkpoint restore: re-shard the checkpoints of every shard of a job
  // onto this many shards, written under `out` (docs/pacectl.md). 0: a plain
  // restore of one checkpoint into data_dir. Default: 0.
  uint32_t num_shards = 0;
  // get, scan, export: read checkpoint(s) instead of --data_dir: their dirs
  // (comma-separated, the shards of a job), or a shard clock whose checkpoint
  // is looked up in each --data_dir's checkpoints/. Default: "" (the store).
  std::string at;
  // diff: how many of the rows that changed most to list; 0: every changed
  // row. Default: 10.
  uint64_t top = 10;
  // Names of the flags the user set explicitly (without "--"), used to reject
  // flags that do not apply to the command. Empty: no such check.
  std::set<std::string> set_flags;
};

// Runs one command. `args` are the positional arguments (args[0] is the
// command, e.g. {"get", "w", "3", "4"}). Normal output goes to `out`;
// errors go to `err` as one line "pacectl: <message>". Returns an exit code.
int RunCtl(const std::vector<std::string>& args, const CtlOptions& options, std::ostream& out,
           std::ostream& err);

// The usage text printed by `pacectl --help` / `pacectl help`.
std::string UsageText();
// `pacectl COMMAND --help`: the command's usage, what it does, its modes and
// the flags it takes. `words` are the positional arguments before --help
// ("export", or "checkpoint", "create"); UsageText() if they name no command.
std::string CommandHelpText(const std::vector<std::string>& words);

}  // namespace pace::ctl

#endif  // PACE_TOOLS_CTL_CTL_H_
