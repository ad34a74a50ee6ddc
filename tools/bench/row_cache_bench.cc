// The client cache's per-row passes of a clock that are not the workers':
// the seal of each row's open delta (folded into the value, copied into the
// part's arena, recorded as the row's pending delta) and the purge of the
// Ack. One stripe of many 512-byte f32 rows, touched in a random order each
// clock, as a model-scale clock's rows lie in memory (report only: no
// baseline, no target; docs/data-path.md).
#include <benchmark/benchmark.h>

#include <algorithm>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include "client/row_cache.h"
#include "common/byte_arena.h"

namespace pace::client {
namespace {

constexpr uint32_t kWidth = 128;

struct Rows {
  explicit Rows(size_t n) : table(Schema(), 0, nullptr), entries(n), order(n) {
    st.budget = size_t{1} << 40;
    SpinLock lock(&st.mu);
    const std::string value(kWidth * sizeof(float), '\0');
    for (size_t i = 0; i < n; ++i) {
      entries[i] = st.FindOrCreate(RowKey{1, i}, 0, &table);
      st.InstallValue(entries[i], value, 0, 0);
      order[i] = i;
    }
  }
  static TableSchema Schema() {
    TableSchema s;
    s.id = 1;
    s.name = "t";
    s.type = ElementType::kF32;
    s.width = kWidth;
    return s;
  }
  // Every row gets an open delta of clock c, in a fresh random order.
  void AddAll(ClockT c) REQUIRES(st.mu) {
    std::shuffle(order.begin(), order.end(), rng);
    for (size_t i : order) st.AddDelta(entries[i], c, delta);
  }
  // The seal of clock c in slices, with the sealer's look-ahead
  // (Client::Impl::SendBatch).
  size_t SealAll(ClockT c, ByteArena* arena) REQUIRES(st.mu) {
    size_t sealed = 0;
    for (;;) {
      st.TakeDirty(c, 256, &dirty);
      if (dirty.empty()) return sealed;
      for (size_t i = 0; i < dirty.size(); ++i) {
        PrefetchForSeal(dirty, i);
        if (st.Seal(dirty[i], c, 0, arena) != nullptr) ++sealed;
      }
    }
  }
  void PurgeAll(ClockT c) REQUIRES(st.mu) {
    std::shuffle(order.begin(), order.end(), rng);
    for (size_t i : order) st.PurgeAcked(RowKey{1, i}, c);
  }

  TableState table;
  CacheStripe st;
  std::vector<CacheEntry*> entries;
  std::vector<size_t> order;
  std::vector<CacheEntry*> dirty;
  std::mt19937_64 rng{1};
  const std::string delta = std::string(kWidth * sizeof(float), '\1');
};

// One clock per iteration (open deltas added to every row, sealed, purged),
// timing the seal or the purge.
enum class Timed { kSeal, kPurge };
void RunClocks(benchmark::State& state, Timed timed) {
  Rows rows(static_cast<size_t>(state.range(0)));
  SpinLock lock(&rows.st.mu);
  ClockT c = 0;
  for (auto _ : state) {
    state.PauseTiming();
    rows.AddAll(c);
    auto arena = std::make_unique<ByteArena>();
    if (timed == Timed::kSeal) state.ResumeTiming();
    benchmark::DoNotOptimize(rows.SealAll(c, arena.get()));
    if (timed == Timed::kSeal) state.PauseTiming();
    if (timed == Timed::kPurge) state.ResumeTiming();
    rows.PurgeAll(c++);
    if (timed == Timed::kPurge) state.PauseTiming();
    arena.reset();
    state.ResumeTiming();
  }
  state.SetItemsProcessed(static_cast<int64_t>(state.iterations()) * state.range(0));
}

void BM_SealClock(benchmark::State& state) { RunClocks(state, Timed::kSeal); }
void BM_PurgeClock(benchmark::State& state) { RunClocks(state, Timed::kPurge); }

// 450k rows: a clock of the dense shape (8c).
BENCHMARK(BM_SealClock)->Arg(450000)->Unit(benchmark::kMillisecond)->UseRealTime();
BENCHMARK(BM_PurgeClock)->Arg(450000)->Unit(benchmark::kMillisecond)->UseRealTime();

}  // namespace
}  // namespace pace::client

BENCHMARK_MAIN();
