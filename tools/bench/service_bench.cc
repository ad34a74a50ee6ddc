// Benchmark 3d (report only): the shard service's cost of one
// pace_mf-shaped clock. A ShardService (embedded, one client process) has one
// in-process subscriber session that subscribed to every row of two ESSP
// tables of 17 f32 (20,000 "user" + 5,000 "item" rows, the MF job's shape). Per
// clock the client sends one Apply changing every row; the time measured is
// from OnMessage(Apply) until the service is idle again (WaitIdle), by which
// its writer thread has written the batch, sent the Ack, advanced the shard
// clock and sent the PushDone. The subscriber is the writer, so none of the
// rows is pushed back (a row changed only by its subscriber's own batches is
// not; until commit 95fc13a all 25,000 were, and figures measured
// before that include them). Building the Apply message and freeing the
// delivered messages are not timed.
//
// Baseline: raw RocksDB writing the same merge operands (same keys, same delta
// bytes, same order) in one WriteBatch with the WAL on, as benchmark 3b does.
#include <benchmark/benchmark.h>
#include <rocksdb/db.h>
#include <rocksdb/write_batch.h>
#include <sys/resource.h>
#include <unistd.h>

#include <algorithm>
#include <filesystem>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include "common/row.h"
#include "net/messages.h"
#include "net/session.h"
#include "server/shard_service.h"
#include "server/testing/fake_session.h"
#include "storage/key_format.h"
#include "tools/bench/ratio.h"
#include "tools/bench/raw_rocksdb.h"

namespace pace {
namespace {

constexpr uint32_t kWidth = 17;
constexpr int kUserRows = 20000;
constexpr int kItemRows = 5000;
constexpr int kRows = kUserRows + kItemRows;

// CPU seconds used so far by the whole process / by the calling thread.
double CpuSeconds(int who) {
  rusage u{};
  getrusage(who, &u);
  return static_cast<double>(u.ru_utime.tv_sec + u.ru_stime.tv_sec) +
         1e-6 * static_cast<double>(u.ru_utime.tv_usec + u.ru_stime.tv_usec);
}

// One update of the batch: table index (0 user, 1 item), row, delta.
struct Update {
  int table;
  uint64_t row;
  std::string bytes;
};

// Every row of both tables once, in a fixed pseudo-random order (a client
// sends them in its hash-map order, not key order).
std::vector<Update> MakeUpdates() {
  std::vector<Update> u;
  u.reserve(kRows);
  std::vector<float> v(kWidth);
  for (int t = 0; t < 2; ++t) {
    const int n = t == 0 ? kUserRows : kItemRows;
    for (int r = 0; r < n; ++r) {
      for (uint32_t c = 0; c < kWidth; ++c) v[c] = 0.001f * static_cast<float>((r + c) % 97);
      u.push_back(Update{t, static_cast<uint64_t>(r), EncodeDense(v)});
    }
  }
  std::shuffle(u.begin(), u.end(), std::mt19937_64(7));
  return u;
}

void BM_RawRocksDBWriteBatchMf(benchmark::State& state) {
  std::string dir = bench::TempDir("svc-raw");
  std::unique_ptr<rocksdb::DB> db = bench::OpenRawBaselineDb(dir);
  if (db == nullptr) {
    state.SkipWithError("open failed");
    return;
  }
  const std::vector<Update> updates = MakeUpdates();
  rocksdb::WriteOptions wo;  // WAL on, no fsync
  char key[storage_format::kRowKeySize];
  int64_t clock = 0;
  for (auto _ : state) {
    rocksdb::WriteBatch batch;
    for (const Update& u : updates) {
      storage_format::EncodeRowKey(1 + u.table, u.row, key);
      batch.Merge(rocksdb::Slice(key, sizeof(key)), u.bytes);
    }
    std::string clock_value = storage_format::EncodeClock(++clock);
    batch.Put(storage_format::ClockKey(0), clock_value);
    if (!db->Write(wo, &batch).ok()) state.SkipWithError("write failed");
  }
  state.SetItemsProcessed(state.iterations() * kRows);
  db.reset();
  std::error_code ignored;  // a leftover is harmless; never an exception
  std::filesystem::remove_all(dir, ignored);
}

// until_push_done: time until the client has what it waits for (the Ack and
// the PushDone), not until the service is idle (WaitIdle also waits for the
// reader thread that frees the committed batch); WaitIdle then runs untimed.
void ServiceApplyPushMf(benchmark::State& state, bool until_push_done) {
  std::string dir = bench::TempDir("svc");
  ShardServiceOptions options;  // store defaults: WAL on, sync off, row cache on
  options.data_dir = dir;
  std::unique_ptr<ShardService> service;
  Status s = ShardService::Open(options, &service);
  // Keeps what the service sends; the benchmark frees it outside the timing.
  auto session = FakeSession::Client(0);
  if (s.ok()) {
    net::Welcome welcome;
    s = service->OnHello(session->hello(), &welcome);
  }
  uint32_t ids[2] = {0, 0};
  if (s.ok()) {
    service->OnConnect(session);
    for (int t = 0; t < 2 && s.ok(); ++t) {
      TableSchema schema;
      schema.name = t == 0 ? "user" : "item";
      schema.width = kWidth;
      schema.consistency = Consistency::kEssp;
      schema.staleness = 1;
      TableSchema created;
      s = service->store()->CreateTable(schema, &created);
      ids[t] = created.id;
    }
  }
  if (!s.ok()) {
    state.SkipWithError(s.ToString().c_str());
    return;
  }
  // Subscribe to every row, as the MF workers' first reads do.
  for (int t = 0; t < 2; ++t) {
    net::Read read;
    read.req_id = 1 + t;
    read.table = ids[t];
    read.subscribe = true;
    for (int r = 0; r < (t == 0 ? kUserRows : kItemRows); ++r) read.rows.push_back(r);
    service->OnMessage(session, std::move(read));
  }
  service->TEST_WaitIdle();
  session->Take();
  if (service->TEST_NumSubscriptions() != kRows) {
    state.SkipWithError("subscriptions missing");
    return;
  }
  const std::vector<Update> updates = MakeUpdates();
  ClockT clock = 0;
  uint64_t pushed = 0;
  const double other_threads_cpu0 = CpuSeconds(RUSAGE_SELF) - CpuSeconds(RUSAGE_THREAD);
  for (auto _ : state) {
    state.PauseTiming();
    net::Apply apply{clock, {}};
    apply.updates.reserve(kRows);
    for (const Update& u : updates) apply.Add(ids[u.table], u.row, u.bytes);
    net::Message m(std::move(apply));
    state.ResumeTiming();
    service->OnMessage(session, std::move(m));
    if (until_push_done) {
      session->WaitSeen([&](const FakeSession::Seen& s) { return s.push_done >= clock + 1; });
      state.PauseTiming();
      service->TEST_WaitIdle();
    } else {
      service->TEST_WaitIdle();  // the writer committed, acked and pushed
      state.PauseTiming();
    }
    const FakeSession::Seen seen = session->seen();
    if (seen.push_done != clock + 1 || seen.failed) {
      state.SkipWithError("no PushDone for the clock");
      break;
    }
    session->Take();  // freed here, untimed
    ++clock;
    state.ResumeTiming();
  }
  pushed = session->seen().push_rows;
  // RocksDB's background flushes and compactions that the writes cause.
  const double other_threads_cpu =
      CpuSeconds(RUSAGE_SELF) - CpuSeconds(RUSAGE_THREAD) - other_threads_cpu0;
  state.counters["bg_cpu_ms_per_clock"] =
      clock > 0 ? 1e3 * other_threads_cpu / static_cast<double>(clock) : 0;
  state.SetItemsProcessed(state.iterations() * kRows);
  state.counters["pushed_rows_per_clock"] =
      clock > 0 ? static_cast<double>(pushed) / static_cast<double>(clock) : 0;
  service.reset();
  std::error_code ignored;  // a leftover is harmless; never an exception
  std::filesystem::remove_all(dir, ignored);
}

BENCHMARK(BM_RawRocksDBWriteBatchMf)->Unit(benchmark::kMillisecond)->MinTime(2.0)->UseRealTime();
void BM_ServiceApplyPushMf(benchmark::State& state) { ServiceApplyPushMf(state, false); }
void BM_ServiceApplyPushMfUntilPushDone(benchmark::State& state) {
  ServiceApplyPushMf(state, true);
}

BENCHMARK(BM_ServiceApplyPushMf)->Unit(benchmark::kMillisecond)->MinTime(2.0)->UseRealTime();
BENCHMARK(BM_ServiceApplyPushMfUntilPushDone)
    ->Unit(benchmark::kMillisecond)
    ->MinTime(2.0)
    ->UseRealTime();

}  // namespace
}  // namespace pace

int main(int argc, char** argv) {
  pace::bench::Pair(
      "3d shard service Apply of an ESSP clock, pace_mf shape: 25k rows x 17 f32, all "
      "subscribed by the writer, so none pushed back (report only)",
      "BM_RawRocksDBWriteBatchMf", "BM_ServiceApplyPushMf", pace::bench::kRateRatioAtLeast, 0);
  pace::bench::Pair(
      "3d' 3d timed until the Ack and PushDone arrive instead of until the service is idle "
      "(report only)",
      "BM_RawRocksDBWriteBatchMf", "BM_ServiceApplyPushMfUntilPushDone",
      pace::bench::kRateRatioAtLeast, 0);
  return pace::bench::RunAndReport(argc, argv);
}
