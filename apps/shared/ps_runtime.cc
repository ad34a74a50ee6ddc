#include "apps/shared/ps_runtime.h"

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cmath>
#include <condition_variable>
#include <cstdio>
#include <cstring>
#include <memory>
#include <mutex>
#include <thread>

#include "apps/shared/random.h"
#include "apps/shared/report.h"
#include "apps/shared/stop_signal.h"
#include "common/thread_cpu.h"
#include "common/thread_name.h"

namespace pace {
namespace apps {

Status ValidateRunOptions(const RunOptions& o) {
  if (o.consistency == Consistency::kBsp && o.staleness != 0) {
    return Status::InvalidArgument("--consistency=bsp means --staleness=0 (got " +
                                   std::to_string(o.staleness) + ")");
  }
  if (o.staleness > 1000) return Status::InvalidArgument("--staleness must be in [0, 1000]");
  if (o.consistency == Consistency::kVap) {
    if (!(std::isfinite(o.value_bound) && o.value_bound > 0)) {
      return Status::InvalidArgument("--consistency=vap needs --value_bound > 0 (got " +
                                     std::to_string(o.value_bound) + ")");
    }
  } else if (o.value_bound != 0) {
    return Status::InvalidArgument("--value_bound is for --consistency=vap only");
  }
  if (o.workers < 1 || o.workers > 256)
    return Status::InvalidArgument("--workers must be in [1, 256]");
  if (o.clocks < 0) return Status::InvalidArgument("--clocks must be >= 0");
  if (o.eval_every < 1) return Status::InvalidArgument("--eval_every must be >= 1");
  if (o.straggler_ms < 0 || o.straggler_ms > 600000) {
    return Status::InvalidArgument("--straggler_ms must be in [0, 600000]");
  }
  if (!(o.straggler_prob >= 0 && o.straggler_prob <= 1)) {
    return Status::InvalidArgument("--straggler_prob must be in [0, 1]");
  }
  return Status::OK();
}

ThreadSchedTimes ReadThreadSchedTimes() {
  ThreadSchedTimes t;
  std::unique_ptr<FILE, int (*)(FILE*)> f(std::fopen("/proc/thread-self/schedstat", "r"),
                                          &std::fclose);
  long long run = 0, wait = 0;
  if (f && std::fscanf(f.get(), "%lld %lld", &run, &wait) == 2) {
    t.run_ns = run;
    t.wait_ns = wait;
  }
  return t;
}

uint32_t EffectiveBound(const RunOptions& o) {
  switch (o.consistency) {
    case Consistency::kBsp:
      return 0;
    case Consistency::kAsync:
    case Consistency::kVap:
      // No clock bound applies; the schema's staleness sets how far the
      // client's histogram tracks staleness exactly.
      return MeasureCols::kHistBuckets - 2;
    default:
      return o.staleness;
  }
}

std::string DescribeConsistency(const RunOptions& o) {
  std::string name(ConsistencyName(o.consistency));
  switch (o.consistency) {
    case Consistency::kBsp:
      return name;
    case Consistency::kAsync:
      return name + " (no bound)";
    case Consistency::kVap: {
      char v[48];
      std::snprintf(v, sizeof(v), " v=%g (no clock bound)", o.value_bound);
      return name + v;
    }
    default:
      return name + " s=" + std::to_string(o.staleness);
  }
}

void ApplyConsistency(const RunOptions& o, TableSchema* schema) {
  schema->consistency = o.consistency;
  schema->staleness = EffectiveBound(o);
  schema->value_bound = o.consistency == Consistency::kVap ? o.value_bound : 0;
}

TableSchema StatsTableSchema(const std::string& name, uint32_t app_columns, const RunOptions& o) {
  TableSchema s;
  s.name = name;
  s.kind = RowKind::kDense;
  s.type = ElementType::kF64;
  s.width = MeasureCols::kCount + app_columns;
  if (o.consistency == Consistency::kAsync || o.consistency == Consistency::kVap) {
    // Read once each, after the job clock passed the row (StatsRowReader).
    s.consistency = Consistency::kAsync;
    s.staleness = 0;
  } else {
    ApplyConsistency(o, &s);
  }
  return s;
}

Status OpenJobTables(Client* client, const RunOptions& o, const std::vector<TableSchema>& schemas,
                     std::vector<Table>* tables) {
  const std::string where = client->embedded() ? "the data dir" : "the servers";
  if (!o.resume && client->start_clock() > 0) {
    return Status::FailedPrecondition(
        where + " already hold(s) a job at clock " + std::to_string(client->start_clock()) +
        ": pass --resume to continue it, or start fresh with another --data_dir (or delete it)");
  }
  tables->clear();
  for (const TableSchema& schema : schemas) {
    Table t;
    Status s = client->CreateTable(schema, &t);
    if (s.code() == StatusCode::kAlreadyExists) {
      std::vector<TableSchema> existing;
      std::string have;
      if (client->ListTables(&existing).ok()) {
        for (const TableSchema& e : existing) {
          if (e.name == schema.name) have = DescribeSchema(e);
        }
      }
      return Status::AlreadyExists(
          where + " table '" + schema.name + "' with another schema (" + have +
          "; this run needs " + DescribeSchema(schema) +
          "): use another --data_dir (or delete it), or rerun with the flags that made it");
    }
    RETURN_IF_ERROR(s.WithPrefix("creating table '" + schema.name + "'"));
    tables->push_back(t);
  }
  return Status::OK();
}

double MaybeStraggle(const RunOptions& o, ClientId client, int worker, ClockT clock) {
  if (o.straggler_ms <= 0 || o.straggler_prob <= 0) return 0;
  if (HashUniform(DeriveSeed(o.seed, 0x57A6, client), static_cast<uint64_t>(worker),
                  static_cast<uint64_t>(clock)) >= o.straggler_prob) {
    return 0;
  }
  // A deliberate delay (the experiment's straggler), not a wait for a condition.
  std::this_thread::sleep_for(std::chrono::milliseconds(o.straggler_ms));
  return static_cast<double>(o.straggler_ms) / 1000.0;
}

Status RunWorkers(Client* client, int n,
                  const std::function<Status(int, Worker*, const std::atomic<bool>&)>& fn) {
  std::atomic<bool> failed{false};
  std::mutex mu;
  std::condition_variable cv;
  int registered = 0;  // protected by mu
  Status first;        // protected by mu
  auto record = [&](const Status& s, int i) {
    failed.store(true);
    std::lock_guard<std::mutex> l(mu);
    if (first.ok()) first = s.WithPrefix("worker " + std::to_string(i));
  };
  std::vector<std::thread> threads;
  threads.reserve(n);
  for (int i = 0; i < n; ++i) {
    threads.emplace_back([&, i] {
      SetThreadName("pace-worker-" + std::to_string(i));
      std::unique_ptr<Worker> worker;
      Status s = client->RegisterWorker(&worker);
      if (!s.ok()) record(s, i);
      {
        // Every worker must be registered before any ends a clock: the
        // process clock is the minimum over the registered workers only.
        std::unique_lock<std::mutex> l(mu);
        ++registered;
        cv.notify_all();
        cv.wait(l, [&] { return registered == n; });
      }
      if (!s.ok() || failed.load()) return;
      s = fn(i, worker.get(), failed);
      if (!s.ok()) record(s, i);
    });
  }
  for (std::thread& t : threads) t.join();
  return first;
}

namespace {

std::mutex trace_mu;
FILE* trace_file = nullptr;  // protected by trace_mu; open until the process exits

void TraceClock(ClockT clock, int workers, const ClientStats& st,
                const std::vector<std::string>& tables) {
  uint64_t fetched = 0, pushes = 0, reads = 0;
  double staleness_sum = 0;
  for (const TableStats& t : st.tables) {
    bool measured = false;
    for (const std::string& name : tables) measured |= (name == t.name);
    if (!measured) continue;
    uint64_t n = 0;
    for (uint64_t x : t.staleness_hist) n += x;
    fetched += t.rows_fetched;
    pushes += t.pushes_applied;
    reads += n;
    staleness_sum += t.staleness_mean * static_cast<double>(n);
  }
  timespec now{};
  clock_gettime(CLOCK_MONOTONIC, &now);
  std::lock_guard<std::mutex> l(trace_mu);
  if (trace_file == nullptr) return;
  std::fprintf(trace_file,
               "%lld,%.6f,%d,%.6f,%.6f,%.3f,%llu,%llu,%llu,%llu,%llu,%llu,%llu,%llu,%.0f\n",
               static_cast<long long>(clock), static_cast<double>(now.tv_sec) + 1e-9 * now.tv_nsec,
               workers, st.get_blocked_seconds, st.clock_blocked_seconds, ProcessCpuSeconds(),
               static_cast<unsigned long long>(st.bytes_sent),
               static_cast<unsigned long long>(st.bytes_received),
               static_cast<unsigned long long>(st.batches_sent),
               static_cast<unsigned long long>(st.rows_sent),
               static_cast<unsigned long long>(st.rows_received),
               static_cast<unsigned long long>(fetched), static_cast<unsigned long long>(pushes),
               static_cast<unsigned long long>(reads), staleness_sum);
  std::fflush(trace_file);
}

}  // namespace

Status OpenClockTrace(const std::string& path) {
  if (path.empty()) return Status::OK();
  std::lock_guard<std::mutex> l(trace_mu);
  FILE* f = std::fopen(path.c_str(), "w");
  if (f == nullptr) return Status::IOError(path + ": " + std::strerror(errno));
  std::fprintf(f,
               "clock,t_s,workers,get_blocked_s,clock_blocked_s,cpu_s,bytes_sent,bytes_received,"
               "batches_sent,rows_sent,rows_received,rows_fetched,pushes_applied,reads,"
               "staleness_sum\n");
  if (trace_file != nullptr) std::fclose(trace_file);
  trace_file = f;
  return Status::OK();
}

ProcessMeasure::ProcessMeasure(Client* client, std::vector<std::string> tables, int workers)
    : client_(client), tables_(std::move(tables)), workers_(workers) {
  ClientStats st = client_->Stats();
  last_blocked_ = st.get_blocked_seconds + st.clock_blocked_seconds;
  for (const TableStats& t : st.tables)
    last_[t.name] = Snapshot{t.staleness_hist, t.staleness_mean};
}

void ProcessMeasure::EndClock(ClockT clock, double* cols) {
  std::lock_guard<std::mutex> l(mu_);
  if (++arrived_[clock] < workers_) return;
  arrived_.erase(clock);
  TakeDelta(clock, cols);
}

void ProcessMeasure::TakeDelta(ClockT clock, double* cols) {
  ClientStats st = client_->Stats();
  TraceClock(clock, workers_, st, tables_);
  double blocked = st.get_blocked_seconds + st.clock_blocked_seconds;
  cols[MeasureCols::kBlockedSeconds] += std::max(0.0, blocked - last_blocked_);
  last_blocked_ = blocked;
  for (const TableStats& t : st.tables) {
    bool measured = false;
    for (const std::string& name : tables_) measured |= (name == t.name);
    if (!measured) continue;
    Snapshot& before = last_[t.name];
    AddHistogramDelta(t.staleness_hist, t.staleness_mean, before.hist, before.mean, cols);
    before = Snapshot{t.staleness_hist, t.staleness_mean};
  }
}

bool ShouldPrefetch(const RunOptions& o, ClockT c, ClockT start_clock) {
  if (c == start_clock) return true;
  return o.consistency == Consistency::kBsp || o.consistency == Consistency::kSsp;
}

StatsRowReader::StatsRowReader(Table stats, const RunOptions& o, ClockT first_clock,
                               ClockT end_clock, Client* client)
    : stats_(stats),
      client_(client),
      poll_(o.consistency != Consistency::kAsync && o.consistency != Consistency::kVap),
      lag_(EffectiveBound(o)),
      end_clock_(end_clock),
      next_(first_clock) {}

Status StatsRowReader::ReadRow(Worker* worker, ClockT r, const RowFn& fn, bool* complete) {
  std::vector<double> row;
  Version version = 0;
  RETURN_IF_ERROR(worker->Read(stats_, static_cast<uint64_t>(r), [&](const RowView& v) {
    version = v.version;
    row.assign(v.dense<double>(), v.dense<double>() + v.width);
  }));
  // Complete once every process's clock-r batch is in: version >= r + 1.
  *complete = version >= r + 1;
  if (!*complete) return Status::OK();
  return fn(r, row);
}

Status StatsRowReader::PollAsync(Worker* worker, const RowFn& fn) {
  if (client_ == nullptr || next_ >= end_clock_) return Status::OK();
  Version job = 0;
  RETURN_IF_ERROR(client_->JobClock(&job));
  // Rows below the job clock are complete. Each is read once, now: an async
  // read of a row without a cached value fetches the current one.
  while (next_ < job && next_ < end_clock_) {
    bool complete = false;
    RETURN_IF_ERROR(ReadRow(worker, next_, fn, &complete));
    if (!complete) break;
    ++next_;
  }
  return Status::OK();
}

Status StatsRowReader::Poll(Worker* worker, const RowFn& fn) {
  if (!poll_) return PollAsync(worker, fn);
  const ClockT last = worker->clock() - 1 - lag_;
  while (next_ <= last) {
    bool complete = false;
    RETURN_IF_ERROR(ReadRow(worker, next_, fn, &complete));
    if (!complete) break;  // retried at a later clock
    ++next_;
  }
  // The row read at the next Poll is fetched now, in the background: reading
  // it then would wait for the shard to get through the batch just sent. Not
  // the rows Finish reads: the read rule does not make a cached copy of those
  // complete, while a row first read after the final barrier is.
  // Nor once a stop was asked for: Finish then reads rows of the stop clock.
  if (next_ >= end_clock_ - lag_ || StopRequested()) return Status::OK();
  return worker->Prefetch(stats_, {static_cast<uint64_t>(next_)});
}

Status StatsRowReader::Finish(Worker* worker, ClockT end_clock, const RowFn& fn) {
  RETURN_IF_ERROR(worker->GlobalBarrier());
  while (next_ < end_clock) {
    bool complete = false;
    RETURN_IF_ERROR(ReadRow(worker, next_, fn, &complete));
    // A copy cached before the barrier (a run stopped early) becomes complete
    // with the push or PushDone that follows the barrier's reply on the same
    // connection: give it a moment before calling the row incomplete.
    for (int64_t wait_ms = 1; !complete && wait_ms <= 512; wait_ms *= 2) {
      std::this_thread::sleep_for(std::chrono::milliseconds(wait_ms));
      RETURN_IF_ERROR(ReadRow(worker, next_, fn, &complete));
    }
    if (!complete) {
      return Status::Internal("stats row of clock " + std::to_string(next_) +
                              " is incomplete after the final barrier");
    }
    ++next_;
  }
  return Status::OK();
}

Status StatsRowReader::FinishRun(Worker* worker, ClockT end_clock, bool stopped,
                                 uint32_t num_clients, const RowFn& fn) {
  if (!stopped) return Finish(worker, end_clock, fn);
  if (num_clients > 1) return Status::OK();
  return Finish(worker, std::min(StopClock(), end_clock), fn);
}

Status WriteStalenessHistogram(const ClientStats& stats, const std::vector<std::string>& tables,
                               const std::string& path) {
  std::unique_ptr<FILE, int (*)(FILE*)> f(std::fopen(path.c_str(), "w"), &std::fclose);
  if (!f) return Status::IOError("cannot write '" + path + "': " + std::strerror(errno));
  std::fputs("table,staleness,count\n", f.get());
  for (const std::string& name : tables) {
    for (const TableStats& t : stats.tables) {
      if (t.name != name) continue;
      for (size_t k = 0; k < t.staleness_hist.size(); ++k) {
        std::fprintf(f.get(), "%s,%zu,%llu\n", name.c_str(), k,
                     static_cast<unsigned long long>(t.staleness_hist[k]));
      }
    }
  }
  if (std::ferror(f.get())) return Status::IOError("writing '" + path + "' failed");
  if (std::fclose(f.release()) != 0) return Status::IOError("closing '" + path + "' failed");
  return Status::OK();
}

int64_t NowNs() {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(
             std::chrono::steady_clock::now().time_since_epoch())
      .count();
}

double SecondsSince(int64_t start_ns) { return static_cast<double>(NowNs() - start_ns) * 1e-9; }

}  // namespace apps
}  // namespace pace
