// The row cache (ShardStoreOptions::row_cache_mb) must be invisible: every
// value read through it is bit-identical to what RocksDB alone returns for
// the same history, under random batches, reads, evictions, flushes and
// compactions, drops, restarts and concurrent writers.
#include <gtest/gtest.h>

#include <algorithm>
#include <atomic>
#include <cmath>
#include <cstring>
#include <filesystem>
#include <map>
#include <random>
#include <set>
#include <thread>
#include <tuple>

#include "common/row.h"
#include "storage/shard_store.h"
#include "storage/testing/storage_test_util.h"

namespace pace {
namespace {

using testing_util::MakeSchema;
using testing_util::OpenOrDie;

ShardStoreOptions Opts(uint32_t clients, size_t row_cache_mb, bool delta_only_rows = true) {
  ShardStoreOptions o;
  o.delta_only_rows = delta_only_rows;
  o.num_clients = clients;
  o.block_cache_mb = 4;
  o.write_buffer_mb = 1;  // frequent flushes and compactions
  o.row_cache_mb = row_cache_mb;
  return o;
}

// Schemas of the randomized test: wide rows so that a 1 MiB cache holds only
// a few hundred of them and evicts all the time.
std::vector<TableSchema> RandomTestSchemas() {
  std::vector<TableSchema> out;
  TableSchema normal = MakeSchema("f32_normal", RowKind::kDense, ElementType::kF32, 1000);
  normal.init = Initializer{InitKind::kNormal, 0.1, 0.5, 42};
  out.push_back(normal);
  TableSchema uniform = MakeSchema("f64_uniform", RowKind::kDense, ElementType::kF64, 120);
  uniform.init = Initializer{InitKind::kUniform, -1, 1, 7};
  out.push_back(uniform);
  out.push_back(MakeSchema("f32_zeros", RowKind::kDense, ElementType::kF32, 200));
  out.push_back(MakeSchema("i64", RowKind::kDense, ElementType::kI64, 50));
  out.push_back(MakeSchema("sparse_f32", RowKind::kSparse, ElementType::kF32, 0));
  out.push_back(MakeSchema("sparse_i32", RowKind::kSparse, ElementType::kI32, 1000));
  for (size_t i = 0; i < out.size(); ++i) out[i].id = static_cast<uint32_t>(10 + i);
  return out;
}

// A random delta of table `s`.
std::string RandomDelta(const TableSchema& s, std::mt19937_64& rng) {
  std::uniform_real_distribution<double> unit(-1, 1);
  auto put = [&](std::string* out, bool zero) {
    switch (s.type) {
      case ElementType::kF32: {
        float x = zero ? 0.0f : static_cast<float>(unit(rng));
        out->append(reinterpret_cast<const char*>(&x), 4);
        break;
      }
      case ElementType::kF64: {
        double x = zero ? 0.0 : unit(rng) * 1e3;
        out->append(reinterpret_cast<const char*>(&x), 8);
        break;
      }
      case ElementType::kI32: {
        int32_t x = zero ? 0 : static_cast<int32_t>(rng() % 7) - 3;
        out->append(reinterpret_cast<const char*>(&x), 4);
        break;
      }
      case ElementType::kI64: {
        int64_t x = zero ? 0 : static_cast<int64_t>(rng());
        out->append(reinterpret_cast<const char*>(&x), 8);
        break;
      }
    }
  };
  std::string bytes;
  if (s.kind == RowKind::kDense) {
    for (uint32_t c = 0; c < s.width; ++c) put(&bytes, false);
    return bytes;
  }
  std::set<uint32_t> cols;
  const uint32_t bound = s.width == 0 ? 64 : std::min<uint32_t>(s.width, 64);
  for (int i = rng() % 8; i > 0; --i) cols.insert(static_cast<uint32_t>(rng() % bound));
  uint32_t n = static_cast<uint32_t>(cols.size());
  bytes.append(reinterpret_cast<const char*>(&n), 4);
  for (uint32_t c : cols) bytes.append(reinterpret_cast<const char*>(&c), 4);
  for (size_t i = 0; i < cols.size(); ++i) put(&bytes, rng() % 6 == 0);  // some explicit zeros
  return bytes;
}

// Whether two reads of a row agree: bit for bit, or with delta-only rows
// (whose float sums are added in per-write-back parts, depending on what each
// store had cached) floats within a relative 1e-4 (f32) / 1e-10 (f64).
::testing::AssertionResult SameRow(const TableSchema& s, const std::string& a, const std::string& b,
                                   bool exact) {
  if (a == b) return ::testing::AssertionSuccess();
  if (exact || s.type == ElementType::kI32 || s.type == ElementType::kI64) {
    return ::testing::AssertionFailure() << "rows differ";
  }
  auto close = [&](double x, double y) {
    const double tol = (s.type == ElementType::kF32 ? 1e-4 : 1e-10) * (1 + std::fabs(y));
    return std::fabs(x - y) <= tol;
  };
  auto values = [&](const std::string& row) {
    std::map<uint32_t, double> v;
    if (s.kind == RowKind::kDense && s.type == ElementType::kF32) {
      const std::vector<float> d = DecodeDense<float>(row);
      for (uint32_t c = 0; c < d.size(); ++c) v[c] = d[c];
    } else if (s.kind == RowKind::kDense) {
      const std::vector<double> d = DecodeDense<double>(row);
      for (uint32_t c = 0; c < d.size(); ++c) v[c] = d[c];
    } else if (s.type == ElementType::kF32) {
      for (const auto& [c, x] : DecodeSparse<float>(row)) v[c] = x;
    } else {
      for (const auto& [c, x] : DecodeSparse<double>(row)) v[c] = x;
    }
    return v;
  };
  std::map<uint32_t, double> va = values(a), vb = values(b);
  for (const auto& [c, x] : va) {
    if (!close(x, vb.count(c) ? vb[c] : 0)) return ::testing::AssertionFailure() << "col " << c;
  }
  for (const auto& [c, y] : vb) {
    if (!close(va.count(c) ? va[c] : 0, y)) return ::testing::AssertionFailure() << "col " << c;
  }
  return ::testing::AssertionSuccess();
}

// Store `cached` (1 MiB row cache) and store `plain` (no cache) receive the
// same history; they flush at different times. Every read must agree bit for
// bit (with delta-only rows: floats within rounding, see SameRow), and what
// the cached store serves must equal bit for bit what its RocksDB holds once
// written back. With float partial merges (a reassociated sum) or a cache
// update out of order this fails within a few hundred steps.
class CacheModelTest : public ::testing::TestWithParam<std::tuple<int, bool>> {
 protected:
  void SetUp() override {
    ASSERT_FALSE(tmp_.path().empty());
    rng_.seed(std::get<0>(GetParam()));
    check_rng_.seed(std::get<0>(GetParam()));
    delta_only_ = std::get<1>(GetParam());
    cached_ = OpenOrDie(Opts(kClients, 1, delta_only_), tmp_.Sub("cached"));
    plain_ = OpenOrDie(Opts(kClients, 0, delta_only_), tmp_.Sub("plain"));
    ASSERT_NE(cached_, nullptr);
    ASSERT_NE(plain_, nullptr);
    schemas_ = RandomTestSchemas();
    for (const TableSchema& s : schemas_) CreateInBoth(s);
    applied_.assign(kClients, 0);
  }

  void CreateInBoth(const TableSchema& s) {
    ASSERT_TRUE(cached_->CreateTable(s, nullptr).ok());
    ASSERT_TRUE(plain_->CreateTable(s, nullptr).ok());
  }

  uint64_t RandomRow() { return rng_() % 50 == 0 ? rng_() : rng_() % 600; }

  void ApplyRandomBatch() {
    const ClientId client = static_cast<ClientId>(rng_() % kClients);
    std::vector<std::string> storage;
    std::vector<RowDelta> deltas;
    const int n = 1 + rng_() % 30;
    storage.reserve(n);
    for (int i = 0; i < n; ++i) {
      const TableSchema& s = schemas_[rng_() % schemas_.size()];
      storage.push_back(RandomDelta(s, rng_));
      // Hot rows repeat, so some rows collect many operands between flushes.
      const uint64_t row = rng_() % 3 == 0 ? rng_() % 8 : RandomRow();
      deltas.push_back(RowDelta{s.id, row, storage.back()});
      written_.insert({s.id, row});
    }
    bool dup = false;
    Status a = cached_->ApplyBatch(client, applied_[client], deltas, &dup);
    Status b = plain_->ApplyBatch(client, applied_[client], deltas, &dup);
    ASSERT_TRUE(a.ok()) << a.ToString();
    ASSERT_TRUE(b.ok()) << b.ToString();
    ++applied_[client];
  }

  const TableSchema& SchemaOf(uint32_t table) const {
    for (const TableSchema& s : schemas_) {
      if (s.id == table) return s;
    }
    ADD_FAILURE() << "no table " << table;
    return schemas_[0];
  }

  void CompareRows(uint32_t table, const std::vector<uint64_t>& rows) {
    const TableSchema& schema = SchemaOf(table);
    std::vector<std::string> a, b;
    Status sa = cached_->MultiGet(table, rows, &a);
    Status sb = plain_->MultiGet(table, rows, &b);
    ASSERT_TRUE(sa.ok()) << sa.ToString();
    ASSERT_TRUE(sb.ok()) << sb.ToString();
    ASSERT_EQ(a.size(), rows.size());
    for (size_t i = 0; i < rows.size(); ++i) {
      ASSERT_TRUE(SameRow(schema, a[i], b[i], !delta_only_))
          << "table " << table << " row " << rows[i];
    }
    std::string single;
    ASSERT_TRUE(cached_->Get(table, rows[0], &single).ok());
    ASSERT_EQ(single, a[0]);
    ASSERT_NO_FATAL_FAILURE(CompareAbsent(*cached_, table, rows, a));
    ASSERT_NO_FATAL_FAILURE(CompareAbsent(*plain_, table, rows, b));
  }

  // The cached store's reads equal bit for bit what a read-only open (no
  // cache of its own rows) reads from its RocksDB after a write-back.
  void CompareWithStored() {
    ASSERT_TRUE(cached_->WriteBack().ok());
    ShardStoreOptions ro = Opts(kClients, 0, delta_only_);
    ro.read_only = true;
    std::unique_ptr<ShardStore> stored = OpenOrDie(ro, tmp_.Sub("cached"));
    ASSERT_NE(stored, nullptr);
    std::vector<uint64_t> rows;
    for (uint64_t r = 0; r < 600; r += 1 + check_rng_() % 4) rows.push_back(r);
    for (const TableSchema& s : schemas_) {
      std::vector<std::string> a, b;
      ASSERT_TRUE(cached_->MultiGet(s.id, rows, &a).ok());
      ASSERT_TRUE(stored->MultiGet(s.id, rows, &b).ok());
      for (size_t i = 0; i < rows.size(); ++i) {
        ASSERT_EQ(a[i], b[i]) << s.name << " row " << rows[i];
      }
    }
  }

  // MultiGetOrAbsent: a row is absent exactly when no delta was ever applied
  // to it, and then its initializer's value is what MultiGet returned.
  void CompareAbsent(const ShardStore& store, uint32_t table, const std::vector<uint64_t>& rows,
                     const std::vector<std::string>& expected) {
    std::vector<std::string> v;
    std::vector<uint8_t> absent;
    ShardStore::ReadView view = store.View();
    Status st = view.MultiGetOrAbsent(table, rows, &v, &absent);
    ASSERT_TRUE(st.ok()) << st.ToString();
    ASSERT_EQ(absent.size(), rows.size());
    const TableSchema s = *store.FindTable(table);
    for (size_t i = 0; i < rows.size(); ++i) {
      ASSERT_EQ(absent[i] != 0, written_.count({table, rows[i]}) == 0)
          << "table " << table << " row " << rows[i];
      if (absent[i] != 0) {
        ASSERT_TRUE(v[i].empty());
        std::string init;
        InitRow(s, rows[i], &init);
        ASSERT_EQ(init, expected[i]) << "table " << table << " row " << rows[i];
      } else {
        ASSERT_EQ(v[i], expected[i]) << "table " << table << " row " << rows[i];
      }
    }
  }

  void CompareRandomRows() {
    const TableSchema& s = schemas_[rng_() % schemas_.size()];
    std::vector<uint64_t> rows;
    for (int i = 1 + rng_() % 40; i > 0; --i)
      rows.push_back(rng_() % 4 == 0 ? rng_() % 8 : RandomRow());
    if (rows.size() > 1) rows.push_back(rows[0]);  // a duplicate in one MultiGet
    CompareRows(s.id, rows);
  }

  void CompareAll() {
    for (const TableSchema& s : schemas_) {
      std::vector<uint64_t> rows;
      for (uint64_t r = 0; r < 600; r += 1 + rng_() % 3) rows.push_back(r);
      ASSERT_NO_FATAL_FAILURE(CompareRows(s.id, rows));
    }
  }

  static constexpr uint32_t kClients = 3;
  testing_util::ScopedTempDir tmp_;
  std::mt19937_64 rng_;
  // CompareWithStored's choices, apart from rng_ so the history is the same
  // whether or not it runs.
  std::mt19937_64 check_rng_;
  bool delta_only_ = true;
  std::vector<TableSchema> schemas_;
  std::vector<ClockT> applied_;
  std::set<std::pair<uint32_t, uint64_t>> written_;  // rows some delta was applied to
  std::unique_ptr<ShardStore> cached_;
  std::unique_ptr<ShardStore> plain_;
};

TEST_P(CacheModelTest, CachedReadsAreBitIdenticalToRocksDB) {
  for (int step = 0; step < 400; ++step) {
    SCOPED_TRACE("step " + std::to_string(step));
    const int what = rng_() % 100;
    if (what < 55) {
      ASSERT_NO_FATAL_FAILURE(ApplyRandomBatch());
    } else if (what < 93) {
      ASSERT_NO_FATAL_FAILURE(CompareRandomRows());
    } else if (what < 96) {
      ASSERT_TRUE((rng_() % 2 ? cached_ : plain_)->Flush().ok());
      if (check_rng_() % 2 == 0) {
        ASSERT_NO_FATAL_FAILURE(CompareWithStored());
      }
    } else if (what < 98) {
      // Drop a table and re-create it under the same id with another
      // initializer: nothing of the old one may be served.
      TableSchema& s = schemas_[rng_() % schemas_.size()];
      ASSERT_TRUE(cached_->DropTable(s.name).ok());
      ASSERT_TRUE(plain_->DropTable(s.name).ok());
      if (s.init.kind != InitKind::kZeros) ++s.init.seed;
      for (auto it = written_.begin(); it != written_.end();) {
        it = it->first == s.id ? written_.erase(it) : std::next(it);
      }
      ASSERT_NO_FATAL_FAILURE(CreateInBoth(s));
      ASSERT_NO_FATAL_FAILURE(CompareAll());
    } else {
      // Restart: the cache starts cold and refills from RocksDB.
      cached_.reset();
      cached_ = OpenOrDie(Opts(kClients, 1, delta_only_), tmp_.Sub("cached"));
      ASSERT_NE(cached_, nullptr);
    }
  }
  ASSERT_NO_FATAL_FAILURE(CompareAll());
  RowCacheStats st = cached_->row_cache_stats();
  EXPECT_EQ(st.capacity_bytes, 1u << 20);
  EXPECT_GT(st.hits, 0u);
  EXPECT_GT(st.evictions, 0u) << "the test should overflow the cache";
  EXPECT_LE(st.bytes, st.capacity_bytes);

  // What the cached store serves equals what its own RocksDB holds after a
  // restart with the cache off.
  std::map<uint32_t, std::vector<std::string>> before;
  std::vector<uint64_t> rows;
  for (uint64_t r = 0; r < 600; ++r) rows.push_back(r);
  for (const TableSchema& s : schemas_) {
    ASSERT_TRUE(cached_->MultiGet(s.id, rows, &before[s.id]).ok());
  }
  cached_.reset();
  cached_ = OpenOrDie(Opts(kClients, 0, delta_only_), tmp_.Sub("cached"));
  ASSERT_NE(cached_, nullptr);
  for (const TableSchema& s : schemas_) {
    std::vector<std::string> after;
    ASSERT_TRUE(cached_->MultiGet(s.id, rows, &after).ok());
    for (size_t i = 0; i < rows.size(); ++i) {
      ASSERT_EQ(before[s.id][i], after[i]) << s.name << " row " << rows[i];
    }
  }
}

// (seed, delta_only_rows)
INSTANTIATE_TEST_SUITE_P(Seeds, CacheModelTest,
                         ::testing::Combine(::testing::Values(1, 2, 3), ::testing::Bool()));

TEST(RowCacheStoreTest, CountsHitsAndMissesAndCanBeDisabled) {
  testing_util::ScopedTempDir tmp;
  ASSERT_FALSE(tmp.path().empty());
  for (size_t mb : {size_t{0}, size_t{8}}) {
    ShardStoreOptions o = Opts(1, mb);
    o.clock_log = mb != 0;  // a clock log always holds its rows in the row cache
    auto store = OpenOrDie(o, tmp.Sub("s" + std::to_string(mb)));
    ASSERT_NE(store, nullptr);
    TableSchema t;
    ASSERT_TRUE(
        store->CreateTable(MakeSchema("t", RowKind::kDense, ElementType::kI64, 2), &t).ok());
    std::string v;
    ASSERT_TRUE(store->Get(t.id, 1, &v).ok());  // miss: never written
    EXPECT_EQ(v, EncodeDense<int64_t>({0, 0}));
    std::string d = EncodeDense<int64_t>({5, -3});
    bool dup = false;
    ASSERT_TRUE(store->ApplyBatch(0, 0, {RowDelta{t.id, 1, d}, RowDelta{t.id, 1, d}}, &dup).ok());
    ASSERT_TRUE(store->Get(t.id, 1, &v).ok());  // hit, updated by the batch
    EXPECT_EQ(v, EncodeDense<int64_t>({10, -6}));
    std::vector<std::string> vs;
    ASSERT_TRUE(store->MultiGet(t.id, {1, 2, 1}, &vs).ok());
    EXPECT_EQ(vs[0], EncodeDense<int64_t>({10, -6}));
    EXPECT_EQ(vs[1], EncodeDense<int64_t>({0, 0}));
    EXPECT_EQ(vs[2], vs[0]);
    RowCacheStats st = store->row_cache_stats();
    if (mb == 0) {
      EXPECT_EQ(st.capacity_bytes, 0u);
      EXPECT_EQ(st.hits + st.misses + st.entries, 0u);
    } else {
      EXPECT_EQ(st.capacity_bytes, mb << 20);
      EXPECT_EQ(st.misses, 2u);  // row 1 once, row 2 once
      EXPECT_EQ(st.hits, 3u);    // row 1 three times
      EXPECT_EQ(st.entries, 2u);
    }
    EXPECT_EQ(store->DropTable("t").code(), StatusCode::kOk);
    EXPECT_EQ(store->Get(t.id, 1, &v).code(), StatusCode::kNotFound);
    if (mb > 0) {
      EXPECT_EQ(store->row_cache_stats().entries, 0u);
    }
  }
}

// A row read as absent is cached as an entry without bytes: the writer adds
// the row's first delta to it without reading RocksDB, and every later read
// (cached, after a write-back, after a restart) is the initializer plus the
// delta, bit for bit.
TEST(RowCacheStoreTest, AbsentRowsCostNoInitializerAndNoReadForTheFirstDelta) {
  testing_util::ScopedTempDir tmp;
  ASSERT_FALSE(tmp.path().empty());
  const std::string dir = tmp.Sub("s");
  auto store = OpenOrDie(Opts(1, 8), dir);
  ASSERT_NE(store, nullptr);
  TableSchema s = MakeSchema("t", RowKind::kDense, ElementType::kF32, 64);
  s.init = Initializer{InitKind::kNormal, 0.0, 0.1, 9};
  TableSchema t;
  ASSERT_TRUE(store->CreateTable(s, &t).ok());
  std::vector<uint64_t> rows;
  for (uint64_t r = 0; r < 100; ++r) rows.push_back(r * 7919);
  {
    std::vector<std::string> v;
    std::vector<uint8_t> absent;
    ShardStore::ReadView view = store->View();
    ASSERT_TRUE(view.MultiGetOrAbsent(t.id, rows, &v, &absent).ok());
    for (size_t i = 0; i < rows.size(); ++i) {
      EXPECT_EQ(absent[i], 1) << rows[i];
      EXPECT_TRUE(v[i].empty());
    }
  }
  // Entries without bytes: the overhead only.
  EXPECT_EQ(store->row_cache_stats().entries, rows.size());
  EXPECT_LE(store->row_cache_stats().bytes, rows.size() * 160);

  std::vector<std::string> deltas;
  std::vector<RowDelta> batch;
  for (size_t i = 0; i < rows.size(); ++i) {
    deltas.push_back(EncodeDense<float>(std::vector<float>(64, 0.25f + static_cast<float>(i))));
  }
  for (size_t i = 0; i < rows.size(); ++i) batch.push_back(RowDelta{t.id, rows[i], deltas[i]});
  bool dup = false;
  ASSERT_TRUE(store->ApplyBatch(0, 0, batch, &dup).ok());
  EXPECT_EQ(store->data_path_stats().rows_read_for_write, 0u)
      << "the writer read rows it knew had no record";

  auto expect_init_plus_delta = [&](ShardStore& st, const char* when) {
    std::vector<std::string> v;
    std::vector<uint8_t> absent;
    ShardStore::ReadView view = st.View();
    ASSERT_TRUE(view.MultiGetOrAbsent(t.id, rows, &v, &absent).ok());
    for (size_t i = 0; i < rows.size(); ++i) {
      std::string want;
      InitRow(t, rows[i], &want);
      ASSERT_TRUE(AddRow(RowFormat::Of(t), &want, deltas[i]).ok());
      EXPECT_EQ(absent[i], 0) << when << " row " << rows[i];
      EXPECT_EQ(v[i], want) << when << " row " << rows[i];
    }
  };
  expect_init_plus_delta(*store, "cached");
  ASSERT_TRUE(store->WriteBack().ok());
  expect_init_plus_delta(*store, "after a write-back");
  store.reset();
  store = OpenOrDie(Opts(1, 8), dir);
  ASSERT_NE(store, nullptr);
  expect_init_plus_delta(*store, "after a restart");
  // A row still never written is absent after the restart too.
  std::vector<std::string> v;
  std::vector<uint8_t> absent;
  ShardStore::ReadView view = store->View();
  ASSERT_TRUE(view.MultiGetOrAbsent(t.id, {1}, &v, &absent).ok());
  EXPECT_EQ(absent[0], 1);
}

TEST(RowCacheStoreTest, RejectsAHugeBudget) {
  testing_util::ScopedTempDir tmp;
  ShardStoreOptions o = Opts(1, size_t{1} << 30);
  std::unique_ptr<ShardStore> s;
  EXPECT_EQ(ShardStore::Open(o, tmp.Sub("s"), &s).code(), StatusCode::kInvalidArgument);
}

// Three clients apply batches concurrently while readers read (and a scanner
// of wide rows keeps evicting). Every batch adds the same random float to all
// kGroup rows of a float table and 1 to all of an integer table, so:
// - a MultiGet of the group must see equal values (it sees whole batches);
// - the final values must equal what RocksDB alone returns after a restart.
TEST(RowCacheStoreTest, ConcurrentWritersAndReadersStayExact) {
  constexpr uint32_t kClients = 3;
  constexpr int kBatches = 150;
  constexpr uint64_t kGroup = 8;
  testing_util::ScopedTempDir tmp;
  ASSERT_FALSE(tmp.path().empty());
  const std::string dir = tmp.Sub("s");
  auto store = OpenOrDie(Opts(kClients, 1), dir);
  ASSERT_NE(store, nullptr);
  TableSchema f, n, wide;
  TableSchema fs = MakeSchema("f", RowKind::kDense, ElementType::kF32, 4);
  fs.init = Initializer{InitKind::kUniform, -1, 1, 3};
  ASSERT_TRUE(store->CreateTable(fs, &f).ok());
  ASSERT_TRUE(store->CreateTable(MakeSchema("n", RowKind::kDense, ElementType::kI64, 1), &n).ok());
  ASSERT_TRUE(
      store->CreateTable(MakeSchema("wide", RowKind::kDense, ElementType::kF32, 4096), &wide).ok());

  std::vector<uint64_t> group;
  for (uint64_t r = 0; r < kGroup; ++r) group.push_back(r);
  std::atomic<int> writers_left{kClients};
  std::atomic<int> failures{0};
  std::vector<std::thread> threads;
  for (uint32_t c = 0; c < kClients; ++c) {
    threads.emplace_back([&, c] {
      std::mt19937 rng(c);
      const std::string one = EncodeDense<int64_t>({1});
      const std::string wide_delta = EncodeDense<float>(std::vector<float>(4096, 0.5f));
      for (ClockT clock = 0; clock < kBatches; ++clock) {
        const float x = std::uniform_real_distribution<float>(-1, 1)(rng);
        const std::string fd = EncodeDense<float>({x, x, x, x});
        std::vector<RowDelta> deltas;
        for (uint64_t r : group) deltas.push_back(RowDelta{f.id, r, fd});
        for (uint64_t r : group) deltas.push_back(RowDelta{n.id, r, one});
        deltas.push_back(RowDelta{wide.id, static_cast<uint64_t>(rng() % 100), wide_delta});
        bool dup = false;
        if (!store->ApplyBatch(c, clock, deltas, &dup).ok() || dup) failures.fetch_add(1);
      }
      writers_left.fetch_sub(1);
    });
  }
  auto all_equal = [](const std::vector<std::string>& v) {
    for (const std::string& x : v) {
      if (x != v[0]) return false;
    }
    return true;
  };
  threads.emplace_back([&] {  // group reader
    std::vector<std::string> fv, nv;
    while (writers_left.load() > 0) {
      if (!store->MultiGet(n.id, group, &nv).ok() || !all_equal(nv)) failures.fetch_add(1);
      if (!store->MultiGet(f.id, group, &fv).ok()) failures.fetch_add(1);
    }
  });
  threads.emplace_back([&] {  // evicts everything, again and again
    std::mt19937 rng(99);
    std::string v;
    // At least 400 reads of 16 KiB rows: more than the 1 MiB cache holds.
    for (int n = 0; writers_left.load() > 0 || n < 400; ++n) {
      if (!store->Get(wide.id, rng() % 200, &v).ok()) failures.fetch_add(1);
    }
  });
  for (std::thread& t : threads) t.join();
  ASSERT_EQ(failures.load(), 0);
  EXPECT_GT(store->row_cache_stats().evictions, 0u);

  std::vector<std::string> fv, nv, wv;
  std::vector<uint64_t> wide_rows;
  for (uint64_t r = 0; r < 100; ++r) wide_rows.push_back(r);
  ASSERT_TRUE(store->MultiGet(f.id, group, &fv).ok());
  ASSERT_TRUE(store->MultiGet(n.id, group, &nv).ok());
  ASSERT_TRUE(store->MultiGet(wide.id, wide_rows, &wv).ok());
  for (const std::string& v : nv) EXPECT_EQ(v, EncodeDense<int64_t>({kClients * kBatches}));
  store.reset();
  store = OpenOrDie(Opts(kClients, 0), dir);
  ASSERT_NE(store, nullptr);
  std::vector<std::string> f2, w2;
  ASSERT_TRUE(store->MultiGet(f.id, group, &f2).ok());
  ASSERT_TRUE(store->MultiGet(wide.id, wide_rows, &w2).ok());
  EXPECT_EQ(fv, f2);
  EXPECT_EQ(wv, w2);
}

// Cached dense rows are written as Puts updated in place, which never fill the
// memtable; the store must still flush so the WAL stays bounded, and the
// values must survive a restart (WAL replay of in-place-updated rows).
TEST(RowCacheStoreTest, InPlaceWritesKeepTheWalBoundedAndSurviveRestart) {
  testing_util::ScopedTempDir tmp;
  ShardStoreOptions o = Opts(1, 16);  // write_buffer_mb = 1
  std::unique_ptr<ShardStore> store = OpenOrDie(o, tmp.Sub("s"));
  ASSERT_NE(store, nullptr);
  TableSchema created;
  ASSERT_TRUE(
      store->CreateTable(MakeSchema("w", RowKind::kDense, ElementType::kI64, 64), &created).ok());
  std::vector<uint64_t> rows(200);
  for (uint64_t r = 0; r < rows.size(); ++r) rows[r] = r;
  std::vector<std::string> values;
  ASSERT_TRUE(store->MultiGet(created.id, rows, &values).ok());  // all cached
  std::vector<int64_t> one(64, 1);
  const std::string delta(reinterpret_cast<const char*>(one.data()), one.size() * 8);
  std::vector<RowDelta> batch;
  for (uint64_t r : rows) batch.push_back(RowDelta{created.id, r, delta});
  // 300 batches of ~100 KiB: 30 MiB of WAL without the forced flushes.
  const int kBatches = 300;
  auto wal_bytes = [&tmp] {
    uint64_t n = 0;
    std::error_code ec;
    for (const auto& f : std::filesystem::directory_iterator(tmp.Sub("s"), ec)) {
      if (f.path().extension() != ".log") continue;
      // A background flush may delete the file meanwhile.
      const uintmax_t size = std::filesystem::file_size(f.path(), ec);
      if (!ec) n += size;
    }
    return n;
  };
  uint64_t max_wal = 0;
  for (int c = 0; c < kBatches; ++c) {
    bool dup = false;
    ASSERT_TRUE(store->ApplyBatch(0, c, batch, &dup).ok());
    max_wal = std::max<uint64_t>(max_wal, wal_bytes());
  }
  // Without the forced flushes it passes 30 MiB; with them it stays near
  // 2-4 MiB, more when the (background) flushes lag on a loaded machine.
  EXPECT_LT(max_wal, uint64_t{16} << 20) << "the WAL must be flushed away regularly";
  std::string v;
  ASSERT_TRUE(store->Get(created.id, 7, &v).ok());
  std::vector<int64_t> want(64, kBatches);
  EXPECT_EQ(v, std::string(reinterpret_cast<const char*>(want.data()), want.size() * 8));
  store.reset();
  for (size_t cache_mb : {size_t{0}, size_t{16}}) {
    store = OpenOrDie(Opts(1, cache_mb), tmp.Sub("s"));
    ASSERT_NE(store, nullptr);
    ASSERT_TRUE(store->MultiGet(created.id, rows, &values).ok());
    for (uint64_t r : rows) {
      ASSERT_EQ(values[r], std::string(reinterpret_cast<const char*>(want.data()), want.size() * 8))
          << "row " << r << " after a restart with row_cache_mb " << cache_mb;
    }
    store.reset();
  }
}

// memory_stats() reports each component: the memtable holds the written
// rows, the row cache what was read, the retained WriteBatch about one
// group's bytes.
TEST(StoreMemoryStatsTest, ReportsEachComponent) {
  testing_util::ScopedTempDir tmp;
  ShardStoreOptions o = Opts(1, 16);
  o.write_buffer_mb = 64;  // nothing flushed during the test
  o.clock_log = false;     // the components of rows written per group
  std::unique_ptr<ShardStore> store = OpenOrDie(o, tmp.Sub("s"));
  ASSERT_NE(store, nullptr);
  TableSchema created;
  ASSERT_TRUE(
      store->CreateTable(MakeSchema("m", RowKind::kDense, ElementType::kF32, 256), &created).ok());
  const StoreMemoryStats empty = store->memory_stats();
  EXPECT_EQ(empty.row_cache_bytes, 0u);
  EXPECT_EQ(empty.row_cache_capacity, uint64_t{16} << 20);
  EXPECT_EQ(empty.block_cache_capacity, uint64_t{4} << 20);
  std::vector<uint64_t> rows(2000);
  for (uint64_t r = 0; r < rows.size(); ++r) rows[r] = r;
  std::vector<std::string> values;
  ASSERT_TRUE(store->MultiGet(created.id, rows, &values).ok());  // fills the row cache
  const size_t row_bytes = 256 * 4;
  std::vector<std::string> buffers(rows.size(), std::string(row_bytes, '\0'));
  std::vector<RowDelta> deltas;
  for (uint64_t r : rows) {
    float one = 1.0f;
    for (size_t c = 0; c < 256; ++c) std::memcpy(&buffers[r][c * 4], &one, 4);
    deltas.push_back(RowDelta{created.id, r, buffers[r]});
  }
  bool dup = false;
  ASSERT_TRUE(store->ApplyBatch(0, 0, deltas, &dup).ok());
  const StoreMemoryStats m = store->memory_stats();
  const uint64_t payload = rows.size() * row_bytes;
  EXPECT_GE(m.memtable_bytes, payload);
  EXPECT_GE(m.row_cache_bytes, payload);
  EXPECT_LE(m.row_cache_bytes, m.row_cache_capacity);
  EXPECT_GE(m.write_batch_bytes, payload);  // retained for the next group
  EXPECT_LE(m.write_batch_bytes, 2 * payload + (1 << 20));
  EXPECT_EQ(m.total(), m.memtable_bytes + m.block_cache_bytes + m.table_reader_bytes +
                           m.row_cache_bytes + m.write_batch_bytes);
  // The new sums are what a read returns.
  ASSERT_TRUE(store->MultiGet(created.id, {5}, &values).ok());
  float got = 0;
  std::memcpy(&got, values[0].data() + 4 * 17, 4);
  EXPECT_EQ(got, 1.0f);
  ASSERT_TRUE(store->Flush().ok());
  EXPECT_LT(store->memory_stats().memtable_bytes, payload);
}

}  // namespace
}  // namespace pace
