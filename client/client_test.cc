// End-to-end tests of the client in embedded mode (a real ShardService on a
// RocksDB store in a temp dir): the read rule, read-my-writes, exact integer
// totals for every consistency model, ESSP vs SSP staleness, a cache smaller
// than the working set, and lost connections / shard restarts.
#include <gtest/gtest.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cmath>
#include <condition_variable>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <memory>
#include <mutex>
#include <random>
#include <string>
#include <thread>
#include <type_traits>
#include <vector>

#include "client/client_impl.h"
#include "client/embedded_channel.h"
#include "client/pace.h"
#include "common/element.h"
#include "common/row.h"
#include "common/scoped_temp_dir.h"

namespace pace {
namespace {

using TempDir = ScopedTempDir;

constexpr uint32_t kWidth = 4;

TableSchema CounterSchema(Consistency c, uint32_t s, uint32_t width = kWidth) {
  TableSchema schema;
  schema.name = "counters";
  schema.type = ElementType::kI64;
  schema.width = width;
  schema.consistency = c;
  schema.staleness = c == Consistency::kBsp ? 0 : s;
  return schema;
}

// Opens an embedded client; if `channel` is given, keeps a pointer to the
// EmbeddedChannel for fault injection.
Status OpenEmbedded(const ClientOptions& o, std::unique_ptr<Client>* client,
                    client::EmbeddedChannel** channel = nullptr) {
  std::vector<std::unique_ptr<client::ShardChannel>> chans;
  auto ch = std::make_unique<client::EmbeddedChannel>(o);
  if (channel != nullptr) *channel = ch.get();
  chans.push_back(std::move(ch));
  return Client::Impl::Create(o, std::move(chans), true, client);
}

struct RunConfig {
  Consistency consistency = Consistency::kSsp;
  uint32_t staleness = 2;
  int workers = 2;
  int clocks = 20;
  int ops_per_clock = 30;
  uint64_t rows = 40;
  uint64_t seed = 1;
  size_t cache_mb = 64;
  uint32_t width = kWidth;
  // Fault injection every this many ms (0: none).
  int reconnect_every_ms = 0;
  bool restart = false;
};

struct RunResult {
  std::vector<int64_t> totals;  // expected final value of element 0, per row
  ClientStats stats;
  uint64_t max_cache_bytes = 0;
};

// Workers add positive random deltas (d, 2d, ..) to random rows and read
// random rows. Every read checks the read rule (v >= c - s) and
// read-my-writes: with one process, a read sees at least every Inc completed
// before it started and at most every Inc started before it ended.
void RunWorkload(const std::string& dir, const RunConfig& cfg, RunResult* result) {
  ClientOptions o;
  o.data_dir = dir;
  o.cache_mb = cfg.cache_mb;
  std::unique_ptr<Client> client;
  client::EmbeddedChannel* channel = nullptr;
  ASSERT_TRUE(OpenEmbedded(o, &client, &channel).ok());
  Table t;
  ASSERT_TRUE(
      client->CreateTable(CounterSchema(cfg.consistency, cfg.staleness, cfg.width), &t).ok());
  const bool async = cfg.consistency == Consistency::kAsync;
  const int64_t s = cfg.staleness;
  std::vector<std::atomic<int64_t>> started(cfg.rows), done(cfg.rows);
  std::atomic<uint64_t> max_cache{0};
  std::atomic<bool> stop_faults{false};
  std::thread faults;
  if (cfg.reconnect_every_ms > 0) {
    faults = std::thread([&] {
      while (!stop_faults.load()) {
        std::this_thread::sleep_for(std::chrono::milliseconds(cfg.reconnect_every_ms));
        if (cfg.restart) {
          channel->TEST_SimulateRestart();
        } else {
          channel->TEST_SimulateReconnect();
        }
      }
    });
  }
  // Registered up front: a worker registered later starts at the process
  // clock of that moment.
  std::vector<std::unique_ptr<Worker>> workers(cfg.workers);
  for (auto& w : workers) ASSERT_TRUE(client->RegisterWorker(&w).ok());
  auto work = [&](int id) {
    std::unique_ptr<Worker> w = std::move(workers[id]);
    std::mt19937_64 rng(cfg.seed * 1000 + id);
    std::vector<int64_t> delta(cfg.width);
    for (int c = 0; c < cfg.clocks; ++c) {
      for (int op = 0; op < cfg.ops_per_clock; ++op) {
        uint64_t r = rng() % cfg.rows;
        if (rng() % 2 == 0) {
          int64_t lower = done[r].load();
          int64_t x0 = 0;
          bool consistent = true;
          Version v = 0;
          Status st = w->Read(t, r, [&](const RowView& view) {
            const int64_t* x = view.dense<int64_t>();
            x0 = x[0];
            v = view.version;
            for (uint32_t i = 1; i < cfg.width; ++i) consistent &= x[i] == x0 * (i + 1);
          });
          int64_t upper = started[r].load();
          ASSERT_TRUE(st.ok()) << st.ToString();
          ASSERT_TRUE(consistent) << "row " << r << " torn or mis-added";
          if (!async) {
            ASSERT_GE(v, w->clock() - s) << "read rule broken at clock " << w->clock();
          }
          ASSERT_GE(x0, lower) << "read-my-writes broken: row " << r;
          ASSERT_LE(x0, upper) << "double-counted update: row " << r;
        } else {
          int64_t d = 1 + static_cast<int64_t>(rng() % 5);
          for (uint32_t i = 0; i < cfg.width; ++i) delta[i] = d * (i + 1);
          started[r].fetch_add(d);
          ASSERT_TRUE(w->Inc(t, r, delta.data()).ok());
          done[r].fetch_add(d);
        }
      }
      ASSERT_TRUE(w->Clock().ok());
      uint64_t cb = client->Stats().cache_bytes;
      uint64_t cur = max_cache.load();
      while (cb > cur && !max_cache.compare_exchange_weak(cur, cb)) {
      }
    }
  };
  std::vector<std::thread> threads;
  for (int i = 0; i < cfg.workers; ++i) threads.emplace_back(work, i);
  for (auto& th : threads) th.join();
  stop_faults.store(true);
  if (faults.joinable()) faults.join();
  result->totals.resize(cfg.rows);
  for (uint64_t r = 0; r < cfg.rows; ++r) result->totals[r] = done[r].load();
  // Read-my-writes: a new worker sees every update of this process exactly.
  std::unique_ptr<Worker> reader;
  ASSERT_TRUE(client->RegisterWorker(&reader).ok());
  for (uint64_t r = 0; r < cfg.rows; ++r) {
    std::vector<int64_t> x(cfg.width);
    ASSERT_TRUE(reader->Get(t, r, x.data()).ok());
    ASSERT_EQ(x[0], result->totals[r]) << "row " << r;
  }
  result->stats = client->Stats();
  result->max_cache_bytes = max_cache.load();
  ASSERT_TRUE(client->Flush().ok());
}

// Reopens the data dir with a fresh client (empty cache) and checks that the
// shard holds exactly the expected totals.
void CheckStored(const std::string& dir, const RunConfig& cfg, const RunResult& result) {
  ClientOptions o;
  o.data_dir = dir;
  std::unique_ptr<Client> client;
  ASSERT_TRUE(Client::Open(o, &client).ok());
  EXPECT_EQ(client->start_clock(), cfg.clocks);
  Table t;
  ASSERT_TRUE(client->OpenTable("counters", &t).ok());
  std::unique_ptr<Worker> w;
  ASSERT_TRUE(client->RegisterWorker(&w).ok());
  for (uint64_t r = 0; r < cfg.rows; ++r) {
    std::vector<int64_t> x(cfg.width);
    ASSERT_TRUE(w->Get(t, r, x.data()).ok());
    ASSERT_EQ(x[0], result.totals[r]) << "stored row " << r;
    ASSERT_EQ(x[cfg.width - 1], result.totals[r] * cfg.width) << "stored row " << r;
  }
}

struct ModelCase {
  Consistency consistency;
  uint32_t staleness;
};

class ModelTest : public ::testing::TestWithParam<ModelCase> {};

TEST_P(ModelTest, ReadRuleReadMyWritesAndExactTotals) {
  for (uint64_t seed : {1, 2, 3}) {
    SCOPED_TRACE("seed " + std::to_string(seed));
    TempDir dir;
    RunConfig cfg;
    cfg.consistency = GetParam().consistency;
    cfg.staleness = GetParam().staleness;
    cfg.seed = seed;
    cfg.workers = 2 + static_cast<int>(seed % 2);
    RunResult result;
    RunWorkload(dir.path(), cfg, &result);
    if (HasFatalFailure()) return;
    const TableStats& ts = result.stats.tables.at(0);
    EXPECT_GT(ts.reads, 0u);
    EXPECT_EQ(ts.staleness_hist.size(), static_cast<size_t>(ts.staleness_bound) + 2);
    uint64_t n = 0;
    for (uint64_t x : ts.staleness_hist) n += x;
    EXPECT_EQ(n, ts.reads);
    if (cfg.consistency != Consistency::kAsync) {
      EXPECT_EQ(ts.staleness_hist.back(), 0u) << "reads staler than s";
    } else {
      // async blocks only to fetch a row it never had.
      EXPECT_LE(ts.reads_blocked, cfg.rows * 2);
    }
    CheckStored(dir.path(), cfg, result);
  }
}

INSTANTIATE_TEST_SUITE_P(
    Models, ModelTest,
    ::testing::Values(ModelCase{Consistency::kBsp, 0}, ModelCase{Consistency::kSsp, 2},
                      ModelCase{Consistency::kEssp, 2}, ModelCase{Consistency::kAsync, 0}),
    [](const auto& info) { return std::string(ConsistencyName(info.param.consistency)); });

TEST(CacheBudgetTest, SmallerThanWorkingSetStaysExactAndBounded) {
  for (Consistency c : {Consistency::kSsp, Consistency::kEssp}) {
    SCOPED_TRACE(std::string(ConsistencyName(c)));
    TempDir dir;
    RunConfig cfg;
    cfg.consistency = c;
    cfg.staleness = 1;
    cfg.cache_mb = 1;
    cfg.width = 512;  // 4 KiB rows, 600 rows: 2.4 MiB working set
    cfg.rows = 600;
    cfg.clocks = 8;
    cfg.ops_per_clock = 150;
    RunResult result;
    RunWorkload(dir.path(), cfg, &result);
    if (HasFatalFailure()) return;
    EXPECT_GT(result.stats.tables[0].evictions, 0u);
    const uint64_t bound = (uint64_t{1} << 20) + 64 * (4096 + client::kEntryOverheadBytes);
    EXPECT_LE(result.max_cache_bytes, bound);
    EXPECT_LE(result.stats.cache_bytes, bound);
    CheckStored(dir.path(), cfg, result);
  }
}

// Rows read as a stream, each once, with Worker::EvictFirst after each block,
// and hot rows read less often than the stream passes through the cache
// (each an eighth of the blocks, as pace_mf reads item rows between blocks
// of user rows): with the hint the cache makes room from the stream (the
// hinted rows leave first, oldest first) and the hot rows stay; without it
// (the control run) the CLOCK hand takes the hot rows' chances while it
// looks for room and evicts them.
TEST(CacheBudgetTest, EvictFirstKeepsTheHotRowsOfAStream) {
  constexpr uint64_t kHot = 256, kBlock = 64, kBlocks = 128, kEighth = kHot / 8;
  auto hot_fetches = [&](bool hint) -> uint64_t {
    TempDir dir;
    ClientOptions o;
    o.data_dir = dir.path();
    o.cache_mb = 4;  // ~960 rows of 4 KiB: the hot rows and ~11 blocks
    std::unique_ptr<Client> client;
    EXPECT_TRUE(Client::Open(o, &client).ok());
    Table t;
    EXPECT_TRUE(client->CreateTable(CounterSchema(Consistency::kSsp, 1, 512), &t).ok());
    std::unique_ptr<Worker> w;
    EXPECT_TRUE(client->RegisterWorker(&w).ok());
    std::vector<uint64_t> hot;
    for (uint64_t r = 0; r < kHot; ++r) hot.push_back(1000000 + r);
    std::vector<int64_t> buf(kHot * 512);
    EXPECT_TRUE(w->GetRows(t, hot, buf.data()).ok());
    uint64_t fetches = 0;
    for (uint64_t b = 0; b < kBlocks; ++b) {
      std::vector<uint64_t> block;
      for (uint64_t r = b * kBlock; r < (b + 1) * kBlock; ++r) block.push_back(r);
      EXPECT_TRUE(w->GetRows(t, block, buf.data()).ok());
      if (hint) {
        EXPECT_TRUE(w->EvictFirst(t, block).ok());
      }
      const std::vector<uint64_t> some(hot.begin() + (b % 8) * kEighth,
                                       hot.begin() + (b % 8 + 1) * kEighth);
      // A miss is a Read, or the initializer made again by the client (the
      // table is this process's and none of its rows was written).
      auto misses = [&] {
        const TableStats ts = client->Stats().tables[0];
        return ts.rows_fetched + ts.rows_initialized;
      };
      const uint64_t before = misses();
      EXPECT_TRUE(w->GetRows(t, some, buf.data()).ok());
      fetches += misses() - before;
    }
    EXPECT_GT(client->Stats().tables[0].evictions, 0u);
    return fetches;
  };
  const uint64_t with_hint = hot_fetches(true), without = hot_fetches(false);
  std::printf("hot rows fetched again: %llu with EvictFirst, %llu without\n",
              static_cast<unsigned long long>(with_hint), static_cast<unsigned long long>(without));
  EXPECT_LT(with_hint * 4, without);
  // The hot rows fit the cache beside a block: with the hint they are not
  // evicted at all, bar a few (the stripes' budgets are not exact).
  EXPECT_LE(with_hint, kEighth);
  // A bad table handle is refused; rows not cached are skipped.
  std::unique_ptr<Client> client;
  TempDir dir;
  ClientOptions o;
  o.data_dir = dir.path();
  ASSERT_TRUE(Client::Open(o, &client).ok());
  std::unique_ptr<Worker> w;
  ASSERT_TRUE(client->RegisterWorker(&w).ok());
  EXPECT_FALSE(w->EvictFirst(Table(), {1, 2}).ok());
}

TEST(FaultTest, LostConnectionsLoseNothing) {
  TempDir dir;
  RunConfig cfg;
  cfg.consistency = Consistency::kEssp;
  cfg.staleness = 1;
  cfg.clocks = 40;
  cfg.reconnect_every_ms = 5;
  RunResult result;
  RunWorkload(dir.path(), cfg, &result);
  if (HasFatalFailure()) return;
  CheckStored(dir.path(), cfg, result);
}

TEST(FaultTest, ShardRestartsLoseNothing) {
  for (Consistency c : {Consistency::kSsp, Consistency::kEssp}) {
    TempDir dir;
    RunConfig cfg;
    cfg.consistency = c;
    cfg.staleness = 1;
    cfg.clocks = 40;
    cfg.reconnect_every_ms = 10;
    cfg.restart = true;
    RunResult result;
    RunWorkload(dir.path(), cfg, &result);
    if (HasFatalFailure()) return;
    CheckStored(dir.path(), cfg, result);
  }
}

// Two workers kept within one clock of each other (as equal work per clock
// would), each clock taking a few ms of "computation", one of them jittery. SSP refreshes a row
// only when it becomes too stale, so its reads spread over 0..s; ESSP pushes keep rows at the shard
// clock, so its reads are mostly 0-1 clocks stale.
double MeanStaleness(Consistency c, double* frac_le1) {
  TempDir dir;
  ClientOptions o;
  o.data_dir = dir.path();
  std::unique_ptr<Client> client;
  EXPECT_TRUE(Client::Open(o, &client).ok());
  Table t;
  EXPECT_TRUE(client->CreateTable(CounterSchema(c, 8, 1), &t).ok());
  constexpr int kClocks = 60;
  constexpr uint64_t kRows = 16;
  std::mutex mu;
  std::condition_variable cv;
  int clocks[2] = {0, 0};
  std::unique_ptr<Worker> workers[2];
  for (auto& w : workers) EXPECT_TRUE(client->RegisterWorker(&w).ok());
  auto work = [&](int id) {
    std::unique_ptr<Worker> w = std::move(workers[id]);
    std::mt19937 rng(id + 7);
    for (int k = 0; k < kClocks; ++k) {
      // Computation of one clock (longer than the shard needs to apply a
      // batch and push), with a jittery second worker.
      int us = 2000 + (id == 1 ? static_cast<int>(rng() % 3000) : 0);
      std::this_thread::sleep_for(std::chrono::microseconds(us));
      for (uint64_t r = 0; r < kRows; ++r) {
        int64_t x;
        ASSERT_TRUE(w->Get(t, r, &x).ok());
        int64_t one = 1;
        ASSERT_TRUE(w->Inc(t, r, &one).ok());
      }
      ASSERT_TRUE(w->Clock().ok());
      std::unique_lock<std::mutex> l(mu);
      clocks[id] = k + 1;
      cv.notify_all();
      cv.wait(l, [&] { return clocks[1 - id] >= k; });
    }
  };
  std::thread a(work, 0), b(work, 1);
  a.join();
  b.join();
  const TableStats ts = client->Stats().tables.at(0);
  uint64_t n = 0;
  for (uint64_t x : ts.staleness_hist) n += x;
  *frac_le1 = n == 0 ? 0 : static_cast<double>(ts.staleness_hist[0] + ts.staleness_hist[1]) / n;
  std::string h;
  for (uint64_t x : ts.staleness_hist) h += std::to_string(x) + " ";
  std::printf("%s: hist [%s] blocked %llu fetched %llu pushes %llu\n",
              std::string(ConsistencyName(c)).c_str(), h.c_str(),
              (unsigned long long)ts.reads_blocked, (unsigned long long)ts.rows_fetched,
              (unsigned long long)ts.pushes_applied);
  EXPECT_EQ(ts.staleness_hist.back(), 0u);
  return ts.staleness_mean;
}

TEST(StalenessTest, EsspIsFresherThanSsp) {
  double ssp_le1 = 0, essp_le1 = 0;
  double ssp = MeanStaleness(Consistency::kSsp, &ssp_le1);
  double essp = MeanStaleness(Consistency::kEssp, &essp_le1);
  RecordProperty("ssp_mean", std::to_string(ssp));
  RecordProperty("essp_mean", std::to_string(essp));
  std::printf("mean staleness: ssp %.2f (%.0f%% <= 1), essp %.2f (%.0f%% <= 1)\n", ssp,
              100 * ssp_le1, essp, 100 * essp_le1);
  EXPECT_LT(essp + 1.0, ssp);
  EXPECT_GT(essp_le1, 0.5);
}

TEST(ClientTest, TablesAndArgumentErrors) {
  TempDir dir;
  ClientOptions o;
  o.data_dir = dir.path();
  std::unique_ptr<Client> client;
  ASSERT_TRUE(Client::Open(o, &client).ok());
  EXPECT_TRUE(client->embedded());
  EXPECT_EQ(client->num_shards(), 1u);
  Table t, again, opened;
  ASSERT_TRUE(client->CreateTable(CounterSchema(Consistency::kSsp, 2), &t).ok());
  EXPECT_TRUE(t.valid());
  ASSERT_TRUE(client->CreateTable(CounterSchema(Consistency::kSsp, 2), &again).ok());
  EXPECT_EQ(again.id(), t.id());
  EXPECT_EQ(client->CreateTable(CounterSchema(Consistency::kSsp, 3), &again).code(),
            StatusCode::kAlreadyExists);
  ASSERT_TRUE(client->OpenTable("counters", &opened).ok());
  EXPECT_EQ(opened.id(), t.id());
  EXPECT_EQ(client->OpenTable("nope", &opened).code(), StatusCode::kNotFound);
  std::vector<TableSchema> tables;
  ASSERT_TRUE(client->ListTables(&tables).ok());
  ASSERT_EQ(tables.size(), 1u);
  TableSchema bad = CounterSchema(Consistency::kSsp, 2);
  bad.width = 0;
  EXPECT_EQ(client->CreateTable(bad, &again).code(), StatusCode::kInvalidArgument);

  std::unique_ptr<Worker> w;
  ASSERT_TRUE(client->RegisterWorker(&w).ok());
  float f[kWidth];
  EXPECT_EQ(w->Get(t, 0, f).code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(w->Get(Table(), 0, f).code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(w->IncCell(t, 0, kWidth, 1.0).code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(w->BatchInc(t, {1}, {"xx"}).code(), StatusCode::kInvalidArgument);

  // Cells, sparse-style updates and maps on a dense table.
  ASSERT_TRUE(w->IncCell(t, 3, 2, 5.0).ok());
  ASSERT_TRUE(w->Inc(t, 3, std::vector<std::pair<uint32_t, int64_t>>{{0, 1}, {0, 2}}).ok());
  ASSERT_TRUE(w->BatchInc(t, {3}, {EncodeDense(std::vector<int64_t>{1, 1, 1, 1})}).ok());
  std::map<uint32_t, int64_t> m;
  ASSERT_TRUE(w->Get(t, 3, &m).ok());
  EXPECT_EQ(m, (std::map<uint32_t, int64_t>{{0, 4}, {1, 1}, {2, 6}, {3, 1}}));
}

// Two tables "a" and "b" of one schema in an embedded process and a worker:
// a call under test on a, its equivalent on b, both compared.
struct TwinTables {
  // Opens the process and creates both tables with schema `s`.
  void Open(TableSchema s) {
    o.data_dir = dir.path();
    ASSERT_TRUE(Client::Open(o, &client).ok());
    s.name = "a";
    ASSERT_TRUE(client->CreateTable(s, &a).ok());
    s.name = "b";
    ASSERT_TRUE(client->CreateTable(s, &b).ok());
    ASSERT_TRUE(client->RegisterWorker(&w).ok());
  }
  // After a global barrier, a fresh process on the same store (reads what
  // the shard stored).
  void Reopen() {
    ASSERT_TRUE(w->GlobalBarrier().ok());
    w.reset();
    client.reset();
    ASSERT_TRUE(Client::Open(o, &client).ok());
    ASSERT_TRUE(client->OpenTable("a", &a).ok());
    ASSERT_TRUE(client->OpenTable("b", &b).ok());
    ASSERT_TRUE(client->RegisterWorker(&w).ok());
  }

  TempDir dir;
  ClientOptions o;
  std::unique_ptr<Client> client;
  Table a, b;
  std::unique_ptr<Worker> w;
};

// The batched dense Inc adds exactly what one Inc per row adds (rows in any
// order, across stripes, with duplicates, rows new and cached), and the
// server ends up with the same totals.
TEST(ClientTest, BatchedDenseIncEqualsOneIncPerRow) {
  TwinTables twins;
  ASSERT_NO_FATAL_FAILURE(twins.Open(CounterSchema(Consistency::kSsp, 1)));
  const Table &a = twins.a, &b = twins.b;
  std::unique_ptr<Worker>& w = twins.w;
  std::mt19937_64 rng(5);
  int64_t got[kWidth], want[kWidth];
  for (int clock = 0; clock < 3; ++clock) {
    std::vector<uint64_t> rows;
    std::vector<int64_t> deltas;
    for (int i = 0; i < 500; ++i) {
      rows.push_back(rng() % 300);  // duplicates, and rows read before
      for (uint32_t k = 0; k < kWidth; ++k) deltas.push_back(static_cast<int64_t>(rng() % 7) - 3);
    }
    for (size_t i = 0; i < rows.size(); ++i) {
      ASSERT_TRUE(w->Inc(b, rows[i], deltas.data() + i * kWidth).ok());
    }
    ASSERT_TRUE(w->Inc(a, rows, deltas.data()).ok());
    for (uint64_t r = 0; r < 300; r += 7) {
      ASSERT_TRUE(w->Get(a, r, got).ok());
      ASSERT_TRUE(w->Get(b, r, want).ok());
      ASSERT_TRUE(std::equal(got, got + kWidth, want)) << "row " << r << " clock " << clock;
    }
    ASSERT_TRUE(w->Clock().ok());
  }
  ASSERT_NO_FATAL_FAILURE(twins.Reopen());
  for (uint64_t r = 0; r < 300; ++r) {
    ASSERT_TRUE(w->Get(a, r, got).ok());
    ASSERT_TRUE(w->Get(b, r, want).ok());
    ASSERT_TRUE(std::equal(got, got + kWidth, want)) << "row " << r;
  }
  // Type and kind errors as for one row.
  float f[kWidth] = {};
  EXPECT_EQ(w->Inc(a, std::vector<uint64_t>{1}, f).code(), StatusCode::kInvalidArgument);
  EXPECT_TRUE(w->Inc(a, std::vector<uint64_t>{}, want).ok());
}

// IncGetRows reads exactly what Inc and then GetRows read: every row with all
// of the call's deltas (duplicates too), rows cached and rows never read
// (fetched after the pass), across clocks; and the server ends up with the
// same totals.
TEST(ClientTest, IncGetRowsEqualsIncThenGetRows) {
  TwinTables twins;
  ASSERT_NO_FATAL_FAILURE(twins.Open(CounterSchema(Consistency::kSsp, 1)));
  const Table &a = twins.a, &b = twins.b;
  std::unique_ptr<Worker>& w = twins.w;
  std::mt19937_64 rng(9);
  for (int clock = 0; clock < 4; ++clock) {
    std::vector<uint64_t> rows;
    std::vector<int64_t> deltas;
    // Rows of earlier clocks (cached) and new ones each clock, duplicates.
    for (int i = 0; i < 400; ++i) {
      rows.push_back(rng() % (100 * static_cast<uint64_t>(clock + 1)));
      for (uint32_t k = 0; k < kWidth; ++k) deltas.push_back(static_cast<int64_t>(rng() % 9) - 4);
    }
    std::vector<int64_t> got(rows.size() * kWidth, -1), want(rows.size() * kWidth, -2);
    ASSERT_TRUE(w->IncGetRows(a, rows, deltas.data(), got.data()).ok());
    ASSERT_TRUE(w->Inc(b, rows, deltas.data()).ok());
    ASSERT_TRUE(w->GetRows(b, rows, want.data()).ok());
    ASSERT_EQ(got, want) << "clock " << clock;
    ASSERT_TRUE(w->Clock().ok());
  }
  ASSERT_TRUE(w->GlobalBarrier().ok());
  int64_t x[kWidth], y[kWidth];
  for (uint64_t r = 0; r < 400; ++r) {
    ASSERT_TRUE(w->Get(a, r, x).ok());
    ASSERT_TRUE(w->Get(b, r, y).ok());
    ASSERT_TRUE(std::equal(x, x + kWidth, y)) << "row " << r;
  }
  float f[kWidth] = {}, fo[kWidth];
  EXPECT_EQ(w->IncGetRows(a, std::vector<uint64_t>{1}, f, fo).code(), StatusCode::kInvalidArgument);
  EXPECT_TRUE(w->IncGetRows(a, std::vector<uint64_t>{}, x, y).ok());
}

// IncDiff adds exactly what Inc of the deltas current - base adds, bit for
// bit: integers that wrap, floats whose difference rounds, duplicates, rows
// new and cached, across clocks; and the server ends up with the same totals.
template <typename T>
void ExpectIncDiffEqualsIncOfTheDeltas(ElementType type) {
  TableSchema schema = CounterSchema(Consistency::kSsp, 1);
  schema.type = type;
  TwinTables twins;
  ASSERT_NO_FATAL_FAILURE(twins.Open(schema));
  const Table &a = twins.a, &b = twins.b;
  std::unique_ptr<Worker>& w = twins.w;
  std::mt19937_64 rng(11);
  auto element = [&]() -> T {
    if constexpr (std::is_integral_v<T>) {
      return static_cast<T>(rng());  // differences wrap
    } else {
      return static_cast<T>(std::ldexp(static_cast<double>(rng() % 2001) - 1000.0,
                                       static_cast<int>(rng() % 40) - 20));
    }
  };
  for (int clock = 0; clock < 3; ++clock) {
    std::vector<uint64_t> rows;
    std::vector<T> current, base, deltas;
    for (int i = 0; i < 300; ++i) {
      rows.push_back(rng() % (80 * static_cast<uint64_t>(clock + 1)));
      for (uint32_t k = 0; k < kWidth; ++k) {
        current.push_back(element());
        base.push_back(element());
        deltas.push_back(SubElement(current.back(), base.back()));
      }
    }
    ASSERT_TRUE(w->IncDiff(a, rows, current.data(), base.data()).ok());
    ASSERT_TRUE(w->Inc(b, rows, deltas.data()).ok());
    std::vector<T> got(rows.size() * kWidth), want(rows.size() * kWidth);
    ASSERT_TRUE(w->GetRows(a, rows, got.data()).ok());
    ASSERT_TRUE(w->GetRows(b, rows, want.data()).ok());
    ASSERT_EQ(0, std::memcmp(got.data(), want.data(), got.size() * sizeof(T))) << "clock " << clock;
    ASSERT_TRUE(w->Clock().ok());
  }
  ASSERT_NO_FATAL_FAILURE(twins.Reopen());
  std::vector<uint64_t> all(240);
  for (uint64_t r = 0; r < all.size(); ++r) all[r] = r;
  std::vector<T> got(all.size() * kWidth), want(all.size() * kWidth);
  ASSERT_TRUE(w->GetRows(a, all, got.data()).ok());
  ASSERT_TRUE(w->GetRows(b, all, want.data()).ok());
  EXPECT_EQ(0, std::memcmp(got.data(), want.data(), got.size() * sizeof(T)));
  // Type errors as for Inc.
  const std::vector<uint64_t> one = {1};
  if constexpr (std::is_same_v<T, float>) {
    const double d[kWidth] = {};
    EXPECT_EQ(w->IncDiff(a, one, d, d).code(), StatusCode::kInvalidArgument);
  } else {
    const float f[kWidth] = {};
    EXPECT_EQ(w->IncDiff(a, one, f, f).code(), StatusCode::kInvalidArgument);
  }
  EXPECT_TRUE(w->IncDiff(a, std::vector<uint64_t>{}, got.data(), want.data()).ok());
}

TEST(ClientTest, IncDiffEqualsIncOfTheDeltasI64) {
  ExpectIncDiffEqualsIncOfTheDeltas<int64_t>(ElementType::kI64);
}

TEST(ClientTest, IncDiffEqualsIncOfTheDeltasF32) {
  ExpectIncDiffEqualsIncOfTheDeltas<float>(ElementType::kF32);
}

// Workers of one process at different clocks add to the same rows with the
// batched Inc (a row's deltas of two open clocks): reads see both, totals
// are exact.
TEST(ClientTest, BatchedIncOfWorkersAtDifferentClocks) {
  TempDir dir;
  ClientOptions o;
  o.data_dir = dir.path();
  std::unique_ptr<Client> client;
  ASSERT_TRUE(Client::Open(o, &client).ok());
  Table t;
  ASSERT_TRUE(client->CreateTable(CounterSchema(Consistency::kSsp, 2), &t).ok());
  std::unique_ptr<Worker> behind, ahead;
  ASSERT_TRUE(client->RegisterWorker(&behind).ok());
  ASSERT_TRUE(client->RegisterWorker(&ahead).ok());
  const std::vector<uint64_t> rows = {1, 2, 3, 2, 70, 1};
  const std::vector<int64_t> ones(rows.size() * kWidth, 1);
  ASSERT_TRUE(ahead->Inc(t, rows, ones.data()).ok());  // opens clock 0's deltas
  ASSERT_TRUE(ahead->Clock().ok());                    // ahead at clock 1
  for (int k = 0; k < 3; ++k) {
    ASSERT_TRUE(behind->Inc(t, rows, ones.data()).ok());  // clock 0
    ASSERT_TRUE(ahead->Inc(t, rows, ones.data()).ok());   // clock 1
  }
  int64_t got[kWidth];
  ASSERT_TRUE(behind->Get(t, 2, got).ok());
  EXPECT_EQ(got[0], 7 * 2);  // read-my-writes: every Inc of the process
  ASSERT_TRUE(behind->Clock().ok());
  ASSERT_TRUE(behind->Clock().ok());
  ASSERT_TRUE(ahead->Clock().ok());
  ASSERT_TRUE(behind->GlobalBarrier().ok());
  behind.reset();
  ahead.reset();
  client.reset();
  ASSERT_TRUE(Client::Open(o, &client).ok());
  ASSERT_TRUE(client->OpenTable(t.schema().name, &t).ok());
  std::unique_ptr<Worker> w;
  ASSERT_TRUE(client->RegisterWorker(&w).ok());
  for (const auto& [row, times] :
       std::vector<std::pair<uint64_t, int64_t>>{{1, 14}, {2, 14}, {3, 7}, {70, 7}, {4, 0}}) {
    ASSERT_TRUE(w->Get(t, row, got).ok());
    EXPECT_EQ(got[0], times) << "row " << row;
  }
}

TEST(ClientTest, SparseTables) {
  TempDir dir;
  ClientOptions o;
  o.data_dir = dir.path();
  std::unique_ptr<Client> client;
  ASSERT_TRUE(Client::Open(o, &client).ok());
  TableSchema schema;
  schema.name = "sparse";
  schema.kind = RowKind::kSparse;
  schema.type = ElementType::kF64;
  schema.width = 0;
  schema.consistency = Consistency::kEssp;
  schema.staleness = 1;
  Table t;
  ASSERT_TRUE(client->CreateTable(schema, &t).ok());
  std::unique_ptr<Worker> a, b;
  ASSERT_TRUE(client->RegisterWorker(&a).ok());
  ASSERT_TRUE(client->RegisterWorker(&b).ok());
  ASSERT_TRUE(a->Inc(t, 1, std::vector<std::pair<uint32_t, double>>{{100, 1.5}, {7, 2}}).ok());
  ASSERT_TRUE(b->IncCell(t, 1, 7, 1.0).ok());
  std::map<uint32_t, double> m;
  ASSERT_TRUE(a->Get(t, 1, &m).ok());
  EXPECT_EQ(m, (std::map<uint32_t, double>{{7, 3.0}, {100, 1.5}}));
  double dense[1];
  EXPECT_EQ(a->Get(t, 1, dense).code(), StatusCode::kInvalidArgument);
  for (int i = 0; i < 3; ++i) {
    ASSERT_TRUE(a->Clock().ok());
    ASSERT_TRUE(b->Clock().ok());
  }
  ASSERT_TRUE(b->Inc(t, 1, std::vector<std::pair<uint32_t, double>>{{100, -1.5}}).ok());
  ASSERT_TRUE(a->Get(t, 1, &m).ok());
  EXPECT_EQ(m, (std::map<uint32_t, double>{{7, 3.0}}));
}

// An essp f32 table "factors" of `width` columns, normal initializer
// (mean 0, sd 0.1) of `seed`.
TableSchema FactorSchema(uint32_t width, uint32_t staleness, uint64_t seed) {
  TableSchema schema;
  schema.name = "factors";
  schema.type = ElementType::kF32;
  schema.width = width;
  schema.consistency = Consistency::kEssp;
  schema.staleness = staleness;
  schema.init = Initializer{InitKind::kNormal, 0.0, 0.1, seed};
  return schema;
}

// A fresh table's rows read as the initializer bit for bit (made by the
// client: the table is this process's, or, after the restart, sent by the
// shard without bytes, as rows without a record); after Incs they read as
// initializer + deltas, also after the shard restarts.
TEST(ClientTest, NeverWrittenRowsReadAsTheInitializerAndStayExact) {
  constexpr uint32_t kW = 64;
  constexpr uint64_t kRows = 200;
  TempDir dir;
  const TableSchema schema = FactorSchema(kW, /*staleness=*/0, /*seed=*/17);
  auto expected = [&](const TableSchema& t, uint64_t r, int incs) {
    std::string v;
    InitRow(t, r, &v);
    std::vector<float> out = DecodeDense<float>(v);
    for (int i = 0; i < incs; ++i) {
      for (uint32_t j = 0; j < kW; ++j) out[j] += 0.5f * static_cast<float>(j + r % 7);
    }
    return out;
  };
  std::vector<float> delta(kW), got(kW);
  ClientOptions o;
  o.data_dir = dir.path();
  TableSchema created;
  for (int round = 0; round < 2; ++round) {
    SCOPED_TRACE(round == 0 ? "fresh" : "after a restart");
    std::unique_ptr<Client> client;
    ASSERT_TRUE(OpenEmbedded(o, &client).ok());
    Table t;
    ASSERT_TRUE(client->CreateTable(schema, &t).ok());
    created = schema;
    created.id = t.id();
    std::unique_ptr<Worker> w;
    ASSERT_TRUE(client->RegisterWorker(&w).ok());
    const uint64_t before = client->Stats().bytes_received;
    for (uint64_t r = 0; r < kRows; ++r) {
      ASSERT_TRUE(w->Get(t, r, got.data()).ok());
      // Rows 0..99 got one Inc per round so far, the others none.
      ASSERT_EQ(got, expected(created, r, r < kRows / 2 ? round : 0)) << "row " << r;
    }
    if (round == 0) {
      // Not one row's bytes came from the shard.
      EXPECT_LT(client->Stats().bytes_received - before, kRows * kW * sizeof(float) / 4);
    }
    for (uint64_t r = 0; r < kRows / 2; ++r) {
      for (uint32_t j = 0; j < kW; ++j) delta[j] = 0.5f * static_cast<float>(j + r % 7);
      ASSERT_TRUE(w->Inc(t, r, delta.data()).ok());
    }
    ASSERT_TRUE(w->Clock().ok());
    ASSERT_TRUE(client->Flush().ok());
    for (uint64_t r = 0; r < kRows; ++r) {
      ASSERT_TRUE(w->Get(t, r, got.data()).ok());
      ASSERT_EQ(got, expected(created, r, r < kRows / 2 ? round + 1 : 0)) << "row " << r;
    }
  }
}

// The table of the tests of ClientOptions::init_new_rows: rows of 2 KiB,
// normal initializer; rows below kLocalRows / 3 get 0.25 * (j + 1) per clock
// they are updated in.
constexpr uint32_t kLocalW = 512;
constexpr uint64_t kLocalRows = 300;

TableSchema LocalInitSchema() { return FactorSchema(kLocalW, /*staleness=*/1, /*seed=*/5); }

std::vector<uint64_t> RowRange(uint64_t first, uint64_t n) {
  std::vector<uint64_t> rows(n);
  for (uint64_t i = 0; i < n; ++i) rows[i] = first + i;
  return rows;
}

// Adds one clock's deltas to the updated rows and clocks.
void UpdateAndClock(Worker* w, const Table& t) {
  const std::vector<uint64_t> updated = RowRange(0, kLocalRows / 3);
  std::vector<float> deltas(updated.size() * kLocalW);
  for (size_t i = 0; i < updated.size(); ++i) {
    for (uint32_t j = 0; j < kLocalW; ++j) deltas[i * kLocalW + j] = 0.25f * (j + 1.0f);
  }
  ASSERT_TRUE(w->Inc(t, updated, deltas.data()).ok());
  ASSERT_TRUE(w->Clock().ok());
}

// Reads every row and compares it with the initializer plus `clocks` updates,
// within float rounding: a shard adds the initializer to the sum of a row's
// deltas, the client each delta to the value in turn.
void CheckLocalRows(Worker* w, const Table& t, int clocks) {
  TableSchema schema = LocalInitSchema();
  schema.id = t.id();
  std::vector<float> got(kLocalRows * kLocalW);
  ASSERT_TRUE(w->GetRows(t, RowRange(0, kLocalRows), got.data()).ok());
  for (uint64_t r = 0; r < kLocalRows; ++r) {
    std::string v;
    InitRow(schema, r, &v);
    std::vector<float> want = DecodeDense<float>(v);
    for (int c = 0; r < kLocalRows / 3 && c < clocks; ++c) {
      for (uint32_t j = 0; j < kLocalW; ++j) want[j] += 0.25f * (j + 1.0f);
    }
    for (uint32_t j = 0; j < kLocalW; ++j) {
      ASSERT_NEAR(got[r * kLocalW + j], want[j], 1e-4) << "row " << r << " column " << j;
    }
  }
}

// In a one-client job the rows of a table this process created have no
// record at the shard until the process sends them: their first reads are
// answered by the client with the initializer (rows_initialized), not by
// Reads (rows_fetched: the first essp Read only, which registers the process
// for its PushDones), and a Prefetch of them does nothing. Once a row the process sent leaves the
// cache, every read goes to the shard again, and a table the process did not create (reopened) is
// always read from the shard.
TEST(ClientTest, RowsOfATableTheProcessCreatedAreInitializedWithoutReads) {
  TempDir dir;
  ClientOptions o;
  o.data_dir = dir.path();
  {
    SCOPED_TRACE("created by this process");
    std::unique_ptr<Client> client;
    ASSERT_TRUE(OpenEmbedded(o, &client).ok());
    Table t;
    ASSERT_TRUE(client->CreateTable(LocalInitSchema(), &t).ok());
    std::unique_ptr<Worker> w;
    ASSERT_TRUE(client->RegisterWorker(&w).ok());
    std::vector<float> one(kLocalW);
    ASSERT_TRUE(w->Get(t, kLocalRows - 1, one.data()).ok());  // a Read: registers for PushDones
    // A Prefetch has nothing to do: no Read, and no row is made before
    // its first read.
    ASSERT_TRUE(w->Prefetch(t, RowRange(0, kLocalRows)).ok());
    TableStats ts = client->Stats().tables[0];
    EXPECT_EQ(ts.rows_fetched, 1u);
    EXPECT_EQ(ts.rows_initialized, 0u);
    CheckLocalRows(w.get(), t, 0);
    ts = client->Stats().tables[0];
    EXPECT_EQ(ts.rows_fetched, 1u);
    EXPECT_EQ(ts.rows_initialized, kLocalRows - 1);
    for (int c = 0; c < 3; ++c) {
      UpdateAndClock(w.get(), t);
      CheckLocalRows(w.get(), t, c + 1);
    }
    ASSERT_TRUE(client->Flush().ok());
    ts = client->Stats().tables[0];
    EXPECT_EQ(ts.rows_fetched, 1u);  // kept current by PushDones, never pulled
    EXPECT_EQ(ts.rows_initialized, kLocalRows - 1);
  }
  {
    SCOPED_TRACE("reopened: the table has rows");
    std::unique_ptr<Client> client;
    ASSERT_TRUE(OpenEmbedded(o, &client).ok());
    Table t;
    ASSERT_TRUE(client->CreateTable(LocalInitSchema(), &t).ok());  // exists: not made here
    std::unique_ptr<Worker> w;
    ASSERT_TRUE(client->RegisterWorker(&w).ok());
    // Here a Prefetch reads every row.
    ASSERT_TRUE(w->Prefetch(t, RowRange(0, kLocalRows)).ok());
    EXPECT_EQ(client->Stats().tables[0].rows_fetched, kLocalRows);
    CheckLocalRows(w.get(), t, 3);
    const TableStats ts = client->Stats().tables[0];
    EXPECT_EQ(ts.rows_initialized, 0u);
    EXPECT_EQ(ts.rows_fetched, kLocalRows);
  }
  {
    SCOPED_TRACE("a cache smaller than the rows: a sent row leaves it");
    TempDir small_dir;
    ClientOptions so = o;
    so.data_dir = small_dir.path();
    so.cache_mb = 1;  // ~400 rows of 2 KiB across the stripes
    std::unique_ptr<Client> client;
    ASSERT_TRUE(OpenEmbedded(so, &client).ok());
    Table t;
    ASSERT_TRUE(client->CreateTable(LocalInitSchema(), &t).ok());
    std::unique_ptr<Worker> w;
    ASSERT_TRUE(client->RegisterWorker(&w).ok());
    UpdateAndClock(w.get(), t);
    ASSERT_TRUE(client->Flush().ok());
    // Rows never written stream through the cache until it has dropped the
    // updated ones; each must then come back from the shard with its delta.
    std::vector<float> sink(100 * kLocalW);
    for (uint64_t first = kLocalRows; first < kLocalRows + 2000; first += 100) {
      ASSERT_TRUE(w->GetRows(t, RowRange(first, 100), sink.data()).ok());
    }
    ASSERT_GT(client->Stats().tables[0].evictions, 0u);
    const uint64_t fetched_before = client->Stats().tables[0].rows_fetched;
    CheckLocalRows(w.get(), t, 1);
    EXPECT_GT(client->Stats().tables[0].rows_fetched, fetched_before);
  }
}

// A worker ahead of the process clock by more than the staleness bound
// needs a version whose clocks the other worker has not finished, which the
// client cannot answer with the initializer: its Prefetch of a local table
// sends the rows in one Read (parked at the shard), and once the other
// worker clocks they read as the initializer.
TEST(ClientTest, APrefetchAheadOfTheProcessClockReadsLocalRowsFromTheShard) {
  TempDir dir;
  ClientOptions o;
  o.data_dir = dir.path();
  std::unique_ptr<Client> client;
  ASSERT_TRUE(OpenEmbedded(o, &client).ok());
  Table t;
  ASSERT_TRUE(client->CreateTable(LocalInitSchema(), &t).ok());
  std::unique_ptr<Worker> ahead;
  std::unique_ptr<Worker> behind;
  ASSERT_TRUE(client->RegisterWorker(&ahead).ok());
  ASSERT_TRUE(client->RegisterWorker(&behind).ok());
  std::vector<float> one(kLocalW);
  ASSERT_TRUE(ahead->Get(t, kLocalRows - 1, one.data()).ok());  // a Read: registers for PushDones
  ASSERT_TRUE(ahead->Clock().ok());
  // At clock 1 version 0 is enough (staleness 1): nothing to fetch.
  ASSERT_TRUE(ahead->Prefetch(t, RowRange(0, 10)).ok());
  EXPECT_EQ(client->Stats().tables[0].rows_fetched, 1u);
  EXPECT_EQ(client->Stats().tables[0].rows_initialized, 0u);
  // At clock 2 it needs version 1; the other worker is still at clock 0.
  ASSERT_TRUE(ahead->Clock().ok());
  ASSERT_TRUE(ahead->Prefetch(t, RowRange(10, 10)).ok());
  EXPECT_EQ(client->Stats().tables[0].rows_fetched, 11u);
  ASSERT_TRUE(behind->Clock().ok());
  CheckLocalRows(ahead.get(), t, 0);
  EXPECT_EQ(client->Stats().tables[0].rows_fetched, 11u);  // the rest answered here
}

// Rows are read from the shard when the client may not make them: the
// option is off, or another client process could have written them.
TEST(ClientTest, RowsAreReadFromTheShardWithoutInitNewRowsOrWithTwoClients) {
  for (const char* how : {"init_new_rows off", "two client processes"}) {
    SCOPED_TRACE(how);
    TempDir dir;
    ClientOptions o;
    o.data_dir = dir.path();
    if (std::string(how) == "init_new_rows off") {
      o.init_new_rows = false;
    } else {
      o.num_clients = 2;  // client 1 never comes: only reads of clock 0
    }
    std::unique_ptr<Client> client;
    ASSERT_TRUE(OpenEmbedded(o, &client).ok());
    Table t;
    ASSERT_TRUE(client->CreateTable(LocalInitSchema(), &t).ok());
    std::unique_ptr<Worker> w;
    ASSERT_TRUE(client->RegisterWorker(&w).ok());
    CheckLocalRows(w.get(), t, 0);
    const TableStats ts = client->Stats().tables[0];
    EXPECT_EQ(ts.rows_initialized, 0u);
    EXPECT_EQ(ts.rows_fetched, kLocalRows);
  }
}

TEST(ClientTest, GlobalBarrierWaitsForEveryWorker) {
  TempDir dir;
  ClientOptions o;
  o.data_dir = dir.path();
  std::unique_ptr<Client> client;
  ASSERT_TRUE(Client::Open(o, &client).ok());
  Table t;
  ASSERT_TRUE(client->CreateTable(CounterSchema(Consistency::kSsp, 3, 1), &t).ok());
  std::unique_ptr<Worker> a, b;
  ASSERT_TRUE(client->RegisterWorker(&a).ok());
  ASSERT_TRUE(client->RegisterWorker(&b).ok());
  std::atomic<bool> passed{false};
  std::thread ta([&] {
    for (int i = 0; i < 3; ++i) ASSERT_TRUE(a->Clock().ok());
    ASSERT_TRUE(a->GlobalBarrier().ok());
    passed = true;
  });
  std::this_thread::sleep_for(std::chrono::milliseconds(50));
  EXPECT_FALSE(passed.load()) << "barrier passed while worker b was at clock 0";
  for (int i = 0; i < 3; ++i) ASSERT_TRUE(b->Clock().ok());
  ta.join();
  EXPECT_TRUE(passed.load());
  EXPECT_GT(client->Stats().clock_blocked_seconds, 0.0);
}

TEST(ClientTest, OpenErrors) {
  std::unique_ptr<Client> client;
  ClientOptions o;
  o.client_id = 2;
  o.num_clients = 2;
  EXPECT_EQ(Client::Open(o, &client).code(), StatusCode::kInvalidArgument);
  o = ClientOptions();
  o.servers = {"localhost"};
  EXPECT_EQ(Client::Open(o, &client).code(), StatusCode::kInvalidArgument);
  o.servers = {"127.0.0.1:1"};  // nothing listens there
  o.connect_timeout_ms = 200;
  EXPECT_EQ(Client::Open(o, &client).code(), StatusCode::kUnavailable);
}

}  // namespace
}  // namespace pace
