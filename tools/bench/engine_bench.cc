// Benchmarks 3e and 3f: the shard engine's write path.
//
// 3e: the shard service applying one model-scale clock — 165,000 rows x 128
// f32 (the user rows one pace_mf clock of 600k users, rank 128, minibatch 0.4
// touches), WAL on, no fsync — against raw RocksDB writing the same bytes as
// one WriteBatch of Puts with the WAL on. The service's rows were read once
// before (as the MF workers' reads do), so they are in its row cache. Timed:
// OnMessage(Apply) until the Ack arrives (validation, the writer's group
// commit, publishing the view); building the Apply message is not.
//
// 3f: 8 client sessions, each on its own thread committing one small batch per
// clock (send Apply, wait for its Ack), with sync (an fsync per group commit)
// against the same without sync. Group commit makes the 8 concurrent batches
// share one WAL append and one fsync.
#include <benchmark/benchmark.h>
#include <rocksdb/db.h>
#include <rocksdb/write_batch.h>

#include <algorithm>
#include <atomic>
#include <filesystem>
#include <memory>
#include <random>
#include <string>
#include <thread>
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

constexpr uint32_t kModelWidth = 128;
constexpr int kModelRows = 165000;

// A client's session that keeps no messages, only counts (FakeSession::Seen).
std::shared_ptr<FakeSession> CountingSession(ClientId id) {
  auto session = FakeSession::Client(id);
  session->set_record(false);
  return session;
}

// Waits until clock `c` of `session` is acknowledged; false on an error.
bool WaitAcked(FakeSession* session, ClockT c) {
  return session->WaitSeen([c](const FakeSession::Seen& s) { return s.acked_through > c; });
}

std::vector<std::string> ModelDeltas() {
  std::vector<std::string> d(kModelRows);
  std::vector<float> v(kModelWidth);
  for (int r = 0; r < kModelRows; ++r) {
    for (uint32_t c = 0; c < kModelWidth; ++c) v[c] = 0.001f * static_cast<float>((r + c) % 97);
    d[r] = EncodeDense(v);
  }
  return d;
}

// Rows of the clock: every 600,000/165,000th user, in a client's hash order.
std::vector<uint64_t> ModelRows() {
  std::vector<uint64_t> rows(kModelRows);
  for (int i = 0; i < kModelRows; ++i) rows[i] = static_cast<uint64_t>(i) * 600000 / kModelRows;
  std::shuffle(rows.begin(), rows.end(), std::mt19937_64(11));
  return rows;
}

void BM_RawRocksDBPutsModelClock(benchmark::State& state) {
  std::string dir = bench::TempDir("engine-raw");
  std::unique_ptr<rocksdb::DB> db = bench::OpenRawBaselineDb(dir);
  if (db == nullptr) {
    state.SkipWithError("open failed");
    return;
  }
  const std::vector<std::string> deltas = ModelDeltas();
  std::vector<uint64_t> rows = ModelRows();
  std::sort(rows.begin(), rows.end());  // the fastest order for RocksDB
  rocksdb::WriteOptions wo;             // WAL on, no fsync
  char key[storage_format::kRowKeySize];
  const char tag = 0x11;
  int64_t clock = 0;
  for (auto _ : state) {
    rocksdb::WriteBatch batch;
    for (int i = 0; i < kModelRows; ++i) {
      storage_format::EncodeRowKey(1, rows[i], key);
      const rocksdb::Slice k(key, sizeof(key));
      const rocksdb::Slice parts[2] = {rocksdb::Slice(&tag, 1), rocksdb::Slice(deltas[i])};
      batch.Put(rocksdb::SliceParts(&k, 1), rocksdb::SliceParts(parts, 2));
    }
    batch.Put(storage_format::ClockKey(0), storage_format::EncodeClock(++clock));
    if (!db->Write(wo, &batch).ok()) state.SkipWithError("write failed");
  }
  state.SetItemsProcessed(state.iterations() * kModelRows);
  state.SetBytesProcessed(state.iterations() * kModelRows * (kModelWidth * 4 + 1));
  db.reset();
  std::error_code ignored;  // a leftover is harmless; never an exception
  std::filesystem::remove_all(dir, ignored);
}

void BM_ServiceApplyModelClock(benchmark::State& state) {
  std::string dir = bench::TempDir("engine-svc");
  ShardServiceOptions options;  // store defaults: WAL on, sync off, 256 MiB row cache
  options.data_dir = dir;
  std::unique_ptr<ShardService> service;
  Status s = ShardService::Open(options, &service);
  auto session = CountingSession(0);
  uint32_t table = 0;
  if (s.ok()) {
    net::Welcome welcome;
    s = service->OnHello(session->hello(), &welcome);
  }
  if (s.ok()) {
    service->OnConnect(session);
    TableSchema schema;
    schema.name = "user";
    schema.width = kModelWidth;
    schema.consistency = Consistency::kSsp;
    schema.staleness = 1;
    TableSchema created;
    s = service->store()->CreateTable(schema, &created);
    table = created.id;
  }
  if (!s.ok()) {
    state.SkipWithError(s.ToString().c_str());
    return;
  }
  const std::vector<std::string> deltas = ModelDeltas();
  const std::vector<uint64_t> rows = ModelRows();
  // The workers read their rows first: they are in the row cache. In Reads
  // of the size the client sends (at most 4 MiB of row values each): the
  // service refuses a Read whose reply would exceed its frame bound.
  constexpr size_t kReadBytes = size_t{4} << 20;
  constexpr size_t kRowsPerRead = kReadBytes / (kModelWidth * sizeof(float));
  int reads = 0;
  for (size_t begin = 0; begin < rows.size(); begin += kRowsPerRead) {
    const size_t end = std::min(rows.size(), begin + kRowsPerRead);
    ++reads;
    service->OnMessage(
        session,
        net::Read{static_cast<uint64_t>(reads), table,
                  std::vector<uint64_t>(rows.begin() + begin, rows.begin() + end), 0, false});
  }
  const uint64_t replies = static_cast<uint64_t>(reads);
  if (!session->WaitSeen([&](const FakeSession::Seen& s) { return s.read_replies >= replies; })) {
    state.SkipWithError(("read failed: " + session->seen().first_error).c_str());
    return;
  }
  ClockT clock = 0;
  for (auto _ : state) {
    state.PauseTiming();
    net::Apply apply{clock, {}};
    apply.updates.reserve(kModelRows);
    for (int i = 0; i < kModelRows; ++i) apply.Add(table, rows[i], deltas[i]);
    net::Message m(std::move(apply));
    state.ResumeTiming();
    service->OnMessage(session, std::move(m));
    if (!WaitAcked(session.get(), clock)) {
      state.SkipWithError("Apply failed");
      break;
    }
    ++clock;
  }
  state.SetItemsProcessed(state.iterations() * kModelRows);
  state.SetBytesProcessed(state.iterations() * kModelRows * (kModelWidth * 4 + 1));
  const RowCacheStats cache = service->store()->row_cache_stats();
  state.counters["cached_rows"] = static_cast<double>(cache.entries);
  service.reset();
  std::error_code ignored;  // a leftover is harmless; never an exception
  std::filesystem::remove_all(dir, ignored);
}

constexpr int kWriters = 8;
constexpr int kClocksPerRun = 50;
constexpr int kBatchRows = 200;
constexpr uint32_t kBatchWidth = 16;

// One iteration: kWriters threads each commit kClocksPerRun batches, one per
// clock, waiting for each Ack before sending the next.
void ConcurrentWriters(benchmark::State& state, bool sync) {
  std::string dir = bench::TempDir(sync ? "engine-sync" : "engine-nosync");
  ShardServiceOptions options;
  options.data_dir = dir;
  options.store.num_clients = kWriters;
  options.store.sync = sync;
  std::unique_ptr<ShardService> service;
  Status s = ShardService::Open(options, &service);
  TableSchema created;
  if (s.ok()) {
    TableSchema schema;
    schema.name = "w";
    schema.width = kBatchWidth;
    schema.consistency = Consistency::kSsp;
    s = service->store()->CreateTable(schema, &created);
  }
  std::vector<std::shared_ptr<FakeSession>> sessions;
  for (int c = 0; c < kWriters && s.ok(); ++c) {
    sessions.push_back(CountingSession(c));
    net::Welcome welcome;
    s = service->OnHello(sessions.back()->hello(), &welcome);
    service->OnConnect(sessions.back());
  }
  if (!s.ok()) {
    state.SkipWithError(s.ToString().c_str());
    return;
  }
  const std::string delta = EncodeDense(std::vector<float>(kBatchWidth, 0.5f));
  ClockT base = 0;
  for (auto _ : state) {
    std::vector<std::thread> threads;
    std::atomic<bool> failed{false};
    for (int c = 0; c < kWriters; ++c) {
      threads.emplace_back([&, c] {
        for (ClockT k = base; k < base + kClocksPerRun; ++k) {
          net::Apply apply{k, {}};
          for (int r = 0; r < kBatchRows; ++r) {
            apply.Add(created.id, static_cast<uint64_t>(c * kBatchRows + r), delta);
          }
          service->OnMessage(sessions[c], std::move(apply));
          if (!WaitAcked(sessions[c].get(), k)) failed = true;
        }
      });
    }
    for (std::thread& t : threads) t.join();
    if (failed) state.SkipWithError("Apply failed");
    base += kClocksPerRun;
  }
  state.SetItemsProcessed(state.iterations() * kWriters * kClocksPerRun);
  for (auto& se : sessions) service->OnDisconnect(se);
  service.reset();
  std::error_code ignored;  // a leftover is harmless; never an exception
  std::filesystem::remove_all(dir, ignored);
}

void BM_EightWritersNoSync(benchmark::State& state) { ConcurrentWriters(state, false); }
void BM_EightWritersSync(benchmark::State& state) { ConcurrentWriters(state, true); }

// 3f first: 3e writes gigabytes whose writeback would slow its fsyncs.
BENCHMARK(BM_EightWritersNoSync)->Unit(benchmark::kMillisecond)->MinTime(2.0)->UseRealTime();
BENCHMARK(BM_EightWritersSync)->Unit(benchmark::kMillisecond)->MinTime(2.0)->UseRealTime();
BENCHMARK(BM_RawRocksDBPutsModelClock)->Unit(benchmark::kMillisecond)->MinTime(3.0)->UseRealTime();
BENCHMARK(BM_ServiceApplyModelClock)->Unit(benchmark::kMillisecond)->MinTime(3.0)->UseRealTime();

}  // namespace
}  // namespace pace

int main(int argc, char** argv) {
  pace::bench::Pair(
      "3e shard service applying one model-scale clock (165k rows x 128 f32, WAL, no fsync) vs "
      "raw RocksDB WriteBatch of the same Puts",
      "BM_RawRocksDBPutsModelClock", "BM_ServiceApplyModelClock", pace::bench::kRateRatioAtLeast,
      0.7);
  pace::bench::Pair(
      "3f 8 concurrent writers, one batch per clock: --sync vs no sync (group commit)",
      "BM_EightWritersNoSync", "BM_EightWritersSync", pace::bench::kRateRatioAtLeast, 0.5);
  return pace::bench::RunAndReport(argc, argv);
}
