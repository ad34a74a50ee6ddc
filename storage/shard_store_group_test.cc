// Group commit (ShardStore::ApplyBatches), read views, and the rule that no
// transport thread enters the store.
#include <gtest/gtest.h>

#include <atomic>
#include <thread>
#include <vector>

#include "common/row.h"
#include "common/thread_role.h"
#include "storage/shard_store.h"
#include "storage/testing/storage_test_util.h"

namespace pace {
namespace {

using testing_util::MakeSchema;
using testing_util::OpenOrDie;

ShardStoreOptions Opts(uint32_t clients, size_t row_cache_mb) {
  ShardStoreOptions o;
  o.num_clients = clients;
  o.block_cache_mb = 4;
  o.write_buffer_mb = 1;  // frequent flushes while views are held
  o.row_cache_mb = row_cache_mb;
  return o;
}

int64_t I64(const std::string& v) { return DecodeDense<int64_t>(v)[0]; }

class GroupCommitTest : public ::testing::TestWithParam<size_t> {};

TEST_P(GroupCommitTest, EachBatchIsValidatedAndRecordedOnItsOwn) {
  testing_util::ScopedTempDir tmp;
  const std::string dir = tmp.Sub("s");
  auto store = OpenOrDie(Opts(3, GetParam()), dir);
  ASSERT_NE(store, nullptr);
  TableSchema t;
  ASSERT_TRUE(store->CreateTable(MakeSchema("t", RowKind::kDense, ElementType::kI64, 1), &t).ok());
  std::string v;
  ASSERT_TRUE(store->Get(t.id, 0, &v).ok());  // cached (when the cache is on)

  const std::string one = EncodeDense<int64_t>({1});
  const std::string ten = EncodeDense<int64_t>({10});
  const std::string bad = EncodeDense<int64_t>({1, 2});  // wrong width
  std::vector<RowDelta> c0_clock0 = {{t.id, 0, one}, {t.id, 1, one}};
  std::vector<RowDelta> c1_bad = {{t.id, 0, ten}, {t.id, 1, bad}};
  std::vector<RowDelta> c2_gap = {{t.id, 0, ten}};
  std::vector<RowDelta> c0_clock1 = {{t.id, 0, ten}};
  std::vector<RowDelta> unknown = {{t.id + 7, 0, one}};
  std::vector<BatchRequest> group = {
      {0, 0, &c0_clock0},  // applied
      {1, 0, &c1_bad},     // refused: its second delta is malformed
      {2, 1, &c2_gap},     // refused: clock gap
      {0, 1, &c0_clock1},  // applied: the same client's next clock, same group
      {0, 0, &c0_clock0},  // duplicate of the first
      {1, 0, &unknown},    // refused: unknown table (client 1 still at 0)
  };
  std::vector<BatchResult> results;
  ASSERT_TRUE(store->ApplyBatches(group, &results).ok());
  ASSERT_EQ(results.size(), group.size());
  EXPECT_TRUE(results[0].status.ok() && !results[0].duplicate);
  EXPECT_TRUE(results[1].status.code() == StatusCode::kInvalidArgument)
      << results[1].status.ToString();
  EXPECT_EQ(results[2].status.code(), StatusCode::kFailedPrecondition);
  EXPECT_TRUE(results[3].status.ok() && !results[3].duplicate);
  EXPECT_TRUE(results[4].status.ok() && results[4].duplicate);
  EXPECT_TRUE(results[5].status.code() == StatusCode::kInvalidArgument);

  auto check = [&](ShardStore* s) {
    EXPECT_EQ(s->AppliedClocks(), (std::vector<ClockT>{2, 0, 0}));
    std::vector<std::string> vals;
    ASSERT_TRUE(s->MultiGet(t.id, {0, 1}, &vals).ok());
    EXPECT_EQ(I64(vals[0]), 11);  // nothing of the refused batches
    EXPECT_EQ(I64(vals[1]), 1);
  };
  check(store.get());
  // The refused client can still send its clock 0.
  std::vector<RowDelta> c1_ok = {{t.id, 1, ten}};
  bool dup = true;
  ASSERT_TRUE(store->ApplyBatch(1, 0, c1_ok, &dup).ok());
  EXPECT_FALSE(dup);
  store.reset();
  store = OpenOrDie(Opts(3, GetParam()), dir);
  ASSERT_NE(store, nullptr);
  EXPECT_EQ(store->AppliedClocks(), (std::vector<ClockT>{2, 1, 0}));
  ASSERT_TRUE(store->Get(t.id, 1, &v).ok());
  EXPECT_EQ(I64(v), 11);
}

// Two writers add 1 to every row of a block per clock while readers take
// views: in every view each row equals the sum of the applied clocks, i.e.
// values and clocks come from one state, whatever the writer is doing.
TEST_P(GroupCommitTest, ViewsPairValuesWithTheirAppliedClocks) {
  constexpr uint32_t kClients = 2;
  constexpr int kClocks = 200;
  testing_util::ScopedTempDir tmp;
  auto store = OpenOrDie(Opts(kClients, GetParam()), tmp.Sub("s"));
  ASSERT_NE(store, nullptr);
  TableSchema t, wide;
  ASSERT_TRUE(store->CreateTable(MakeSchema("t", RowKind::kDense, ElementType::kI64, 1), &t).ok());
  ASSERT_TRUE(
      store->CreateTable(MakeSchema("w", RowKind::kDense, ElementType::kF32, 2048), &wide).ok());
  std::vector<uint64_t> rows;
  for (uint64_t r = 0; r < 16; ++r) rows.push_back(r);
  std::atomic<int> writers{kClients};
  std::atomic<int> failures{0};
  std::atomic<int> views{0};
  std::vector<std::thread> threads;
  for (uint32_t c = 0; c < kClients; ++c) {
    threads.emplace_back([&, c] {
      const std::string one = EncodeDense<int64_t>({1});
      const std::string w = EncodeDense<float>(std::vector<float>(2048, 1.0f));
      for (ClockT clock = 0; clock < kClocks; ++clock) {
        std::vector<RowDelta> d;
        for (uint64_t r : rows) d.push_back({t.id, r, one});
        d.push_back({wide.id, static_cast<uint64_t>(clock % 50), w});  // evicts
        bool dup = false;
        if (!store->ApplyBatch(c, clock, d, &dup).ok() || dup) failures.fetch_add(1);
      }
      writers.fetch_sub(1);
    });
  }
  for (int r = 0; r < 2; ++r) {
    threads.emplace_back([&] {
      while (writers.load() > 0) {
        ShardStore::ReadView view = store->View();
        std::vector<std::string> vals;
        if (!view.MultiGet(t.id, rows, &vals).ok()) {
          failures.fetch_add(1);
          continue;
        }
        const int64_t want = view.AppliedClock(0) + view.AppliedClock(1);
        for (const std::string& v : vals) {
          if (I64(v) != want) failures.fetch_add(1);
        }
        if (view.ShardClock() > view.AppliedClock(0) || view.ShardClock() > view.AppliedClock(1)) {
          failures.fetch_add(1);
        }
        views.fetch_add(1);
      }
    });
  }
  for (std::thread& th : threads) th.join();
  EXPECT_EQ(failures.load(), 0);
  EXPECT_GT(views.load(), 0);
  std::vector<std::string> vals;
  ASSERT_TRUE(store->MultiGet(t.id, rows, &vals).ok());
  for (const std::string& v : vals) EXPECT_EQ(I64(v), kClients * kClocks);
}

INSTANTIATE_TEST_SUITE_P(RowCache, GroupCommitTest, ::testing::Values(size_t{0}, size_t{1}),
                         [](const ::testing::TestParamInfo<size_t>& i) {
                           return i.param == 0 ? std::string("Off") : std::string("On");
                         });

#if PACE_ASSERT_STORE_THREADS
TEST(StoreThreadsDeathTest, TransportThreadsMayNotEnterTheStore) {
  GTEST_FLAG_SET(death_test_style, "threadsafe");
  testing_util::ScopedTempDir tmp;
  auto store = OpenOrDie(Opts(1, 1), tmp.Sub("s"));
  ASSERT_NE(store, nullptr);
  TableSchema t;
  ASSERT_TRUE(store->CreateTable(MakeSchema("t", RowKind::kDense, ElementType::kI64, 1), &t).ok());
  std::string v;
  ASSERT_TRUE(store->Get(t.id, 0, &v).ok());  // fine on an ordinary thread
  EXPECT_DEATH(
      {
        MarkTransportThread();
        (void)store->Get(t.id, 0, &v);
      },
      "ShardStore::Get called on a transport thread");
  EXPECT_DEATH(
      {
        MarkTransportThread();
        std::vector<RowDelta> none;
        bool dup;
        (void)store->ApplyBatch(0, 0, none, &dup);
      },
      "ShardStore::ApplyBatches called on a transport thread");
}
#else
TEST(StoreThreadsDeathTest, DISABLED_BuiltWithoutPACE_ASSERT_STORE_THREADS) {}
#endif

}  // namespace
}  // namespace pace
