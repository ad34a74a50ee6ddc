// paced: a PaceDB shard server.
//
//   paced --listen=127.0.0.1:7100 --data_dir=DIR --shard=0 --num_shards=1 --num_clients=N
//         [--token_file=F | --insecure] [--sync] [--memory_mb=M] [--block_cache_mb=M]
//         [--row_cache_mb=M] [--max_frame_mb=M] [--checkpoint_every=K]
//
// SIGTERM/SIGINT: stop accepting, finish in-flight writes, close RocksDB, exit 0.
#include <gflags/gflags.h>
#include <glog/logging.h>
#include <signal.h>
#include <sys/stat.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <ctime>
#include <filesystem>
#include <memory>
#include <string>
#include <vector>

#include "common/data_dir.h"
#include "common/malloc_tuning.h"
#include "common/memory_budget.h"
#include "common/store_damage.h"
#include "common/token_file.h"
#include "net/address.h"
#include "net/metrics_http.h"
#include "net/server.h"
#include "server/metrics.h"
#include "server/shard_service.h"
#include "tools/cli/cli.h"

DEFINE_string(listen, "127.0.0.1:7100",
              "host:port to listen on (binds loopback unless told otherwise)");
DEFINE_string(data_dir, "", "the shard's data directory (created if missing); required");
DEFINE_uint32(shard, 0, "this shard's id in [0, num_shards)");
DEFINE_uint32(num_shards, 1, "number of shards in the job");
DEFINE_uint32(num_clients, 1, "number of client processes in the job (fixed at job start)");
DEFINE_string(token_file, "",
              "file holding the job's shared secret; empty: DATA_DIR/token, created (mode 0600) "
              "on first start");
DEFINE_string(job, "",
              "the job id the store belongs to (recorded at its creation; a store of another "
              "job is refused); clients of another job are refused; empty: the recorded one, "
              "or a random one for a new store");
DEFINE_bool(insecure, false,
            "no job token: any process that can connect may join the job as any client; "
            "refused on an address other than loopback unless --insecure_remote is given too");
DEFINE_bool(insecure_remote, false,
            "with --insecure: allow listening on an address other hosts can reach (any of them "
            "may then join the job as any client)");
DEFINE_bool(sync, false, "fsync the write-ahead log before acknowledging each batch");
DEFINE_uint32(memory_mb, 0,
              "the shard's memory budget, MiB: block cache 40%, memtables 40% (3 of them), row "
              "cache 20% (docs/operations.md, sizing); the component flags override their "
              "share when given; 0: each component at its default");
DEFINE_uint32(block_cache_mb, 256, "RocksDB block cache size, MiB");
DEFINE_uint32(write_buffer_mb, 16, "RocksDB memtable size, MiB");
DEFINE_uint32(memtable_switch_groups, 4,
              "flush the memtable early once it holds this many group commits' worth (small "
              "groups: fewer versions per row, faster inserts); 0: by --write_buffer_mb only");
DEFINE_uint32(row_cache_mb, 512,
              "in-memory cache of row values, MiB: the rows the clock log changed are held in "
              "it until they are written back in bulk (docs/storage-format.md section 15)");
DEFINE_bool(clock_log, true,
            "write each group commit as one clock log record and write rows back in bulk; "
            "false: write every changed row to RocksDB per group (the earlier write path)");
DEFINE_bool(allow_damaged_store, false,
            "serve a store whose SST checksums fail at start (logged) instead of refusing it "
            "with exit 2");
DEFINE_bool(verify_all_checksums, false,
            "at start, read every SST file and check its block checksums; by default only the "
            "files not verified at an earlier start (data dir file VERIFIED-SSTS) are read");
DEFINE_uint32(max_frame_mb, 64, "largest accepted frame, MiB");
DEFINE_uint32(max_read_replies_mb, 128,
              "Read replies held at once over all sessions (being read or queued for sending), "
              "MiB; beyond it a session with replies outstanding is told to retry; 0: no cap");
DEFINE_int32(io_threads, 2, "network I/O threads");
DEFINE_int32(max_connections, 4096,
             "connections open at once (also capped by the open-file limit minus "
             "--reserved_fds; at the cap the one waiting longest for its Hello is closed, and "
             "a new one is refused only when all are sessions); 0: only that cap");
DEFINE_int32(max_handshaking_connections, 256,
             "connections that have not sent their Hello yet; at the cap the one waiting "
             "longest is closed to make room; 0: no cap");
DEFINE_int32(reserved_fds, 256,
             "file descriptors kept free of connections for RocksDB's files and logs");
DEFINE_int32(handshake_timeout_ms, 10000, "close a connection that sends no Hello within this");
DEFINE_int32(frame_stall_timeout_ms, 30000,
             "close a session that stops sending in the middle of a frame for this long; 0: "
             "never");
DEFINE_int32(idle_timeout_ms, 0, "close a session that sends nothing for this long; 0: never");
DEFINE_int64(holdback_warn_ms, 10000,
             "warn naming the client that holds back the shard clock after this long");
DEFINE_int64(checkpoint_every, 0,
             "write a checkpoint every K shard clocks into --checkpoint_dir (0: never)");
DEFINE_string(checkpoint_dir, "", "where periodic checkpoints go; default DATA_DIR/checkpoints");
DEFINE_int32(checkpoint_keep, 3, "periodic checkpoints to keep (oldest are deleted)");
DEFINE_string(metrics_listen, "",
              "host:port serving Prometheus metrics at /metrics (port 0: any free port; "
              "empty: none); see docs/operations.md");

namespace pace {
namespace {

Status ValidateFlags() {
  if (FLAGS_data_dir.empty()) return Status::InvalidArgument("--data_dir is required");
  if (FLAGS_num_shards == 0) return Status::InvalidArgument("--num_shards must be >= 1");
  if (FLAGS_shard >= FLAGS_num_shards) {
    return Status::InvalidArgument("--shard=" + std::to_string(FLAGS_shard) +
                                   " must be < --num_shards=" + std::to_string(FLAGS_num_shards));
  }
  if (FLAGS_num_clients == 0 || FLAGS_num_clients > 65536) {
    return Status::InvalidArgument("--num_clients must be in [1, 65536]");
  }
  if (FLAGS_block_cache_mb == 0) return Status::InvalidArgument("--block_cache_mb must be >= 1");
  if (FLAGS_write_buffer_mb == 0) return Status::InvalidArgument("--write_buffer_mb must be >= 1");
  if (FLAGS_row_cache_mb > (1u << 24))
    return Status::InvalidArgument("--row_cache_mb is too large");
  if (FLAGS_max_frame_mb == 0 || FLAGS_max_frame_mb > 1024) {
    return Status::InvalidArgument("--max_frame_mb must be in [1, 1024]");
  }
  if (FLAGS_io_threads < 1 || FLAGS_io_threads > 64) {
    return Status::InvalidArgument("--io_threads must be in [1, 64]");
  }
  if (FLAGS_checkpoint_every < 0) return Status::InvalidArgument("--checkpoint_every must be >= 0");
  if (FLAGS_checkpoint_keep < 1) return Status::InvalidArgument("--checkpoint_keep must be >= 1");
  if (!FLAGS_job.empty()) RETURN_IF_ERROR(CheckJobId(FLAGS_job, "--job"));
  if (FLAGS_insecure && !FLAGS_token_file.empty()) {
    return Status::InvalidArgument("give --token_file or --insecure, not both");
  }
  if (FLAGS_insecure_remote && !FLAGS_insecure) {
    return Status::InvalidArgument("--insecure_remote goes with --insecure");
  }
  return Status::OK();
}

std::string Absolute(const std::string& path) {
  std::error_code ec;
  std::filesystem::path p = std::filesystem::absolute(path, ec);
  return ec ? path : p.lexically_normal().string();
}

// Where paced keeps the job token when --token_file is not given.
std::string DefaultTokenPath() { return Absolute(FLAGS_data_dir + "/token"); }

// The job token (docs/operations.md, "Tokens"): --token_file's, or
// DATA_DIR/token, created on the first start. *path = the file it came from.
Status LoadToken(std::string* token, std::string* path) {
  if (!FLAGS_token_file.empty()) {
    *path = Absolute(FLAGS_token_file);
    return ReadTokenFile(FLAGS_token_file, token);
  }
  *path = DefaultTokenPath();
  bool created = false;
  RETURN_IF_ERROR(ReadOrCreateTokenFile(*path, token, &created));
  if (created) {
    LOG(INFO) << "created the job token " << *path
              << " (mode 0600): clients need --token_file=" << *path;
    return Status::OK();
  }
  // A token found in the data dir must be this user's own.
  RETURN_IF_ERROR(CheckOwnTokenFile(*path));
  struct stat st;
  if (stat(path->c_str(), &st) == 0 && (st.st_mode & 077) != 0) {
    LOG(WARNING) << "the job token " << *path << " is readable by other users (mode " << std::oct
                 << (st.st_mode & 0777) << std::dec << "): chmod 600 " << *path;
  }
  return Status::OK();
}

// "at most 120 connections (32 before their handshake)".
std::string LimitsText(const net::ConnectionLimits& l) {
  auto count = [](int n, const char* none) { return n > 0 ? std::to_string(n) : none; };
  return "at most " + count(l.max_connections, "unlimited") + " connections (" +
         count(l.max_handshaking_connections, "any number") + " before their handshake)";
}

// What to do about a store that cannot be opened, appended to its error.
std::string OpenErrorHint(const Status& s) {
  const std::string& m = s.message();
  std::string hint;
  if (m.find("No space left on device") != std::string::npos) {
    hint =
        " (free space on that file system and start paced again; docs/operations.md "
        "section 12)";
  } else if (m.find("Too many open files") != std::string::npos) {
    hint = " (raise the open-file limit, ulimit -n, and start paced again)";
  } else if (m.find("' was requested") != std::string::npos && !FLAGS_job.empty()) {
    hint =
        " (a store keeps the job it was created for: start paced without --job, or with "
        "that job, or on another --data_dir)";
  } else if (m.rfind("refusing to serve a damaged store", 0) == 0) {
    hint = " (--allow_damaged_store serves it anyway)";
  }
  return hint;
}

// When the store in --data_dir was created for another number of shards or
// clients: the one line that says so and names the re-shard command. ""
// otherwise.
std::string ShardCountMismatch() {
  std::unique_ptr<ShardStore> store;
  if (!ShardStore::OpenForInspection(FLAGS_data_dir, 1, &store).ok()) return "";
  const ShardIdentity& id = store->identity();
  const std::string m = std::to_string(FLAGS_num_shards);
  const std::string how =
      ": the number changes only offline, from a checkpoint of every shard at one clock: "
      "pacectl checkpoint restore CKPT0,CKPT1,... --num_shards=" +
      m +
      (id.num_clients != FLAGS_num_clients ? " --num_clients=" + std::to_string(FLAGS_num_clients)
                                           : std::string()) +
      " --out=DIR, then start paced on DIR/shard-K (docs/operations.md, \"Restore onto another "
      "cluster\")\n";
  const std::string head = "paced: cannot open --data_dir=" + FLAGS_data_dir +
                           ": the store holds shard " + std::to_string(id.shard_id) +
                           " of a job of " + std::to_string(id.num_shards) + " shards";
  if (id.num_shards != FLAGS_num_shards) return head + ", not of " + m + how;
  if (id.num_clients != FLAGS_num_clients) {
    return head + " and " + std::to_string(id.num_clients) + " clients, not " +
           std::to_string(FLAGS_num_clients) + how;
  }
  return "";
}

// Fills the transport's options from the flags, reading --token_file now so
// that a bad one is refused before anything is created. Prints why not and
// returns false.
bool ServerOptionsFromFlags(net::ServerOptions* o, std::string* token_path) {
  Status s = net::ParseHostPort(FLAGS_listen, &o->host, &o->port);
  if (!s.ok()) {
    std::fprintf(stderr, "paced: --listen: %s\n", s.ToString().c_str());
    return false;
  }
  if (!FLAGS_insecure && !FLAGS_token_file.empty()) {
    s = LoadToken(&o->token, token_path);
    if (!s.ok()) {
      std::fprintf(stderr, "paced: %s\n", s.ToString().c_str());
      return false;
    }
    o->missing_token_hint =
        "pass --token_file=" + *token_path + " (the token paced was started with)";
  } else if (!FLAGS_insecure) {
    o->missing_token_hint = "pass --token_file=" + DefaultTokenPath() +
                            " (created by paced) or start paced with --insecure";
  }
  o->io_threads = FLAGS_io_threads;
  o->max_frame_bytes = FLAGS_max_frame_mb << 20;
  o->max_connections = FLAGS_max_connections;
  o->max_handshaking_connections = FLAGS_max_handshaking_connections;
  o->reserved_fds = FLAGS_reserved_fds;
  o->handshake_timeout_ms = FLAGS_handshake_timeout_ms;
  o->frame_stall_timeout_ms = FLAGS_frame_stall_timeout_ms;
  o->idle_timeout_ms = FLAGS_idle_timeout_ms;
  return true;
}

ShardServiceOptions ServiceOptionsFromFlags() {
  ShardServiceOptions options;
  options.data_dir = FLAGS_data_dir;
  options.holdback_warn_ms = FLAGS_holdback_warn_ms;
  options.max_reply_bytes = size_t{FLAGS_max_frame_mb} << 20;
  options.allow_damaged_store = FLAGS_allow_damaged_store;
  options.verify_all_checksums = FLAGS_verify_all_checksums;
  options.max_read_reply_bytes_total = size_t{FLAGS_max_read_replies_mb} << 20;
  options.store.shard_id = FLAGS_shard;
  options.store.num_shards = FLAGS_num_shards;
  options.store.num_clients = FLAGS_num_clients;
  options.store.sync = FLAGS_sync;
  options.store.clock_log = FLAGS_clock_log;
  options.store.job = FLAGS_job;
  // --memory_mb's shares, unless a component flag is given explicitly.
  if (FLAGS_memory_mb > 0) LimitMallocArenas();
  const ShardMemorySplit split = SplitShardBudget(FLAGS_memory_mb);
  auto component = [](const char* flag, uint32_t value, size_t share) -> size_t {
    gflags::CommandLineFlagInfo info;
    const bool given = gflags::GetCommandLineFlagInfo(flag, &info) && !info.is_default;
    return given || FLAGS_memory_mb == 0 ? value : share;
  };
  options.store.block_cache_mb =
      component("block_cache_mb", FLAGS_block_cache_mb, split.block_cache_mb);
  options.store.write_buffer_mb =
      component("write_buffer_mb", FLAGS_write_buffer_mb, split.write_buffer_mb);
  options.store.row_cache_mb = component("row_cache_mb", FLAGS_row_cache_mb, split.row_cache_mb);
  options.store.max_write_buffer_number = kMemtablesPerShard;
  options.store.memtable_switch_groups = FLAGS_memtable_switch_groups;
  // Holdback warnings and periodic checkpoints run on the service's own
  // housekeeping thread (as in embedded mode).
  options.checkpoint_every = FLAGS_checkpoint_every;
  options.checkpoint_dir = FLAGS_checkpoint_dir;
  options.checkpoint_keep = FLAGS_checkpoint_keep;
  return options;
}

// Refuses --insecure on an address other hosts can reach (unless
// --insecure_remote) and warns about --insecure. Prints why and returns false.
bool CheckInsecure(const std::string& where, bool loopback) {
  if (FLAGS_insecure && !loopback) {
    if (!FLAGS_insecure_remote) {
      std::fprintf(stderr,
                   "paced: --insecure on %s, an address other hosts can reach, would let any of "
                   "them join the job as any client: drop --insecure (paced creates a token), "
                   "listen on 127.0.0.1, or add --insecure_remote\n",
                   where.c_str());
      return false;
    }
    LOG(WARNING) << "--insecure --insecure_remote: no job token on " << where
                 << ", an address other hosts can reach: ANY host that can connect to it can "
                    "join the job as any client, read every row and change any";
  } else if (FLAGS_insecure) {
    LOG(WARNING) << "--insecure: no job token; any process that can connect to " << where
                 << " can join the job as any client";
  }
  return true;
}

// Opens --data_dir (created private, mode 0700, if missing, whatever the
// umask; one that cannot be reached is refused in words, before RocksDB sees
// it) and the service on it. *existed: the store was there. Prints why not and
// returns paced's exit code (2 for a damaged store); 0 when open.
int OpenService(const ShardServiceOptions& options, std::unique_ptr<ShardService>* service,
                bool* existed) {
  bool created = false;
  Status s = PrepareDataDir(FLAGS_data_dir, &created);
  if (s.ok()) s = PathExists(FLAGS_data_dir + "/CURRENT", existed);
  if (!s.ok()) {
    std::fprintf(stderr, "paced: cannot open --data_dir=%s: %s\n", FLAGS_data_dir.c_str(),
                 s.ToString().c_str());
    return 1;
  }
  if (created) VLOG(1) << "created --data_dir=" << FLAGS_data_dir << " (mode 0700)";
  // Damage is named by the file it is in (an SST, the MANIFEST or CURRENT, a
  // write-ahead log).
  s = CheckCurrentFile(FLAGS_data_dir);
  if (s.ok()) s = ShardService::Open(options, service);
  s = ClassifyStoreCorruption(FLAGS_data_dir, s);
  if (s.ok()) return 0;
  const std::string mismatch =
      s.code() == StatusCode::kInvalidArgument ? ShardCountMismatch() : std::string();
  if (!mismatch.empty()) {
    std::fputs(mismatch.c_str(), stderr);
    return 1;
  }
  const std::string hint = OpenErrorHint(s);
  std::fprintf(stderr, "paced: cannot open --data_dir=%s: %s%s\n", FLAGS_data_dir.c_str(),
               s.ToString().c_str(), hint.c_str());
  return s.code() == StatusCode::kCorruption ? 2 : 1;
}

// --metrics_listen's server, if asked for. Prints why not and returns false.
bool StartMetrics(const ShardServiceOptions& options, ShardService* service, net::Server* server,
                  std::unique_ptr<net::MetricsHttpServer>* metrics) {
  if (FLAGS_metrics_listen.empty()) return true;
  ShardMetricsLimits limits;
  limits.block_cache_bytes = uint64_t{options.store.block_cache_mb} << 20;
  limits.write_buffer_bytes = uint64_t{options.store.write_buffer_mb} << 20;
  limits.row_cache_bytes = uint64_t{options.store.row_cache_mb} << 20;
  limits.memory_budget_bytes = uint64_t{FLAGS_memory_mb} << 20;
  limits.sync = FLAGS_sync;
  Status s = net::MetricsHttpServer::Start(
      FLAGS_metrics_listen,
      [service, server, limits] { return RenderShardMetrics(service, server->stats(), limits); },
      metrics);
  if (!s.ok()) {
    std::fprintf(stderr, "paced: --metrics_listen: %s\n", s.ToString().c_str());
    return false;
  }
  std::printf("paced metrics on %s:%u\n", (*metrics)->host().c_str(), (*metrics)->port());
  return true;
}

// Waits for SIGINT or SIGTERM, or for the store to fail in a way this process
// cannot recover from (docs/operations.md): then stops with a clear message
// instead of answering every write with an error. Returns the exit code.
int WaitForShutdown(const sigset_t& signals, const ShardService& service) {
  int signo = 0;
  while (signo <= 0) {
    timespec timeout{1, 0};
    signo = sigtimedwait(&signals, nullptr, &timeout);
    Status fatal = service.fatal_error();
    if (signo <= 0 && !fatal.ok()) {
      std::fprintf(stderr,
                   "paced: %s\npaced: exiting; restore a checkpoint (pacectl checkpoint restore) "
                   "or repair the data dir, then restart paced\n",
                   fatal.ToString().c_str());
      return 2;
    }
  }
  LOG(INFO) << "paced: signal " << signo << ", shutting down";
  return 0;
}

int Run() {
  Status s = ValidateFlags();
  if (!s.ok()) {
    std::fprintf(stderr, "paced: %s\n", s.ToString().c_str());
    return 1;
  }
  net::ServerOptions server_options;
  std::string token_path;
  if (!ServerOptionsFromFlags(&server_options, &token_path)) return 1;
  const ShardServiceOptions options = ServiceOptionsFromFlags();

  // Block the signals before any thread starts so only sigtimedwait sees them.
  sigset_t signals;
  sigemptyset(&signals);
  sigaddset(&signals, SIGINT);
  sigaddset(&signals, SIGTERM);
  pthread_sigmask(SIG_BLOCK, &signals, nullptr);

  net::RaiseOpenFileLimit();  // before RocksDB opens its files
  // Bound before the store opens: a port in use creates no store.
  net::Server server(server_options);
  s = server.Listen();
  if (!s.ok()) {
    std::fprintf(stderr, "paced: cannot listen on %s: %s\n", FLAGS_listen.c_str(),
                 s.ToString().c_str());
    return 1;
  }
  if (!CheckInsecure(server_options.host + ":" + std::to_string(server.port()),
                     server.loopback())) {
    return 1;
  }
  std::unique_ptr<ShardService> service;
  bool existed = false;
  const int open_code = OpenService(options, &service, &existed);
  if (open_code != 0) return open_code;
  if (!FLAGS_insecure && FLAGS_token_file.empty()) {
    std::string token;
    s = LoadToken(&token, &token_path);
    if (s.ok()) s = server.SetToken(std::move(token));
    if (!s.ok()) {
      std::fprintf(stderr, "paced: cannot use the job token of --data_dir=%s: %s\n",
                   FLAGS_data_dir.c_str(), s.ToString().c_str());
      return 1;
    }
  }
  s = server.Start(service.get());
  if (!s.ok()) {
    std::fprintf(stderr, "paced: cannot listen on %s: %s\n", FLAGS_listen.c_str(),
                 s.ToString().c_str());
    return 1;
  }

  const auto& id = service->identity();
  auto tables = service->store()->ListTables();
  LOG(INFO) << "paced: shard " << id.shard_id << "/" << id.num_shards << ", " << id.num_clients
            << " client(s), job " << id.job << ", " << (existed ? "data_dir " : "new data_dir ")
            << FLAGS_data_dir << ", listening on " << server_options.host << ":" << server.port()
            << ", " << tables.size() << " table(s), shard clock " << service->ShardClock()
            << (FLAGS_sync ? ", sync" : "")
            << (FLAGS_insecure ? ", insecure (no token)" : ", token " + token_path) << ", "
            << LimitsText(server.limits());
  for (const auto& t : tables) VLOG(1) << "  table " << DescribeSchema(t);
  std::unique_ptr<net::MetricsHttpServer> metrics;
  if (!StartMetrics(options, service.get(), &server, &metrics)) return 1;
  // Machine-readable lines for scripts and tests (port 0 picks a free port).
  if (!token_path.empty()) std::printf("paced token file %s\n", token_path.c_str());
  std::printf("paced listening on %s:%u\n", server_options.host.c_str(), server.port());
  std::fflush(stdout);

  const int exit_code = WaitForShutdown(signals, *service);
  metrics.reset();
  server.Stop();    // stops accepting, closes sessions, waits for in-flight handlers
  service.reset();  // commits queued batches, flushes memtables, closes RocksDB
  if (exit_code != 0) return exit_code;
  LOG(INFO) << "paced: clean exit";
  return 0;
}

}  // namespace
}  // namespace pace

int main(int argc, char** argv) {
  pace::cli::ProgramInfo info;
  info.name = "paced";
  info.summary = "a PaceDB shard server";
  info.usage =
      "paced --listen=127.0.0.1:7100 --data_dir=DIR --shard=0 --num_shards=1 --num_clients=N\n"
      "      [--token_file=F | --insecure] [--sync]";
  info.groups = {
      {"store",
       {"data_dir", "sync", "clock_log", "checkpoint_every", "checkpoint_dir", "checkpoint_keep",
        "allow_damaged_store", "verify_all_checksums"}},
      {"cluster",
       {"listen", "shard", "num_shards", "num_clients", "job", "token_file", "insecure",
        "insecure_remote", "holdback_warn_ms"}},
      {"memory",
       {"memory_mb", "block_cache_mb", "write_buffer_mb", "row_cache_mb", "max_frame_mb",
        "max_read_replies_mb"}},
      {"threads", {"io_threads"}},
      {"connections",
       {"max_connections", "max_handshaking_connections", "reserved_fds", "handshake_timeout_ms",
        "frame_stall_timeout_ms", "idle_timeout_ms"}},
      {"logging", {"minloglevel"}},
  };
  info.footer = "SIGTERM/SIGINT: a clean stop. Documentation: README.md (\"paced\")";
  pace::cli::ParseCommandLine(info, &argc, &argv);
  FLAGS_logtostderr = true;
  pace::TuneMallocForClocks();
  google::InitGoogleLogging(argv[0]);
  return pace::Run();
}
