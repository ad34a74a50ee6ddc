// Benchmarks 1 and 2, embedded client, rows of 100 f32:
//  1. cache-hit Get into a caller buffer vs std::unordered_map lookup + copy
//     (target <= 2x the baseline's time per read), 1 and 2 threads;
//  2. Inc into the oplog vs a hash-map lookup + vector add (target <= 2x).
#include <benchmark/benchmark.h>
#include <unistd.h>

#include <filesystem>
#include <memory>
#include <mutex>
#include <random>
#include <unordered_map>
#include <vector>

#include "client/pace.h"
#include "tools/bench/ratio.h"
#include "tools/bench/scratch.h"

namespace pace {
namespace {

constexpr uint32_t kWidth = 100;
constexpr uint64_t kRows = 10000;

// Random row ids, shared by subject and baseline so both see the same pattern.
const std::vector<uint64_t>& RowSequence() {
  static const std::vector<uint64_t>* seq = [] {
    auto* v = new std::vector<uint64_t>(1 << 16);
    std::mt19937_64 rng(1);
    for (auto& r : *v) r = rng() % kRows;
    return v;
  }();
  return *seq;
}

// One embedded client shared by every benchmark in this process.
struct Fixture {
  std::unique_ptr<Client> client;
  Table table;      // read by BM_PaceGet only: no open deltas, every row cached
  Table inc_table;  // updated by BM_PaceInc (Inc leaves open deltas that Get would add)
  std::string dir;

  static Fixture& Get() {
    static Fixture* f = [] {
      auto* fx = new Fixture();
      fx->dir = (bench::ScratchRoot() / ("pace-bench-client-" + std::to_string(getpid()))).string();
      std::error_code ignored;  // a leftover is harmless; never an exception
      std::filesystem::remove_all(fx->dir, ignored);
      ClientOptions o;
      o.data_dir = fx->dir;
      Status s = Client::Open(o, &fx->client);
      TableSchema schema;
      schema.name = "w";
      schema.width = kWidth;
      schema.consistency = Consistency::kSsp;
      schema.staleness = 1000000;  // every cached row stays fresh: measure the hit path
      if (s.ok()) s = fx->client->CreateTable(schema, &fx->table);
      schema.name = "inc";
      if (s.ok()) s = fx->client->CreateTable(schema, &fx->inc_table);
      if (!s.ok()) {
        std::fprintf(stderr, "client fixture: %s\n", s.ToString().c_str());
        std::abort();
      }
      // Warm the cache with every row.
      std::unique_ptr<Worker> w;
      s = fx->client->RegisterWorker(&w);
      std::vector<float> buf(kWidth);
      for (uint64_t r = 0; s.ok() && r < kRows; ++r) s = w->Get(fx->table, r, buf.data());
      if (!s.ok()) std::abort();
      return fx;
    }();
    return *f;
  }
};

std::unordered_map<uint64_t, std::vector<float>>& BaselineMap() {
  static auto* m = [] {
    auto* map = new std::unordered_map<uint64_t, std::vector<float>>();
    for (uint64_t r = 0; r < kRows; ++r) map->emplace(r, std::vector<float>(kWidth, 0.5f));
    return map;
  }();
  return *m;
}

std::mutex& BaselineMutex() {
  static std::mutex mu;
  return mu;
}

void BM_MapGet(benchmark::State& state) {
  auto& map = BaselineMap();
  const auto& seq = RowSequence();
  std::vector<float> out(kWidth);
  size_t i = static_cast<size_t>(state.thread_index()) * 7919;
  for (auto _ : state) {
    // A mutex, as any map shared by threads needs one.
    std::lock_guard<std::mutex> l(BaselineMutex());
    const auto& v = map.find(seq[i++ & (seq.size() - 1)])->second;
    std::copy(v.begin(), v.end(), out.begin());
    benchmark::DoNotOptimize(out.data());
  }
  state.SetItemsProcessed(state.iterations());
}

// The same without the mutex: a map nobody writes, read by one thread. A
// stricter baseline than a cache that takes updates concurrently can have.
void BM_MapGetUnlocked(benchmark::State& state) {
  auto& map = BaselineMap();
  const auto& seq = RowSequence();
  std::vector<float> out(kWidth);
  size_t i = 0;
  for (auto _ : state) {
    const auto& v = map.find(seq[i++ & (seq.size() - 1)])->second;
    std::copy(v.begin(), v.end(), out.begin());
    benchmark::DoNotOptimize(out.data());
  }
  state.SetItemsProcessed(state.iterations());
}

void BM_PaceGet(benchmark::State& state) {
  Fixture& fx = Fixture::Get();
  std::unique_ptr<Worker> w;
  if (!fx.client->RegisterWorker(&w).ok()) state.SkipWithError("RegisterWorker");
  const auto& seq = RowSequence();
  std::vector<float> out(kWidth);
  size_t i = static_cast<size_t>(state.thread_index()) * 7919;
  for (auto _ : state) {
    Status s = w->Get(fx.table, seq[i++ & (seq.size() - 1)], out.data());
    if (!s.ok()) state.SkipWithError(s.ToString().c_str());
    benchmark::DoNotOptimize(out.data());
  }
  state.SetItemsProcessed(state.iterations());
}

void BM_MapInc(benchmark::State& state) {
  auto& map = BaselineMap();
  const auto& seq = RowSequence();
  std::vector<float> delta(kWidth, 0.001f);
  size_t i = 0;
  for (auto _ : state) {
    std::lock_guard<std::mutex> l(BaselineMutex());
    auto& v = map.find(seq[i++ & (seq.size() - 1)])->second;
    for (uint32_t c = 0; c < kWidth; ++c) v[c] += delta[c];
    benchmark::DoNotOptimize(v.data());
  }
  state.SetItemsProcessed(state.iterations());
}

void BM_PaceInc(benchmark::State& state) {
  Fixture& fx = Fixture::Get();
  std::unique_ptr<Worker> w;
  if (!fx.client->RegisterWorker(&w).ok()) state.SkipWithError("RegisterWorker");
  const auto& seq = RowSequence();
  std::vector<float> delta(kWidth, 0.001f);
  size_t i = 0;
  for (auto _ : state) {
    Status s = w->Inc(fx.inc_table, seq[i++ & (seq.size() - 1)], delta.data());
    if (!s.ok()) state.SkipWithError(s.ToString().c_str());
  }
  state.SetItemsProcessed(state.iterations());
}

BENCHMARK(BM_MapGet)->Threads(1)->Threads(2)->UseRealTime();
BENCHMARK(BM_MapGetUnlocked)->UseRealTime();
BENCHMARK(BM_PaceGet)->Threads(1)->Threads(2)->UseRealTime();
BENCHMARK(BM_MapInc)->UseRealTime();
BENCHMARK(BM_PaceInc)->UseRealTime();

}  // namespace
}  // namespace pace

int main(int argc, char** argv) {
  using pace::bench::Pair;
  Pair("1 cache-hit Get, 1 thread (time/read vs unordered_map lookup+copy)",
       "BM_MapGet/real_time/threads:1", "BM_PaceGet/real_time/threads:1",
       pace::bench::kTimeRatioAtMost, 2.0);
  Pair("1 cache-hit Get, 2 threads (time/read vs unordered_map lookup+copy)",
       "BM_MapGet/real_time/threads:2", "BM_PaceGet/real_time/threads:2",
       pace::bench::kTimeRatioAtMost, 2.0);
  Pair("1b cache-hit Get, 1 thread, vs the map without a mutex (report only)",
       "BM_MapGetUnlocked/real_time", "BM_PaceGet/real_time/threads:1",
       pace::bench::kTimeRatioAtMost, 0);
  Pair("2 Inc coalescing (time/Inc vs hash lookup + vector add)", "BM_MapInc/real_time",
       "BM_PaceInc/real_time", pace::bench::kTimeRatioAtMost, 2.0);
  return pace::bench::RunAndReport(argc, argv);
}
