#include "apps/shared/app_flags.h"

#include <cstdio>
#include <fstream>
#include <sstream>

DEFINE_string(consistency, "essp", "consistency model of the model tables: bsp|ssp|essp|async");
DEFINE_int32(staleness, 1, "staleness bound s (ssp, essp; must be 0 for bsp; ignored by async)");
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
DEFINE_int64(cache_mb, 1024, "client row cache budget in MiB");
DEFINE_int64(block_cache_mb, 256, "embedded mode: the shard's RocksDB block cache in MiB");
DEFINE_string(csv, "", "also write the per-clock lines to this CSV file");
DEFINE_uint64(seed, 1, "random seed (data order, initial values, sampling)");
DEFINE_bool(resume, false, "continue the job stored in the data dir / servers");
DEFINE_int64(eval_every, 1, "evaluate every N clocks (and at the last clock)");
DEFINE_int64(straggler_ms, 0, "experiments: delay a worker's clock by this many ms ...");
DEFINE_double(straggler_prob, 0.25, "... with this probability per worker per clock");
DEFINE_string(staleness_hist, "",
              "at the end, write this process's read-staleness histogram of the model tables "
              "(table,staleness,count) to this CSV file");
DEFINE_bool(skip_bad_lines, false, "skip (and count) malformed input lines instead of failing");
DEFINE_double(minibatch, 1.0, "fraction of each worker's data processed per clock, in (0, 1]");
DEFINE_bool(baseline, false,
            "run the single-threaded, no-parameter-server baseline with the same update rule");

namespace pace {
namespace apps {

void SetFlagDefault(const char* name, const char* value) {
  gflags::SetCommandLineOptionWithMode(name, value, gflags::SET_FLAGS_DEFAULT);
}

void QuietLibraryLogs() {
  // glog registers its flags with gflags; if it does not, this is a no-op.
  SetFlagDefault("minloglevel", "1");
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
  // bsp is s = 0 by definition; do not make users spell it out.
  if (run->consistency == Consistency::kBsp && !FlagWasSet("staleness")) run->staleness = 0;
  run->workers = FLAGS_workers;
  run->clocks = FLAGS_clocks;
  run->seed = FLAGS_seed;
  run->resume = FLAGS_resume;
  run->eval_every = FLAGS_eval_every;
  run->straggler_ms = FLAGS_straggler_ms;
  run->straggler_prob = FLAGS_straggler_prob;
  return ValidateRunOptions(*run);
}

namespace {

Status ReadToken(const std::string& path, std::string* token) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return Status::NotFound("cannot read --token_file=" + path);
  std::stringstream ss;
  ss << in.rdbuf();
  *token = ss.str();
  while (!token->empty() && (token->back() == '\n' || token->back() == '\r')) token->pop_back();
  if (token->empty()) return Status::InvalidArgument("--token_file=" + path + " is empty");
  return Status::OK();
}

}  // namespace

Status ClientOptionsFromFlags(ClientOptions* o) {
  *o = ClientOptions();
  if (FLAGS_cache_mb < 1) return Status::InvalidArgument("--cache_mb must be >= 1");
  if (FLAGS_block_cache_mb < 1) return Status::InvalidArgument("--block_cache_mb must be >= 1");
  o->cache_mb = static_cast<size_t>(FLAGS_cache_mb);
  o->embedded.block_cache_mb = static_cast<size_t>(FLAGS_block_cache_mb);
  if (FLAGS_data_dir.empty()) return Status::InvalidArgument("--data_dir must not be empty");
  o->data_dir = FLAGS_data_dir;
  if (!FLAGS_token_file.empty()) RETURN_IF_ERROR(ReadToken(FLAGS_token_file, &o->token));
  const bool id_given = FlagWasSet("client_id") || FlagWasSet("num_clients");
  if (FLAGS_servers.empty()) {
    if (id_given && (FLAGS_num_clients > 1 || FLAGS_client_id > 0)) {
      return Status::InvalidArgument(
          "--client_id/--num_clients need --servers (without it the run is embedded, one process)");
    }
    return Status::OK();
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

int UsageError(const char* program, const Status& s) {
  std::fprintf(stderr, "%s: %s\n", program, s.ToString().c_str());
  return 1;
}

}  // namespace apps
}  // namespace pace
