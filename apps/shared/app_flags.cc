#include "apps/shared/app_flags.h"

#include <glog/logging.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <utility>

#include "common/malloc_tuning.h"
#include "common/memory_budget.h"
#include "common/token_file.h"

DEFINE_string(consistency, "essp", "consistency model of the model tables: bsp|ssp|essp|async|vap");
DEFINE_int32(staleness, 1,
             "staleness bound s (ssp, essp; must be 0 for bsp; ignored by async and vap)");
DEFINE_double(value_bound, 0,
              "vap: the value bound v: a worker may not start its next clock while the L1 norm "
              "of its process's unacknowledged updates to a row exceeds v (docs/design.md)");
DEFINE_int32(workers, 2, "worker threads in this process");
DEFINE_int64(clocks, 40,
             "clocks of the job: a fresh run does clocks 0..N-1; --resume continues up to N");
DEFINE_string(data_dir, "./pace-data", "embedded mode: the in-process shard's data directory");
DEFINE_string(servers, "", "shard servers host:port,... (index = shard id); empty: embedded");
DEFINE_int32(client_id, -1,
             "this process's id in [0, num_clients) (default: launcher environment, else 0)");
DEFINE_int32(num_clients, -1,
             "number of client processes of the job (default: launcher environment, else 1)");
DEFINE_string(token_file, "", "file holding the job's shared secret (as given to paced)");
DEFINE_string(job, "",
              "the job id of the shards (paced --job): a shard of another job is refused; "
              "empty: the first shard's, and every other shard must match it");
DEFINE_int64(memory_mb, 0,
             "this process's memory budget in MiB, split over the client's cache, open deltas "
             "and unacknowledged batches (50/20/10%, 20% reserved for batches in flight) and, "
             "embedded, the in-process shard's "
             "block cache, memtables and row cache (40% of the budget); the component flags "
             "below override their share when given (docs/operations.md, sizing); 0: each "
             "component at its default");
DEFINE_int64(cache_mb, 1024,
             "client row cache budget in MiB (default: its share of --memory_mb, else 1024)");
DEFINE_int64(open_delta_mb, 256,
             "bound on open (unsent) deltas, MiB: workers ahead of the process clock wait, the "
             "process clock's deltas leave early in parts (default: share of --memory_mb, else "
             "256)");
DEFINE_int64(unacked_mb, 256,
             "bound on sent, unacknowledged batches, MiB (default: share of --memory_mb, else "
             "256)");
DEFINE_int64(block_cache_mb, 256,
             "embedded mode: the shard's RocksDB block cache in MiB (default: its share of "
             "--memory_mb, else 256)");
DEFINE_int64(write_buffer_mb, 16,
             "embedded mode: one memtable of the shard, MiB; it keeps up to 3 (default: share "
             "of --memory_mb, else 16)");
DEFINE_int64(row_cache_mb, 512,
             "embedded mode: the shard's row cache in MiB, which holds the rows the clock log "
             "changed until they are written back (default: share of --memory_mb, else 512)");
DEFINE_bool(clock_log, true,
            "embedded mode: the shard writes each clock as one clock log record and rows back "
            "in bulk; false: every changed row to RocksDB per clock (the earlier write path)");
DEFINE_bool(benchmark_no_durability, false,
            "embedded mode, FOR MEASURING THE COST OF DURABILITY ONLY: the shard logs nothing, "
            "so a crash loses the updates since the last row write-back; a store not closed "
            "cleanly is then refused (never a default)");
DEFINE_bool(sync, false,
            "embedded mode: fsync the in-process shard's write-ahead log before every clock's "
            "batch is acknowledged (survives power loss; with --servers give paced --sync)");
DEFINE_int64(checkpoint_every, 0,
             "embedded mode: checkpoint the in-process shard every N shard clocks into "
             "DATA_DIR/checkpoints/clock-C (0: never; with --servers give paced the flag)");
DEFINE_int32(checkpoint_keep, 3,
             "embedded mode: periodic checkpoints to keep (the oldest are deleted)");
DEFINE_string(csv, "", "also write the per-clock lines to this CSV file");
DEFINE_uint64(seed, 1, "random seed (data order, initial values, sampling)");
DEFINE_bool(resume, false, "continue the job stored in the data dir / servers");
DEFINE_int64(eval_every, 1, "evaluate every N clocks (and at the last clock)");
DEFINE_int64(straggler_ms, 0, "experiments: delay a worker's clock by this many ms ...");
DEFINE_double(straggler_prob, 0.25, "... with this probability per worker per clock");
DEFINE_string(staleness_hist, "",
              "at the end, write this process's read-staleness histogram of the model tables "
              "(table,staleness,count) to this CSV file");
DEFINE_string(clock_trace, "",
              "experiments: write this process's running totals (blocked time, CPU, bytes, "
              "batches, reads, staleness) to this CSV file, a line per process clock "
              "(docs/experiments.md)");
DEFINE_bool(skip_bad_lines, false, "skip (and count) malformed input lines instead of failing");
DEFINE_double(minibatch, 1.0, "fraction of each worker's data processed per clock, in (0, 1]");
DEFINE_bool(baseline, false,
            "run the single-threaded, no-parameter-server baseline with the same update rule");
DEFINE_int64(wait_report_ms, 5000,
             "with several clients: after this long without progress, print whom the run waits "
             "for (0: never)");

namespace pace {
namespace apps {

std::vector<cli::FlagGroup> AppFlagGroups(const std::vector<std::string>& data,
                                          const std::vector<std::string>& model,
                                          const std::vector<std::string>& job,
                                          const std::vector<std::string>& output) {
  auto join = [](std::vector<std::string> a, const std::vector<std::string>& b) {
    a.insert(a.end(), b.begin(), b.end());
    return a;
  };
  return {
      {"data", join(data, {"skip_bad_lines"})},
      {"model", join(model, {"minibatch", "consistency", "staleness", "value_bound", "seed"})},
      {"job", join({"clocks", "workers", "data_dir", "resume", "sync", "clock_log",
                    "checkpoint_every", "checkpoint_keep", "benchmark_no_durability"},
                   join(job, {"eval_every", "baseline"}))},
      {"output", join(output, {"csv", "staleness_hist", "clock_trace"})},
      {"cluster (without --servers the run is embedded)",
       {"servers", "client_id", "num_clients", "token_file", "job", "wait_report_ms"}},
      {"memory",
       {"memory_mb", "cache_mb", "open_delta_mb", "unacked_mb", "block_cache_mb", "write_buffer_mb",
        "row_cache_mb"}},
      {"experiments", {"straggler_ms", "straggler_prob"}},
      {"logging", {"minloglevel"}},
  };
}

void SetFlagDefault(const char* name, const char* value) {
  gflags::SetCommandLineOptionWithMode(name, value, gflags::SET_FLAGS_DEFAULT);
}

void QuietLibraryLogs() {
  // glog registers its flags with gflags; if it does not, this is a no-op.
  SetFlagDefault("minloglevel", "1");
}

void ShowVerboseLogs() {
  if (FLAGS_v > 0 && !FlagWasSet("minloglevel")) FLAGS_minloglevel = 0;
}

void TuneHeap() {
  TuneMallocForClocks();
  if (FLAGS_servers.empty()) {
    StartHeapPrefault(
        HeapPrefaultBytes(static_cast<uint64_t>(std::max<int64_t>(0, FLAGS_memory_mb)) << 20));
  }
}

bool FlagWasSet(const char* name) {
  gflags::CommandLineFlagInfo info;
  return gflags::GetCommandLineFlagInfo(name, &info) && !info.is_default;
}

Status RunOptionsFromFlags(RunOptions* run) {
  RETURN_IF_ERROR(
      ParseConsistency(FLAGS_consistency, &run->consistency).WithPrefix("--consistency"));
  if (FLAGS_staleness < 0) return Status::InvalidArgument("--staleness must be >= 0");
  run->staleness = static_cast<uint32_t>(FLAGS_staleness);
  run->value_bound = FLAGS_value_bound;
  // bsp is s = 0 by definition; do not make users spell it out.
  if (run->consistency == Consistency::kBsp && !FlagWasSet("staleness")) run->staleness = 0;
  run->workers = FLAGS_workers;
  run->clocks = FLAGS_clocks;
  run->seed = FLAGS_seed;
  run->resume = FLAGS_resume;
  run->eval_every = FLAGS_eval_every;
  run->straggler_ms = FLAGS_straggler_ms;
  run->straggler_prob = FLAGS_straggler_prob;
  RETURN_IF_ERROR(ValidateRunOptions(*run));
  return OpenClockTrace(FLAGS_clock_trace).WithPrefix("--clock_trace");
}

namespace {

// A launcher (mpirun, srun) that started more than one process of an
// embedded run would start that many independent jobs on one data dir.
Status CheckNoLauncherWithoutServers() {
  for (const char* var : {"OMPI_COMM_WORLD_SIZE", "PMI_SIZE", "SLURM_NTASKS"}) {
    const char* v = std::getenv(var);
    if (v == nullptr) continue;
    long n = std::strtol(v, nullptr, 10);
    if (n > 1) {
      return Status::InvalidArgument(
          std::string("the launcher started ") + std::to_string(n) + " processes (" + var + "=" +
          v +
          ") but there is no --servers: an embedded run is one process; start paced shards "
          "and pass --servers=HOST:PORT,..., or run a single process (if this is the only one, "
          "say so with --num_clients=1)");
    }
  }
  return Status::OK();
}

}  // namespace

Status ClientOptionsFromFlags(ClientOptions* o) {
  *o = ClientOptions();
  // A component flag given explicitly overrides its share of --memory_mb;
  // one left at its default is derived (0 in the options).
  struct MemFlag {
    const char* name;
    int64_t value;
    size_t* field;
  };
  const MemFlag mem[] = {
      {"cache_mb", FLAGS_cache_mb, &o->cache_mb},
      {"open_delta_mb", FLAGS_open_delta_mb, &o->open_delta_mb},
      {"unacked_mb", FLAGS_unacked_mb, &o->unacked_mb},
      {"block_cache_mb", FLAGS_block_cache_mb, &o->embedded.block_cache_mb},
      {"write_buffer_mb", FLAGS_write_buffer_mb, &o->embedded.write_buffer_mb},
      {"row_cache_mb", FLAGS_row_cache_mb, &o->embedded.row_cache_mb},
  };
  constexpr int64_t kMaxMb = int64_t{1} << 24;
  if (FLAGS_memory_mb < 0 || FLAGS_memory_mb > kMaxMb) {
    return Status::InvalidArgument("--memory_mb must be in [0, " + std::to_string(kMaxMb) + "]");
  }
  o->memory_mb = static_cast<size_t>(FLAGS_memory_mb);
  if (o->memory_mb > 0) LimitMallocArenas();  // common/memory_budget.h
  for (const MemFlag& f : mem) {
    if (f.value < 1 || f.value > kMaxMb) {
      return Status::InvalidArgument(std::string("--") + f.name + " must be in [1, " +
                                     std::to_string(kMaxMb) + "]");
    }
    if (FlagWasSet(f.name)) *f.field = static_cast<size_t>(f.value);
  }
  if (FLAGS_data_dir.empty()) return Status::InvalidArgument("--data_dir must not be empty");
  o->data_dir = FLAGS_data_dir;
  o->embedded.sync = FLAGS_sync;
  o->embedded.clock_log = FLAGS_clock_log;
  o->embedded.durable = !FLAGS_benchmark_no_durability;
  if (FLAGS_checkpoint_every < 0) return Status::InvalidArgument("--checkpoint_every must be >= 0");
  if (FLAGS_checkpoint_keep < 1) return Status::InvalidArgument("--checkpoint_keep must be >= 1");
  o->embedded.checkpoint_every = FLAGS_checkpoint_every;
  o->embedded.checkpoint_keep = FLAGS_checkpoint_keep;
  if (!FLAGS_token_file.empty()) RETURN_IF_ERROR(ReadTokenFile(FLAGS_token_file, &o->token));
  if (!FLAGS_job.empty()) RETURN_IF_ERROR(CheckJobId(FLAGS_job, "--job"));
  o->job = FLAGS_job;
  const bool id_given = FlagWasSet("client_id") || FlagWasSet("num_clients");
  if (FLAGS_servers.empty()) {
    if (!(FlagWasSet("num_clients") && FLAGS_num_clients == 1)) {
      RETURN_IF_ERROR(CheckNoLauncherWithoutServers());
    }
    struct stat st;
    if (FLAGS_resume && ::stat(FLAGS_data_dir.c_str(), &st) != 0) {
      return Status::FailedPrecondition("--resume: the data dir " + FLAGS_data_dir +
                                        " does not exist, so there is no job to resume: run "
                                        "without --resume to start it (or fix --data_dir)");
    }
    if (id_given && (FLAGS_num_clients > 1 || FLAGS_client_id > 0)) {
      return Status::InvalidArgument(
          "--client_id/--num_clients need --servers (without it the run is embedded, one process)");
    }
    return Status::OK();
  }
  const std::pair<const char*, bool> embedded_only[] = {
      {"sync", FLAGS_sync},
      {"checkpoint_every", FLAGS_checkpoint_every > 0},
      {"checkpoint_keep", FlagWasSet("checkpoint_keep")}};
  for (const auto& [flag, given] : embedded_only) {
    if (given) {
      return Status::InvalidArgument(std::string("--") + flag +
                                     " is for embedded runs (the shard in this process); with "
                                     "--servers, start paced with --" +
                                     flag);
    }
  }
  RETURN_IF_ERROR(ParseServers(FLAGS_servers, o).WithPrefix("--servers"));
  if (id_given) {
    if (FLAGS_num_clients < 1) return Status::InvalidArgument("--num_clients must be >= 1");
    if (FLAGS_client_id < 0 || FLAGS_client_id >= FLAGS_num_clients) {
      return Status::InvalidArgument("--client_id must be in [0, --num_clients)");
    }
    o->client_id = static_cast<ClientId>(FLAGS_client_id);
    o->num_clients = static_cast<uint32_t>(FLAGS_num_clients);
  } else {
    ClientIdFromEnvironment(o);  // else the defaults: 0 of 1
  }
  return Status::OK();
}

namespace {

std::string Parent(const std::string& path) {
  std::string p = path;
  while (p.size() > 1 && p.back() == '/') p.pop_back();
  size_t slash = p.rfind('/');
  if (slash == std::string::npos) return ".";
  return slash == 0 ? "/" : p.substr(0, slash);
}

bool WritableDir(const std::string& dir) {
  struct stat st;
  return ::stat(dir.c_str(), &st) == 0 && S_ISDIR(st.st_mode) && ::access(dir.c_str(), W_OK) == 0;
}

}  // namespace

Status CheckOutputDir(const char* flag, const std::string& dir) {
  if (dir.empty()) return Status::OK();
  struct stat st;
  if (::stat(dir.c_str(), &st) == 0) {
    if (!S_ISDIR(st.st_mode)) {
      return Status::InvalidArgument(std::string("--") + flag + "=" + dir +
                                     " exists and is not a directory");
    }
    if (::access(dir.c_str(), W_OK) != 0) {
      return Status::InvalidArgument(std::string("--") + flag + "=" + dir + " is not writable");
    }
    return Status::OK();
  }
  if (!WritableDir(Parent(dir))) {
    return Status::InvalidArgument(std::string("--") + flag + "=" + dir + ": cannot create it (" +
                                   Parent(dir) + " is not a writable directory)");
  }
  return Status::OK();
}

Status CheckOutputFile(const char* flag, const std::string& path) {
  if (path.empty()) return Status::OK();
  struct stat st;
  if (::stat(path.c_str(), &st) == 0 && S_ISDIR(st.st_mode)) {
    return Status::InvalidArgument(std::string("--") + flag + "=" + path + " is a directory");
  }
  if (!WritableDir(Parent(path))) {
    return Status::InvalidArgument(std::string("--") + flag + "=" + path + ": " + Parent(path) +
                                   " is not a writable directory");
  }
  return Status::OK();
}

uint64_t PeakRssBytes() {
  FILE* f = std::fopen("/proc/self/status", "r");
  if (f == nullptr) return 0;
  char line[256];
  uint64_t kb = 0;
  while (std::fgets(line, sizeof(line), f) != nullptr) {
    if (std::strncmp(line, "VmHWM:", 6) == 0) {
      kb = std::strtoull(line + 6, nullptr, 10);
      break;
    }
  }
  std::fclose(f);
  return kb << 10;
}

void PrintMemorySummary(const ClientStats& stats, uint64_t app_data_bytes) {
  auto mib = [](uint64_t b) { return static_cast<double>(b) / (1 << 20); };
  std::string line = "# memory (MiB used/bound):";
  char buf[160];
  for (const ClientStats::MemoryComponent& c : stats.memory) {
    if (c.bound_bytes > 0) {
      std::snprintf(buf, sizeof(buf), " %s %.1f/%.0f", c.name.c_str(), mib(c.bytes),
                    mib(c.bound_bytes));
    } else {
      std::snprintf(buf, sizeof(buf), " %s %.1f", c.name.c_str(), mib(c.bytes));
    }
    line += buf;
  }
  if (stats.memory_budget_bytes > 0) {
    std::snprintf(buf, sizeof(buf), "; budget %.0f", mib(stats.memory_budget_bytes));
    line += buf;
  }
  std::snprintf(buf, sizeof(buf), "; app data %.1f; peak RSS %.1f", mib(app_data_bytes),
                mib(PeakRssBytes()));
  line += buf;
  if (stats.open_delta_waits > 0) {
    std::snprintf(buf, sizeof(buf), "; %llu Inc waits at the open-delta bound",
                  static_cast<unsigned long long>(stats.open_delta_waits));
    line += buf;
  }
  std::printf("%s\n", line.c_str());
}

void PrintCpuSummary(const CpuReading& cpu, double wall_seconds) {
  std::vector<std::pair<double, std::string>> kinds;
  double listed = 0;
  for (const auto& [kind, seconds] : cpu.by_kind) {
    listed += seconds;
    if (seconds >= 0.005) kinds.emplace_back(seconds, kind);
  }
  std::sort(kinds.rbegin(), kinds.rend());
  char buf[160];
  std::snprintf(buf, sizeof(buf),
                "# cpu (s) in the training loop: %.2f of %.2f s wall (%.2f cores):", cpu.process,
                wall_seconds, wall_seconds > 0 ? cpu.process / wall_seconds : 0.0);
  std::string line = buf;
  for (const auto& [seconds, kind] : kinds) {
    std::snprintf(buf, sizeof(buf), " %s %.2f,", kind.c_str(), seconds);
    line += buf;
  }
  std::snprintf(buf, sizeof(buf), " workers and threads that ended %.2f",
                std::max(0.0, cpu.process - listed));
  line += buf;
  std::printf("%s\n", line.c_str());
}

int UsageError(const char* program, const Status& s) {
  std::fprintf(stderr, "%s: %s\n", program, s.ToString().c_str());
  return 1;
}

}  // namespace apps
}  // namespace pace
