// The parameter-server plumbing pace_mf and pace_lda share: run options, the
// job's tables (fresh start vs --resume), worker threads, straggler delays,
// per-process measurements, and the reader that turns the per-clock stats
// rows (aggregated in PaceDB by every worker of every process) into report
// lines as soon as they are complete.
//
// Uses only the public client API (client/pace.h).
#ifndef PACE_APPS_SHARED_PS_RUNTIME_H_
#define PACE_APPS_SHARED_PS_RUNTIME_H_

#include <atomic>
#include <cstdint>
#include <functional>
#include <map>
#include <mutex>
#include <string>
#include <vector>

#include "client/pace.h"
#include "common/schema.h"
#include "common/status.h"

namespace pace {
namespace apps {

// Settings both apps share (flags in app_flags.h).
struct RunOptions {
  // Consistency model and staleness bound of the model tables.
  // Defaults: essp, 1.
  Consistency consistency = Consistency::kEssp;
  uint32_t staleness = 1;
  // vap: the value bound v of the model tables (> 0); 0 otherwise.
  // Default: 0.
  double value_bound = 0;
  // Worker threads in this process. Default: 2.
  int workers = 2;
  // The job's last clock + 1: a fresh run does clocks 0 .. clocks-1; a resumed
  // run continues from the client's resume clock up to the same end.
  // Default: 40.
  int64_t clocks = 40;
  uint64_t seed = 1;
  // Continue a stored job instead of requiring a fresh data dir. Default: false.
  bool resume = false;
  // Evaluate (test RMSE / log-likelihood) every this many clocks and at the
  // last one. Default: 1.
  int64_t eval_every = 1;
  // Each worker sleeps straggler_ms at the start of a clock with probability
  // straggler_prob (0 ms: never). Defaults: 0, 0.25.
  int64_t straggler_ms = 0;
  double straggler_prob = 0.25;
};

// InvalidArgument naming the flag for a bad value.
Status ValidateRunOptions(const RunOptions& o);

// The staleness of the model tables' schemas: 0 for bsp, s for ssp/essp; for
// async and vap (no clock bound), 64, which makes the client's histogram track
// staleness 0..64 exactly.
uint32_t EffectiveBound(const RunOptions& o);

// "essp s=1", "bsp", "async (no bound)", "vap v=0.5 (no clock bound)".
std::string DescribeConsistency(const RunOptions& o);

// Sets schema->consistency, ->staleness and ->value_bound from the run options.
void ApplyConsistency(const RunOptions& o, TableSchema* schema);

// The per-clock stats table: dense f64 rows of MeasureCols::kCount +
// app_columns, row = clock. Same consistency as the model (async with s = 0
// for async runs, whose rows are read once each, when the job clock has
// passed them).
TableSchema StatsTableSchema(const std::string& name, uint32_t app_columns, const RunOptions& o);

// Creates (or opens) the job's tables. Errors with advice:
// FailedPrecondition if the store already holds a job (resume clock > 0) and
// !o.resume; AlreadyExists if a table exists with another schema (a run with
// other --rank/--topics/--consistency/...).
Status OpenJobTables(Client* client, const RunOptions& o, const std::vector<TableSchema>& schemas,
                     std::vector<Table>* tables);

// Whether a worker should Worker::Prefetch the model rows clock `c` will
// touch: on the first clock of the run (every row is a miss: one batched
// round trip instead of one per row) and on every clock under bsp/ssp (stale
// rows are pulled, never pushed). Under essp/async later clocks need nothing.
bool ShouldPrefetch(const RunOptions& o, ClockT c, ClockT start_clock);

// Sleeps straggler_ms with probability straggler_prob, as a pure function of
// (seed, client, worker, clock). Returns the seconds slept.
double MaybeStraggle(const RunOptions& o, ClientId client, int worker, ClockT clock);

// Runs fn(worker_index, worker, failed) on `n` threads, each with its own
// registered Worker. If one returns an error, *failed is set so the others
// can stop at their next clock; returns the first error.
Status RunWorkers(Client* client, int n,
                  const std::function<Status(int, Worker*, const std::atomic<bool>&)>& fn);

// The calling thread's scheduler times since it started (Linux
// /proc/thread-self/schedstat): on a CPU, and runnable but waiting for one.
// The rest of its wall time it was blocked (sleeping). Zeros if unreadable.
struct ThreadSchedTimes {
  int64_t run_ns = 0;
  int64_t wait_ns = 0;
};
ThreadSchedTimes ReadThreadSchedTimes();

// Says when a worker's own copies of model rows (RowBuffer), kept within a
// clock, have become older than the client's cache: under essp/async a push
// that completes during the clock (Client::PushedVersion grows) makes a newer
// version of every subscribed row visible. Newer() is true once per such
// growth since the last call; the worker then adds its copies' changes (Inc:
// the same sums, in two parts) and drops the copies, so that its later reads
// get the pushed value with its own changes (read-my-writes). Never true under
// bsp/ssp (nothing is pushed). One atomic load per shard per call. Not
// thread-safe: one per worker.
class PushWatch {
 public:
  explicit PushWatch(const Client* client) : client_(client), seen_(client->PushedVersion()) {}
  bool Newer() {
    const Version v = client_->PushedVersion();
    if (v <= seen_) return false;
    seen_ = v;
    return true;
  }

 private:
  const Client* const client_;
  Version seen_;
};

// Experiments: makes every ProcessMeasure of this process write one CSV line
// per process clock to `path` (truncated; empty: none, the default), with this
// process's running totals, so that a script can tell where each clock's time
// and traffic went and how far the processes were apart. Columns: clock,
// t_s (CLOCK_MONOTONIC seconds when the process's last worker ended the
// clock; one time base for every process on a machine), workers,
// get_blocked_s, clock_blocked_s (summed over workers), cpu_s (the process's
// user + system CPU), bytes_sent, bytes_received, batches_sent, rows_sent,
// rows_received (ClientStats), then over the measured tables rows_fetched,
// pushes_applied, reads and staleness_sum (the sum of c - v over their
// reads). Call once, before the workers start. IOError if `path` cannot be
// written.
Status OpenClockTrace(const std::string& path);

// This process's measurements per clock: blocked seconds and the read
// staleness of the named tables, from Client::Stats(). Each worker calls
// EndClock at the end of each of its clocks; the last of the process's
// workers to end clock c adds everything recorded since the previous such
// snapshot into its stats row. Per clock this is approximate (a fast worker's
// reads of clock c+1 may count for c), but every read is counted exactly once
// and the last clock is complete. Thread-safe.
class ProcessMeasure {
 public:
  ProcessMeasure(Client* client, std::vector<std::string> tables, int workers);
  void EndClock(ClockT clock, double* cols);

 private:
  struct Snapshot {
    std::vector<uint64_t> hist;
    double mean = 0;
  };
  void TakeDelta(ClockT clock, double* cols);  // REQUIRES: mu_ held

  Client* const client_;
  const std::vector<std::string> tables_;
  const int workers_;
  std::mutex mu_;
  std::map<ClockT, int> arrived_;         // protected by mu_
  std::map<std::string, Snapshot> last_;  // protected by mu_
  double last_blocked_ = 0;               // protected by mu_
};

// Hands each per-clock stats row to a callback once it is complete (every
// worker of every process has added its clock-r part), in clock order.
// Used by the reporting worker only. Not thread-safe.
class StatsRowReader {
 public:
  using RowFn = std::function<Status(ClockT clock, const std::vector<double>& row)>;
  // Reads rows first_clock .. end_clock - 1. `client`: for the job clock of
  // async runs (nullptr: their rows wait for Finish).
  StatsRowReader(Table stats, const RunOptions& o, ClockT first_clock, ClockT end_clock,
                 Client* client = nullptr);

  // Call after each Clock(): reads rows r <= worker->clock() - 1 - s, which
  // the read rule guarantees complete, and prefetches the row the next Poll
  // reads. Async runs: reads the rows below the job clock (Client::JobClock,
  // one round trip per shard).
  Status Poll(Worker* worker, const RowFn& fn);
  // Call at the end of the run: waits for every process to finish `end_clock`
  // clocks (GlobalBarrier) and reads the remaining rows.
  Status Finish(Worker* worker, ClockT end_clock, const RowFn& fn);
  // The reporter's end of a run of `num_clients` processes (pace_mf's and
  // pace_lda's). A run `stopped` at StopClock() (SIGINT/SIGTERM) reports
  // every clock before the stop clock, so that the lines (and a --csv that
  // --resume appends to) have no gap; with other processes, which stop at
  // their own clocks, the final barrier could wait for ever, so it reports
  // nothing more then. Otherwise: Finish(end_clock) (the caller then
  // collects its model).
  Status FinishRun(Worker* worker, ClockT end_clock, bool stopped, uint32_t num_clients,
                   const RowFn& fn);

 private:
  Status ReadRow(Worker* worker, ClockT r, const RowFn& fn, bool* complete);
  Status PollAsync(Worker* worker, const RowFn& fn);

  const Table stats_;
  Client* const client_;
  const bool poll_;
  const int64_t lag_;
  const ClockT end_clock_;
  ClockT next_;
};

// Writes this process's read-staleness histograms of the named tables (from
// Client::Stats()) to `path` as CSV: a header "table,staleness,count", then
// one line per bucket of each table in `tables` order: staleness 0..s, and
// s + 1 meaning "more than s" (only async tables count there). Tables not in
// `stats` are skipped. IOError if the file cannot be written.
Status WriteStalenessHistogram(const ClientStats& stats, const std::vector<std::string>& tables,
                               const std::string& path);

// Seconds since `start` on the steady clock.
double SecondsSince(int64_t start_ns);
int64_t NowNs();

}  // namespace apps
}  // namespace pace

#endif  // PACE_APPS_SHARED_PS_RUNTIME_H_
