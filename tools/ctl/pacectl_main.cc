// pacectl: PaceDB's inspection CLI (docs/pacectl.md).
//
//   pacectl --data_dir=DIR COMMAND ...            offline, read-only
//   pacectl --server=HOST:PORT COMMAND ...        online, as an observer
//
// Exit code 0 on success, 1 on a user error, 2 when corruption is found.
#include <gflags/gflags.h>
#include <glog/logging.h>

#include <cstring>
#include <initializer_list>
#include <iostream>
#include <string>
#include <vector>

#include "common/malloc_tuning.h"
#include "tools/cli/cli.h"
#include "tools/ctl/ctl.h"

DEFINE_string(data_dir, "", "the shard's data directory (offline mode; checkpoint restore target)");
DEFINE_string(server, "", "host:port of a running paced (online mode)");
DEFINE_string(servers, "", "host:port,... of every shard of a running job (online mode)");
DEFINE_string(token_file, "", "file holding the job token (online mode)");
DEFINE_bool(json, false, "print one JSON document on stdout");
DEFINE_string(format, "", "export: csv or npy");
DEFINE_string(out, "",
              "export: output file, - for stdout; checkpoint restore --num_shards: output dir");
DEFINE_uint64(start, 0, "scan: first row to list");
DEFINE_uint64(limit, 0, "scan: most rows to list (0: all)");
DEFINE_uint64(rows, 0, "export --format=npy: the array's rows (0: max written row + 1)");
DEFINE_uint64(max_rows, 50000000, "export --format=npy: refuse arrays with more rows");
DEFINE_int32(connect_timeout_ms, 5000, "online: time to connect and handshake");
DEFINE_int32(timeout_ms, 30000, "online: time to wait for each reply");
DEFINE_uint32(block_cache_mb, 32, "offline: RocksDB block cache, MiB");
DEFINE_string(at, "", "get/scan/export: read checkpoint dir(s), or the checkpoint of this clock");
DEFINE_uint64(top, 10, "diff: rows that changed most to list (0: every changed row)");
DEFINE_uint32(num_clients, 0,
              "checkpoint restore --num_shards: client processes of the new job (0: as before)");
DEFINE_uint32(num_shards, 0, "checkpoint restore: re-shard the job's checkpoints onto N shards");

namespace {

const char* const kFlagNames[] = {
    "data_dir",   "server",         "servers",    "token_file", "json",     "format",
    "out",        "start",          "limit",      "rows",       "max_rows", "connect_timeout_ms",
    "timeout_ms", "block_cache_mb", "num_shards", "at",         "top"};

// Every value of a repeated --data_dir (gflags keeps only the last), joined
// with commas.
std::string AllDataDirs(int argc, char** argv) {
  std::string dirs;
  for (int i = 1; i < argc; ++i) {
    if (std::strcmp(argv[i], "--") == 0) break;
    std::string a = argv[i];
    if (a.rfind("-data_dir", 0) == 0) a = "-" + a;
    std::string value;
    if (a.rfind("--data_dir=", 0) == 0) {
      value = a.substr(11);
    } else if (a == "--data_dir" && i + 1 < argc) {
      value = argv[++i];
    } else {
      continue;
    }
    if (!value.empty()) dirs += (dirs.empty() ? "" : ",") + value;
  }
  return dirs;
}

bool Has(int argc, char** argv, std::initializer_list<const char*> names) {
  for (int i = 1; i < argc; ++i) {
    if (std::strcmp(argv[i], "--") == 0) return false;
    for (const char* n : names) {
      if (std::strcmp(argv[i], n) == 0) return true;
    }
  }
  return false;
}

}  // namespace

int main(int argc, char** argv) {
  // `pacectl --help`, `pacectl COMMAND --help` (the words before it name the
  // command), `pacectl --version`; all exit 0.
  if (Has(argc, argv, {"--help", "-help", "-h", "--helpshort"})) {
    std::vector<std::string> words;
    for (int i = 1; i < argc; ++i) {
      if (argv[i][0] != '-') words.push_back(argv[i]);
    }
    std::cout << pace::ctl::CommandHelpText(words);
    return pace::ctl::kExitOk;
  }
  if (Has(argc, argv, {"--version", "-version"})) {
    std::cout << pace::cli::VersionText("pacectl") << "\n";
    return pace::ctl::kExitOk;
  }
  gflags::SetUsageMessage(pace::ctl::UsageText());
  FLAGS_logtostderr = true;
  FLAGS_minloglevel = 1;  // warnings and errors only; --minloglevel=0 for more
  const std::string all_data_dirs = AllDataDirs(argc, argv);
  gflags::ParseCommandLineFlags(&argc, &argv, true);
  pace::TuneMallocForClocks();
  google::InitGoogleLogging(argv[0]);

  pace::ctl::CtlOptions options;
  options.data_dir = FLAGS_data_dir.empty() ? FLAGS_data_dir : all_data_dirs;
  options.server = FLAGS_server;
  options.servers = FLAGS_servers;
  options.token_file = FLAGS_token_file;
  options.json = FLAGS_json;
  options.format = FLAGS_format;
  options.out = FLAGS_out;
  options.start = FLAGS_start;
  options.limit = FLAGS_limit;
  options.rows = FLAGS_rows;
  options.max_rows = FLAGS_max_rows;
  options.connect_timeout_ms = FLAGS_connect_timeout_ms;
  options.timeout_ms = FLAGS_timeout_ms;
  options.block_cache_mb = FLAGS_block_cache_mb;
  options.num_shards = FLAGS_num_shards;
  options.num_clients = FLAGS_num_clients;
  options.at = FLAGS_at;
  options.top = FLAGS_top;
  for (const char* name : kFlagNames) {
    if (!gflags::GetCommandLineFlagInfoOrDie(name).is_default) options.set_flags.insert(name);
  }
  std::vector<std::string> args(argv + 1, argv + argc);
  std::ios::sync_with_stdio(false);
  return pace::ctl::RunCtl(args, options, std::cout, std::cerr);
}
