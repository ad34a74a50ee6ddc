// pacectl: argument checking, dispatch to offline/online commands, and the
// mapping of a command's Status to the exit code.
#include "tools/ctl/ctl.h"

#include <algorithm>
#include <cstring>
#include <map>

#include "common/store_damage.h"
#include "tools/ctl/commands.h"
#include "tools/ctl/value_format.h"

namespace pace::ctl {

namespace {

enum class Mode { kOffline, kOnline };
using Handler = Status (*)(const CtlContext&, const Args&);

// One command (or checkpoint subcommand).
struct CommandSpec {
  const char* name;
  const char* usage;
  size_t min_args;
  size_t max_args;                       // SIZE_MAX: unbounded
  Handler offline;                       // nullptr: not available offline
  Handler online;                        // nullptr: not available online
  std::vector<const char*> extra_flags;  // flags beyond the global ones
};

constexpr size_t kUnbounded = SIZE_MAX;

const std::vector<CommandSpec>& Commands() {
  static const std::vector<CommandSpec> commands = {
      {"tables", "tables", 0, 0, OfflineTables, OnlineTables, {}},
      {"describe", "describe NAME", 1, 1, OfflineDescribe, OnlineDescribe, {}},
      {"get",
       "get NAME ROW [ROW...] [--at=CKPT|CLOCK]",
       2,
       kUnbounded,
       OfflineGet,
       OnlineGet,
       {"at"}},
      {"scan",
       "scan NAME [--start=R] [--limit=N] [--at=CKPT|CLOCK]",
       1,
       1,
       OfflineScan,
       OnlineScan,
       {"start", "limit", "at"}},
      {"stats", "stats", 0, 0, OfflineStats, OnlineStats, {}},
      {"export",
       "export NAME --format=csv|npy --out=FILE [--rows=N] [--max_rows=N] [--at=CKPT|CLOCK]",
       1,
       1,
       OfflineExport,
       OnlineExport,
       {"format", "out", "rows", "max_rows", "at"}},
      {"diff", "diff CKPT_A CKPT_B TABLE [--top=K]", 3, 3, OfflineDiff, nullptr, {"top"}},
      {"import", "import NAME FILE.npy|FILE.csv", 2, 2, OfflineImport, nullptr, {}},
      {"verify", "verify", 0, 0, OfflineVerify, nullptr, {}},
      {"checkpoint create",
       "checkpoint create DIR  (--data_dir: the store)",
       1,
       1,
       CheckpointCreate,
       nullptr,
       {}},
      {"checkpoint list", "checkpoint list [DIR]", 0, 1, CheckpointList, nullptr, {}},
      {"checkpoint restore",
       "checkpoint restore CKPT --data_dir=NEWDIR | CKPT,CKPT,... --num_shards=M --out=DIR",
       1,
       kUnbounded,
       CheckpointRestore,
       nullptr,
       {"num_shards", "out"}},
  };
  return commands;
}

// Flags every command accepts (mode, output and tuning flags).
const std::vector<const char*>& GlobalFlags() {
  static const std::vector<const char*> flags = {
      "data_dir",           "server",     "servers",       "token_file", "json",
      "connect_timeout_ms", "timeout_ms", "block_cache_mb"};
  return flags;
}

bool Contains(const std::vector<const char*>& v, const std::string& s) {
  return std::any_of(v.begin(), v.end(), [&](const char* x) { return s == x; });
}

const CommandSpec* FindCommand(const std::string& name) {
  for (const CommandSpec& c : Commands()) {
    if (name == c.name) return &c;
  }
  return nullptr;
}

Status CheckFlags(const CommandSpec& cmd, const CtlOptions& o) {
  for (const std::string& flag : o.set_flags) {
    if (Contains(GlobalFlags(), flag) || Contains(cmd.extra_flags, flag)) continue;
    std::string owners;
    for (const CommandSpec& c : Commands()) {
      if (Contains(c.extra_flags, flag)) owners += std::string(owners.empty() ? "" : ", ") + c.name;
    }
    return Status::InvalidArgument("--" + flag + " does not apply to '" + cmd.name + "'" +
                                   (owners.empty() ? "" : " (only to " + owners + ")"));
  }
  return Status::OK();
}

// Chooses the handler for `cmd` from --data_dir / --server.
Status ChooseHandler(const CommandSpec& cmd, const CtlOptions& o, Handler* handler) {
  const std::string name = cmd.name;
  if (!o.data_dir.empty() && (!o.server.empty() || !o.servers.empty())) {
    return Status::InvalidArgument(
        "pass either --data_dir (offline) or --server (online), not both");
  }
  if (!o.server.empty() && !o.servers.empty()) {
    return Status::InvalidArgument(
        "pass either --server=HOST:PORT (one shard) or --servers=A,B,... (every shard of the "
        "job), not both");
  }
  if (SplitList(o.data_dir).size() > 1 && name != "tables" && name != "get" && name != "export" &&
      name != "import") {
    return Status::InvalidArgument("'" + name +
                                   "' takes one --data_dir; several (the shards of a job) work "
                                   "with tables, get, export and import");
  }
  if (!o.server.empty() || !o.servers.empty()) {
    if (name == "import") {
      return Status::InvalidArgument(
          "'import' writes the store, so it works offline only: stop the job's paced (or do it "
          "before the job starts) and pass --data_dir=DIR (every shard's: --data_dir=A,B)");
    }
    if (cmd.online == nullptr) {
      return Status::InvalidArgument(
          "'" + name + "' works offline only: pass --data_dir=DIR instead of --server(s) " +
          "(offline inspection works while paced runs)" +
          (name == "checkpoint create" ? "; a running paced writes checkpoints itself with "
                                         "--checkpoint_every=K"
                                       : ""));
    }
    *handler = cmd.online;
    return Status::OK();
  }
  const bool reshard = name == "checkpoint restore" && o.set_flags.count("num_shards") != 0;
  if (reshard && !o.data_dir.empty()) {
    return Status::InvalidArgument(
        "checkpoint restore --num_shards=M writes the new shards under --out=DIR, not "
        "--data_dir");
  }
  if (o.data_dir.empty() && name != "checkpoint list" && name != "diff" && !reshard) {
    if (name == "checkpoint restore") {
      return Status::InvalidArgument(
          "checkpoint restore needs --data_dir=NEWDIR (where to restore one shard), or "
          "--num_shards=M --out=DIR (the checkpoints of every shard onto M shards)");
    }
    return Status::InvalidArgument(
        "'" + name + "' needs --data_dir=DIR (offline)" +
        (cmd.online != nullptr ? " or --server=HOST:PORT (online)" : ""));
  }
  for (const char* online_only : {"token_file", "connect_timeout_ms", "timeout_ms"}) {
    if (o.set_flags.count(online_only) != 0) {
      return Status::InvalidArgument("--" + std::string(online_only) +
                                     " applies only with --server");
    }
  }
  *handler = cmd.offline;
  return Status::OK();
}

// Splits args into the command spec and its positional arguments.
Status ParseCommand(const std::vector<std::string>& args, const CommandSpec** cmd, Args* rest) {
  if (args.empty()) {
    return Status::InvalidArgument("no command given; try 'pacectl --help'");
  }
  std::string name = args[0];
  size_t first_arg = 1;
  if (name == "checkpoint") {
    if (args.size() < 2) {
      return Status::InvalidArgument("checkpoint needs a subcommand: create, list or restore");
    }
    name += " " + args[1];
    first_arg = 2;
  }
  *cmd = FindCommand(name);
  if (*cmd == nullptr) {
    if (args[0] == "checkpoint") {
      return Status::InvalidArgument("unknown checkpoint subcommand '" + args[1] +
                                     "' (create, list or restore)");
    }
    return Status::InvalidArgument("unknown command '" + args[0] +
                                   "' (commands: tables, describe, get, scan, stats, export, "
                                   "diff, import, checkpoint, verify; see 'pacectl --help')");
  }
  rest->assign(args.begin() + first_arg, args.end());
  const size_t n = rest->size();
  if (n < (*cmd)->min_args || n > (*cmd)->max_args) {
    return Status::InvalidArgument("wrong number of arguments for '" + name + "'; usage: pacectl " +
                                   (*cmd)->usage);
  }
  return Status::OK();
}

// Messages of these codes are user errors whose text says it all; other
// codes keep their name ("IOError: ...").
bool IsPlainUserError(StatusCode c) {
  return c == StatusCode::kInvalidArgument || c == StatusCode::kNotFound ||
         c == StatusCode::kAlreadyExists || c == StatusCode::kFailedPrecondition ||
         c == StatusCode::kUnavailable || c == StatusCode::kPermissionDenied ||
         c == StatusCode::kTimedOut;
}

}  // namespace

std::string UsageText() {
  std::string u =
      "pacectl: inspect, export, checkpoint and verify PaceDB shard stores.\n"
      "\n"
      "Offline (read-only, also while paced runs):  pacectl --data_dir=DIR COMMAND ...\n"
      "Online (against a running paced):            pacectl --server=HOST:PORT "
      "[--token_file=F] COMMAND ...\n"
      "A whole job:   --data_dir=A,B,... (offline: tables, get, export merged, import)\n"
      "               --servers=H:P,H:P,... (online, index = shard id: get, scan, export\n"
      "               routed by row; tables/describe/stats over all shards)\n"
      "\n"
      "Commands:\n";
  std::vector<std::vector<std::string>> rows;
  for (const CommandSpec& c : Commands()) {
    const std::string name = c.name;
    std::string modes = c.online != nullptr ? "offline or online" : "offline";
    if (name == "checkpoint list" || name == "checkpoint restore")
      modes = "no running store needed";
    rows.push_back({"  pacectl " + std::string(c.usage), "[" + modes + "]"});
  }
  u += AlignColumns(rows);
  u += "\n"
       "Flags:\n"
       "  --data_dir=DIR[,DIR]    the shard's data directory (offline mode; restore target);\n"
       "                          several: the shards of one job (also --data_dir=A --data_dir=B)\n"
       "  --server=HOST:PORT      a paced to ask (online mode)\n"
       "  --servers=H:P,H:P       every shard of the job, index = shard id (online mode)\n"
       "  --token_file=F          file holding the job token (online)\n"
       "  --json                  one JSON document on stdout\n"
       "  --start=R --limit=N     scan: first row, most rows (0: all; online: required)\n"
       "  --format=csv|npy --out=FILE --max_rows=N   export (npy: dense tables, at most N rows;\n"
       "                          default 50000000; row ids in FILE.rows.npy)\n"
       "  --rows=N                export npy: the array's rows (e.g. the vocabulary size);\n"
       "                          online export (required): rows 0..N-1\n"
       "  --connect_timeout_ms=MS --timeout_ms=MS   online time limits (defaults 5000, 30000)\n"
       "  --block_cache_mb=M      RocksDB block cache for offline reads (default 32)\n"
       "  --at=CKPT[,CKPT]|CLOCK  get/scan/export: read checkpoint(s), or the checkpoint of a\n"
       "                          shard clock in DATA_DIR/checkpoints (offline)\n"
       "  --top=K                 diff: rows that changed most to list (default 10; 0: all)\n"
       "  --num_shards=M --out=DIR   checkpoint restore: re-shard every shard's checkpoint\n"
       "                          onto M shards, data dirs DIR/shard-0 ...\n"
       "\n"
       "Exit codes: 0 ok, 1 user error (message on stderr), 2 corruption found.\n"
       "Documentation: docs/pacectl.md\n";
  return u;
}

namespace {

const char* CommandSummary(const std::string& name) {
  static const std::map<std::string, const char*> summaries = {
      {"tables", "lists the tables: id, name, kind, type, width, consistency, initializer"},
      {"describe", "one table's schema, row count estimate and clocks"},
      {"get", "the current value of rows (composed as a client would read them)"},
      {"scan", "lists the stored rows of a table in row order"},
      {"stats", "the store's clocks (shard clock, per-client applied clocks) and sizes"},
      {"export", "writes a table as CSV or a NumPy .npy array"},
      {"import",
       "creates or fills a dense table from a NumPy .npy array (rows 0..N-1) or a CSV of\n"
       "ROW,V0,... lines (the export format): one atomic batch per shard, recorded with the\n"
       "shard clock; a schema mismatch is refused and nothing is written. Opens the store\n"
       "for writing: the job's paced (or app) must not be running"},
      {"verify", "checks every record of the store; exit 2 if corruption is found"},
      {"diff",
       "per-row change norms of a table between two checkpoints (or stores; a comma list for\n"
       "the shards of a job) and the rows that changed most"},
      {"checkpoint create", "a consistent RocksDB checkpoint of the store (hard links) + manifest"},
      {"checkpoint list", "the checkpoints in DIR (default: DATA_DIR/checkpoints)"},
      {"checkpoint restore",
       "makes a new data dir from a checkpoint; with --num_shards=M --out=DIR, turns the\n"
       "checkpoints of every shard of a job (one clock) into the data dirs of M shards,\n"
       "DIR/shard-0 ..., each row placed by the same hash, the clocks carried over"},
  };
  auto it = summaries.find(name);
  return it == summaries.end() ? "" : it->second;
}

std::string FlagHelp(const std::string& flag) {
  static const std::map<std::string, const char*> help = {
      {"data_dir",
       "--data_dir=DIR[,DIR]    the shard's data directory (offline); several: one job"},
      {"server", "--server=HOST:PORT      a running paced (online)"},
      {"servers", "--servers=H:P,H:P       every shard of a running job, index = shard id"},
      {"rows",
       "--rows=N                npy: the array's rows (default: max written row + 1);\n"
       "                          online (required): export rows 0..N-1"},
      {"token_file", "--token_file=F          file holding the job token (online)"},
      {"json", "--json                  one JSON document on stdout"},
      {"connect_timeout_ms", "--connect_timeout_ms=MS online: time to connect (default 5000)"},
      {"timeout_ms", "--timeout_ms=MS         online: time per reply (default 30000)"},
      {"block_cache_mb", "--block_cache_mb=M      offline: RocksDB block cache (default 32)"},
      {"start", "--start=R               first row to list (default 0)"},
      {"limit",
       "--limit=N               most rows to list (default 0: all);\n"
       "                          online (required): rows START..START+N-1"},
      {"format", "--format=csv|npy        output format (npy: dense tables)"},
      {"out",
       "--out=FILE|DIR          export: output file, - for stdout; re-shard: the directory\n"
       "                          of the new shards' data dirs (must not exist or be empty)"},
      {"max_rows", "--max_rows=N            npy: refuse arrays with more rows (default 50000000)"},
      {"num_shards", "--num_shards=M          re-shard onto M shards (with --out=DIR)"},
      {"at",
       "--at=CKPT[,CKPT]|CLOCK  read checkpoint dir(s) instead of --data_dir, or the\n"
       "                          checkpoint of shard clock CLOCK in DATA_DIR/checkpoints"},
      {"top", "--top=K                 rows that changed most to list (default 10; 0: all)"},
  };
  auto it = help.find(flag);
  return it == help.end() ? "--" + flag : it->second;
}

}  // namespace

std::string CommandHelpText(const std::vector<std::string>& words) {
  const CommandSpec* cmd = nullptr;
  if (!words.empty()) {
    cmd = FindCommand(words[0]);
    if (cmd == nullptr && words.size() >= 2) cmd = FindCommand(words[0] + " " + words[1]);
  }
  if (cmd == nullptr) return UsageText();
  const std::string name = cmd->name;
  std::string u =
      "usage: pacectl [--data_dir=DIR[,DIR] | --server=HOST:PORT | --servers=H:P,H:P] " +
      std::string(cmd->usage) + "\n\n" + CommandSummary(name) + ".\n\n";
  u += cmd->online != nullptr ? "Offline on --data_dir, or online with --server / --servers.\n"
                              : "Offline only (--data_dir).\n";
  u += "\nFlags:\n";
  for (const char* f : cmd->extra_flags) u += "  " + FlagHelp(f) + "\n";
  for (const char* f : GlobalFlags()) {
    if (cmd->online == nullptr &&
        (std::strcmp(f, "server") == 0 || std::strcmp(f, "servers") == 0 ||
         std::strcmp(f, "token_file") == 0 || std::strcmp(f, "connect_timeout_ms") == 0 ||
         std::strcmp(f, "timeout_ms") == 0)) {
      continue;
    }
    u += "  " + FlagHelp(f) + "\n";
  }
  u += "\nExit codes: 0 ok, 1 user error, 2 corruption found. Documentation: docs/pacectl.md\n";
  return u;
}

namespace {

// A corruption reworded to name the damaged file (ClassifyStoreCorruption);
// a read-only open that failed because CURRENT is damaged (which reads as a
// writer changing the store) becomes the Corruption it is.
Status NameTheDamage(const CtlOptions& options, const Status& s) {
  if (options.data_dir.empty()) return s;
  const std::vector<std::string> dirs = SplitList(options.data_dir);
  if (s.code() == StatusCode::kCorruption) {
    return ClassifyStoreCorruption(dirs.size() == 1 ? dirs[0] : "DATA_DIR", s);
  }
  if (s.code() == StatusCode::kUnavailable &&
      s.message().find("CURRENT/MANIFEST") != std::string::npos) {
    for (const std::string& dir : dirs) {
      Status current = CheckCurrentFile(dir);
      if (!current.ok()) return current;
    }
  }
  return s;
}

}  // namespace

int RunCtl(const std::vector<std::string>& args, const CtlOptions& options, std::ostream& out,
           std::ostream& err) {
  if (!args.empty() && (args[0] == "help" || args[0] == "--help")) {
    out << CommandHelpText(std::vector<std::string>(args.begin() + 1, args.end()));
    return kExitOk;
  }
  const CommandSpec* cmd = nullptr;
  Args rest;
  Handler handler = nullptr;
  Status s = ParseCommand(args, &cmd, &rest);
  if (s.ok()) s = CheckFlags(*cmd, options);
  CtlOptions resolved = options;
  if (s.ok() && !options.at.empty()) {
    s = !options.server.empty() || !options.servers.empty()
            ? Status::InvalidArgument("--at reads checkpoints, offline: drop --server(s)")
            : ResolveAt(&resolved);
  }
  if (s.ok()) s = ChooseHandler(*cmd, resolved, &handler);
  if (s.ok()) {
    CtlContext ctx{resolved, out, err};
    s = handler(ctx, rest);
  }
  out.flush();
  if (s.ok()) return kExitOk;
  s = NameTheDamage(resolved, s);
  err << "pacectl: " << (IsPlainUserError(s.code()) ? s.message() : s.ToString()) << "\n";
  return s.code() == StatusCode::kCorruption ? kExitCorruption : kExitUserError;
}

}  // namespace pace::ctl
