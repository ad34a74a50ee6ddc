// Opening a store read-only while a writer has it open (same process; RocksDB
// treats it like another process since a read-only instance takes no lock).
#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <thread>

#include "common/row.h"
#include "storage/shard_store.h"
#include "storage/testing/storage_test_util.h"

namespace pace {
namespace {

using testing_util::MakeSchema;

constexpr uint64_t kRows = 50;

ShardStoreOptions Opts() {
  ShardStoreOptions o;
  o.num_clients = 1;
  o.block_cache_mb = 8;
  o.write_buffer_mb = 1;  // small memtables: frequent flushes and compactions
  return o;
}

// Every batch adds 1 to each of kRows rows, so a consistent view has every
// row equal to the applied clock.
std::vector<RowDelta> Batch(uint32_t table, const std::string& one) {
  std::vector<RowDelta> b;
  for (uint64_t r = 0; r < kRows; ++r) b.push_back({table, r, one});
  return b;
}

void ExpectConsistent(ShardStore* reader, uint32_t table, ClockT min_clock) {
  ClockT applied = reader->AppliedClock(0);
  EXPECT_GE(applied, min_clock);
  std::vector<uint64_t> rows;
  for (uint64_t r = 0; r < kRows; ++r) rows.push_back(r);
  std::vector<std::string> values;
  Status st = reader->MultiGet(table, rows, &values);
  ASSERT_TRUE(st.ok()) << st.ToString();
  for (uint64_t r = 0; r < kRows; ++r) {
    ASSERT_EQ(DecodeDense<int64_t>(values[r]), std::vector<int64_t>({applied}))
        << "row " << r << " at applied clock " << applied;
  }
}

TEST(ReadOnlyTest, OpensBesideLiveWriter) {
  testing_util::ScopedTempDir tmp;
  ASSERT_FALSE(tmp.path().empty());
  const std::string dir = tmp.Sub("store");
  std::unique_ptr<ShardStore> writer;
  ASSERT_TRUE(ShardStore::Open(Opts(), dir, &writer).ok());
  TableSchema t;
  ASSERT_TRUE(writer->CreateTable(MakeSchema("t", RowKind::kDense, ElementType::kI64, 1), &t).ok());
  const std::string one = EncodeDense<int64_t>({1});
  bool dup;
  for (ClockT c = 0; c < 10; ++c)
    ASSERT_TRUE(writer->ApplyBatch(0, c, Batch(t.id, one), &dup).ok());
  ASSERT_TRUE(writer->Flush().ok());
  for (ClockT c = 10; c < 15; ++c)
    ASSERT_TRUE(writer->ApplyBatch(0, c, Batch(t.id, one), &dup).ok());

  ShardStoreOptions ro = Opts();
  ro.read_only = true;
  std::unique_ptr<ShardStore> reader;
  Status st = ShardStore::Open(ro, dir, &reader);
  ASSERT_TRUE(st.ok()) << st.ToString();
  // It sees what was flushed and what is only in the writer's WAL.
  EXPECT_EQ(reader->AppliedClock(0), 15);
  ASSERT_TRUE(reader->FindTable("t").ok());
  ExpectConsistent(reader.get(), t.id, 15);
  EXPECT_EQ(reader->ApplyBatch(0, 15, {}, &dup).code(), StatusCode::kFailedPrecondition);

  // The writer keeps going (flushes, compactions) while readers come and go.
  std::atomic<bool> stop{false};
  std::atomic<ClockT> written{15};
  std::thread w([&] {
    for (ClockT c = 15; !stop.load() && c < 2000; ++c) {
      Status s = writer->ApplyBatch(0, c, Batch(t.id, one), &dup);
      ASSERT_TRUE(s.ok()) << s.ToString();
      written.store(c + 1);
      // Paced like a shard (a batch per clock, not back to back): unpaced,
      // under TSan the flushes changed the MANIFEST during every one of a
      // reader's 16 open attempts.
      std::this_thread::sleep_for(std::chrono::milliseconds(2));
      if (c % 50 == 0) {
        ASSERT_TRUE(writer->Flush().ok());
      }
    }
  });
  for (int i = 0; i < 10; ++i) {
    ClockT before = written.load();
    std::unique_ptr<ShardStore> r;
    Status s = ShardStore::Open(ro, dir, &r);
    ASSERT_TRUE(s.ok()) << "reader " << i << ": " << s.ToString();
    ExpectConsistent(r.get(), t.id, before);
    ExpectConsistent(reader.get(), t.id, 15);  // the old reader still works
  }
  stop.store(true);
  w.join();
  reader.reset();
  writer.reset();
}

}  // namespace
}  // namespace pace
