// Command-line flags shared by pace_mf and pace_lda (their common contract:
// --consistency, --staleness, --value_bound, --workers, --clocks, --data_dir, --servers,
// --client_id, --num_clients, --token_file, --memory_mb (and the per-component
// --cache_mb, --open_delta_mb, --unacked_mb, --block_cache_mb,
// --write_buffer_mb, --row_cache_mb overriding its shares), --sync,
// --csv, --seed, --resume, plus --eval_every, --straggler_ms,
// --straggler_prob, --staleness_hist, --clock_trace, --skip_bad_lines, --minibatch,
// --baseline), and their conversion into RunOptions and ClientOptions.
#ifndef PACE_APPS_SHARED_APP_FLAGS_H_
#define PACE_APPS_SHARED_APP_FLAGS_H_

#include <gflags/gflags.h>

#include <string>
#include <vector>

#include "apps/shared/ps_runtime.h"
#include "client/pace.h"
#include "common/status.h"
#include "common/thread_cpu.h"
#include "tools/cli/cli.h"

DECLARE_string(consistency);
DECLARE_int32(staleness);
DECLARE_double(value_bound);
DECLARE_int32(workers);
DECLARE_int64(clocks);
DECLARE_string(data_dir);
DECLARE_string(servers);
DECLARE_int32(client_id);
DECLARE_int32(num_clients);
DECLARE_string(token_file);
DECLARE_string(job);
DECLARE_int64(memory_mb);
DECLARE_int64(cache_mb);
DECLARE_int64(open_delta_mb);
DECLARE_int64(unacked_mb);
DECLARE_int64(block_cache_mb);
DECLARE_int64(write_buffer_mb);
DECLARE_int64(row_cache_mb);
DECLARE_bool(sync);
DECLARE_bool(clock_log);
DECLARE_bool(benchmark_no_durability);
DECLARE_string(csv);
DECLARE_uint64(seed);
DECLARE_bool(resume);
DECLARE_int64(eval_every);
DECLARE_int64(straggler_ms);
DECLARE_double(straggler_prob);
DECLARE_string(staleness_hist);
DECLARE_string(clock_trace);
DECLARE_bool(skip_bad_lines);
DECLARE_double(minibatch);
DECLARE_bool(baseline);
DECLARE_int64(wait_report_ms);

namespace pace {
namespace apps {

// The --help groups of an app: data / model / job / output / cluster / memory
// / experiments / logging, the app's own flags first in each.
std::vector<cli::FlagGroup> AppFlagGroups(const std::vector<std::string>& data,
                                          const std::vector<std::string>& model,
                                          const std::vector<std::string>& job,
                                          const std::vector<std::string>& output);

// Changes a shared flag's default for this binary; call before parsing.
void SetFlagDefault(const char* name, const char* value);

// Makes the embedded shard's INFO logging opt-in (--minloglevel=0) so the
// per-clock lines stay readable; call before parsing.
void QuietLibraryLogs();
// After parsing: --v=N (N > 0) without --minloglevel shows the lines it asks
// for (VLOG writes at INFO, which QuietLibraryLogs' default hides); an
// explicit --minloglevel wins.
void ShowVerboseLogs();

// After parsing, before any thread starts: the heap settings of a training
// process (TuneMallocForClocks), and in embedded mode (no --servers) the
// heap's pages faulted in ahead (StartHeapPrefault, its pad sized by
// --memory_mb). Over TCP the client ran no faster with the prefault (8f) and
// peaked 60-100 MB higher (docs/data-path.md).
void TuneHeap();

// True if the flag was given on the command line.
bool FlagWasSet(const char* name);

// RunOptions from the flags. InvalidArgument naming the flag.
Status RunOptionsFromFlags(RunOptions* run);

// ClientOptions from the flags: embedded on --data_dir without --servers
// (--sync: the embedded shard fsyncs before every Ack; InvalidArgument with
// --servers, where paced has its own --sync);
// otherwise --servers, with --client_id/--num_clients, or when those are not
// given the launcher's environment (OMPI_COMM_WORLD_RANK/SIZE, PMI_RANK/SIZE,
// SLURM_PROCID/NTASKS), else 0 of 1. The token is the --token_file contents
// without trailing newlines (as paced reads it).
Status ClientOptionsFromFlags(ClientOptions* options);

// Checks, before any work, that `dir` (the value of --`flag`) can be written:
// an existing writable directory, or a missing one whose parent is a writable
// directory. Creates nothing. InvalidArgument naming the flag otherwise.
Status CheckOutputDir(const char* flag, const std::string& dir);
// The same for an output file (its directory must exist and be writable).
Status CheckOutputFile(const char* flag, const std::string& path);

// This process's peak resident set (VmHWM of /proc/self/status), bytes; 0 if
// unknown.
uint64_t PeakRssBytes();

// Prints the CPU a training loop took (CpuBetween of readings around it):
// "# cpu (s) in the training loop: <all> of <wall> s wall (<cores> cores):
// <kind> <s>, ...; workers and threads that ended <s>", the kinds of the
// threads alive at its end, largest first.
void PrintCpuSummary(const CpuReading& cpu, double wall_seconds);

// The end-of-run memory line: every component's bytes against its bound
// (ClientStats::memory), the process budget, the peak RSS and the part of it
// that is the app's own data (`app_data_bytes`: ratings, documents, ...), as
// "# memory: ..." on stdout.
void PrintMemorySummary(const ClientStats& stats, uint64_t app_data_bytes);

// Prints "<program>: <message>" on stderr and returns exit code 1.
int UsageError(const char* program, const Status& s);

}  // namespace apps
}  // namespace pace

#endif  // PACE_APPS_SHARED_APP_FLAGS_H_
