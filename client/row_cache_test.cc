#include "client/row_cache.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <atomic>
#include <random>
#include <string>
#include <unordered_map>
#include <vector>

namespace pace::client {
namespace {

TableSchema I64Schema(uint32_t width) {
  TableSchema s;
  s.id = 1;
  s.name = "t";
  s.type = ElementType::kI64;
  s.width = width;
  return s;
}

std::string Dense(std::vector<int64_t> v) { return EncodeDense(v); }

std::vector<int64_t> Seen(const CacheEntry& e) {
  std::vector<int64_t> out(e.table->format.width);
  ReadDense(e, out.size(), out.data());
  return out;
}

class RowCacheTest : public ::testing::Test {
 protected:
  TableState table_{I64Schema(2), 0, nullptr};
  CacheStripe st_;
  ByteArena arena_;  // the sealed deltas' (a batch's, outliving them)
};

TEST_F(RowCacheTest, ReadersSeeValuePlusOpenDeltasAndRebasedServerValues) {
  SpinLock lock(&st_.mu);  // single-threaded; for the thread-safety analysis
  st_.budget = 1 << 20;
  CacheEntry* e = st_.FindOrCreate(RowKey{1, 5}, 0, &table_);
  st_.AddDelta(e, 0, Dense({1, 2}));
  st_.AddDelta(e, 0, Dense({10, 20}));    // same clock: coalesced
  st_.AddDelta(e, 1, Dense({100, 200}));  // a worker one clock ahead
  EXPECT_TRUE(e->has_open);
  EXPECT_EQ(e->FindPending(0), &e->open);
  EXPECT_EQ(DecodeDense<int64_t>(e->open.delta), (std::vector<int64_t>{11, 22}));
  ASSERT_EQ(e->pending.size(), 1u);
  // Server value of applied clock 0: open deltas are added by readers only.
  st_.InstallValue(e, Dense({1000, 1000}), 0, 0);
  EXPECT_EQ(DecodeDense<int64_t>(e->value), (std::vector<int64_t>{1000, 1000}));
  EXPECT_EQ(Seen(*e), (std::vector<int64_t>{1111, 1222}));
  std::string scratch;
  EXPECT_EQ(ReaderView(*e, table_.format, &scratch), Dense({1111, 1222}));

  // Sealing clock 0 (its batch is sent) folds it into the value; clock 1
  // becomes the open slot.
  const PendingDelta* sealed = st_.Seal(e, 0, 0, &arena_);
  ASSERT_NE(sealed, nullptr);
  EXPECT_TRUE(sealed->sealed);
  EXPECT_EQ(DecodeDense<int64_t>(e->value), (std::vector<int64_t>{1011, 1022}));
  EXPECT_EQ(e->open.clock, 1);
  EXPECT_EQ(Seen(*e), (std::vector<int64_t>{1111, 1222}));

  // A server value that lacks clock 0 (applied 0) gets the sealed delta added.
  st_.InstallValue(e, Dense({2000, 2000}), 1, 0);
  EXPECT_EQ(Seen(*e), (std::vector<int64_t>{2111, 2222}));
  // One that holds it (applied 1) does not.
  st_.InstallValue(e, Dense({2011, 2022}), 1, 1);
  EXPECT_EQ(Seen(*e), (std::vector<int64_t>{2111, 2222}));
  EXPECT_EQ(st_.bytes, st_.Charge(*e));
}

TEST_F(RowCacheTest, DirtyListsPerClock) {
  SpinLock lock(&st_.mu);  // single-threaded; for the thread-safety analysis
  CacheEntry* a = st_.FindOrCreate(RowKey{1, 1}, 0, &table_);
  CacheEntry* b = st_.FindOrCreate(RowKey{1, 2}, 0, &table_);
  st_.AddDelta(a, 3, Dense({1, 1}));
  st_.AddDelta(b, 4, Dense({1, 1}));
  st_.AddDelta(a, 4, Dense({1, 1}));
  st_.AddDelta(a, 3, Dense({1, 1}));
  std::vector<CacheEntry*> taken;
  st_.TakeDirty(3, SIZE_MAX, &taken);
  EXPECT_EQ(taken, (std::vector<CacheEntry*>{a}));
  st_.TakeDirty(4, SIZE_MAX, &taken);
  EXPECT_EQ(taken, (std::vector<CacheEntry*>{b, a}));
  st_.TakeDirty(4, SIZE_MAX, &taken);
  EXPECT_TRUE(taken.empty());
}

TEST_F(RowCacheTest, ASliceOfTheDirtyListLeavesTheRestCounted) {
  SpinLock lock(&st_.mu);  // single-threaded; for the thread-safety analysis
  std::vector<CacheEntry*> rows;
  for (uint64_t r = 0; r < 5; ++r) {
    rows.push_back(st_.FindOrCreate(RowKey{1, r}, 0, &table_));
    st_.AddDelta(rows.back(), 7, Dense({1, 1}));  // 16 bytes each
  }
  EXPECT_EQ(st_.OpenBytesOf(7), 80u);
  std::vector<CacheEntry*> taken;
  st_.TakeDirty(7, 2, &taken);  // the last registered first
  EXPECT_EQ(taken, (std::vector<CacheEntry*>{rows[3], rows[4]}));
  EXPECT_EQ(st_.OpenRowsOf(7), 3u);
  EXPECT_EQ(st_.OpenBytesOf(7), 48u);
  // A row added between slices joins the rows left.
  CacheEntry* late = st_.FindOrCreate(RowKey{1, 9}, 0, &table_);
  st_.AddDelta(late, 7, Dense({1, 1}));
  EXPECT_EQ(st_.OpenRowsOf(7), 4u);
  EXPECT_EQ(st_.OpenBytesOf(7), 64u);
  st_.TakeDirty(7, 10, &taken);
  EXPECT_EQ(taken, (std::vector<CacheEntry*>{rows[0], rows[1], rows[2], late}));
  EXPECT_EQ(st_.OpenRowsOf(7), 0u);
  EXPECT_EQ(st_.OpenBytesOf(7), 0u);
}

TEST_F(RowCacheTest, AckPurgesSealedDeltasAndErasesEmptyEntries) {
  SpinLock lock(&st_.mu);  // single-threaded; for the thread-safety analysis
  CacheEntry* e = st_.FindOrCreate(RowKey{1, 1}, 0, &table_);
  st_.AddDelta(e, 0, Dense({1, 1}));
  st_.AddDelta(e, 1, Dense({1, 1}));
  EXPECT_EQ(st_.open_bytes, 32u);  // two open deltas of 2 x i64
  st_.Seal(e, 0, 0, &arena_);
  EXPECT_EQ(st_.open_bytes, 16u);
  EXPECT_EQ(st_.PurgeAcked(RowKey{1, 1}, 0), 16u);  // the sealed delta's bytes
  ASSERT_EQ(st_.Find(RowKey{1, 1}), e);
  EXPECT_TRUE(e->pending.empty());
  EXPECT_TRUE(e->has_open);  // clock 1 is still open: never purged
  st_.Seal(e, 1, 0, &arena_);
  EXPECT_FALSE(e->has_open);
  EXPECT_EQ(st_.open_bytes, 0u);
  EXPECT_EQ(st_.PurgeAcked(RowKey{1, 1}, 1), 16u);
  EXPECT_EQ(st_.Find(RowKey{1, 1}), nullptr);
}

// Within a TotalsBatch the client-wide totals stay put and move once, by the
// sum of the batch's changes, at its end; outside one they move with each.
TEST_F(RowCacheTest, TotalsMoveOnceAtTheEndOfABatch) {
  SpinLock lock(&st_.mu);  // single-threaded; for the thread-safety analysis
  std::atomic<uint64_t> open_total{1000}, leased_total{2000};
  st_.open_bytes_total = &open_total;
  st_.leased_bytes_total = &leased_total;
  std::vector<CacheEntry*> rows;
  for (uint64_t r = 0; r < 3; ++r) rows.push_back(st_.FindOrCreate(RowKey{1, r}, 0, &table_));
  {
    TotalsBatch batch(&st_);
    for (CacheEntry* e : rows) {
      st_.AddDelta(e, 0, Dense({1, 2}));
      st_.Lease(e, 1);
    }
    st_.Seal(rows[0], 0, 0, &arena_);  // a removal inside the batch
    EXPECT_EQ(open_total.load(), 1000u);
    EXPECT_EQ(leased_total.load(), 2000u);
    EXPECT_EQ(st_.open_bytes, 32u);  // the stripe's own counts move at once
    EXPECT_EQ(st_.leased_bytes, 48u);
  }
  EXPECT_EQ(open_total.load(), 1032u);
  EXPECT_EQ(leased_total.load(), 2048u);
  {
    TotalsBatch batch(&st_);
    for (CacheEntry* e : rows) st_.Release(e);
    st_.Seal(rows[1], 0, 0, &arena_);
  }
  EXPECT_EQ(open_total.load(), 1016u);  // a net decrease
  EXPECT_EQ(leased_total.load(), 2000u);
  st_.Seal(rows[2], 0, 0, &arena_);  // outside a batch: at once
  EXPECT_EQ(open_total.load(), 1000u);
  st_.open_bytes_total = nullptr;
  st_.leased_bytes_total = nullptr;
}

// Sealing copies the open delta into the batch's arena and keeps the open
// buffer for the stripe's next open delta: this row's next clock, before the
// Ack of the sealed one as after, or another row's (no allocation per row per
// clock), while the sealed bytes stay intact. Without recycling (a memory
// budget) the buffer is released at the seal.
TEST_F(RowCacheTest, TheOpenBufferIsKeptForTheNextOpenDeltaAndTheSealedDeltaInTheArena) {
  SpinLock lock(&st_.mu);  // single-threaded; for the thread-safety analysis
  st_.spare_budget = 1 << 20;
  CacheEntry* e = st_.FindOrCreate(RowKey{1, 1}, 0, &table_);
  st_.InstallValue(e, Dense({0, 0}), 0, 0);  // keeps the entry alive
  st_.AddDelta(e, 0, Dense({1, 1}));
  const char* buffer = e->open.delta.data();
  const PendingDelta* sealed = st_.Seal(e, 0, 0, &arena_);
  ASSERT_NE(sealed, nullptr);
  EXPECT_TRUE(sealed->delta.empty());
  EXPECT_EQ(st_.spare_deltas.size(), 1u);
  st_.AddDelta(e, 1, Dense({2, 2}));  // before the Ack of clock 0
  EXPECT_EQ(e->open.delta.data(), buffer);
  EXPECT_TRUE(st_.spare_deltas.empty());
  ASSERT_EQ(e->pending.size(), 1u);
  EXPECT_EQ(e->pending[0].bytes(), Dense({1, 1}));
  EXPECT_EQ(arena_.used(), 16u);
  EXPECT_EQ(Seen(*e), (std::vector<int64_t>{3, 3}));
  // A server value without clock 0 is rebased on the sealed bytes.
  st_.InstallValue(e, Dense({10, 10}), 1, 0);
  EXPECT_EQ(Seen(*e), (std::vector<int64_t>{13, 13}));
  EXPECT_EQ(st_.PurgeAcked(RowKey{1, 1}, 0), 16u);
  // Another row's first open delta takes the buffer this row's seal left.
  st_.Seal(e, 1, 0, &arena_);
  EXPECT_EQ(e->open.delta.capacity(), std::string().capacity());
  CacheEntry* other = st_.FindOrCreate(RowKey{1, 2}, 0, &table_);
  st_.AddDelta(other, 1, Dense({5, 6}));
  EXPECT_EQ(other->open.delta.data(), buffer);
  EXPECT_EQ(DecodeDense<int64_t>(other->open.delta), (std::vector<int64_t>{5, 6}));
  EXPECT_EQ(e->pending[0].bytes(), Dense({2, 2}));
  // Without recycling the seal frees the buffer.
  st_.recycle_delta_buffers = false;
  st_.spare_budget = 0;
  st_.Seal(other, 1, 0, &arena_);
  EXPECT_EQ(other->open.delta.capacity(), std::string().capacity());
  EXPECT_TRUE(st_.spare_deltas.empty());
  EXPECT_EQ(st_.spare_bytes, 0u);
}

// A leased row's new delta (OpenZeroDelta) takes a kept buffer as it is:
// the seal zeroed it when it kept it, so the delta reads as zero though the
// buffer held another row's delta, and a buffer of another size is zeroed
// to the size asked for.
TEST_F(RowCacheTest, AZeroDeltaTakesAKeptBufferThatTheSealZeroed) {
  SpinLock lock(&st_.mu);  // single-threaded; for the thread-safety analysis
  st_.spare_budget = 1 << 20;
  CacheEntry* e = st_.FindOrCreate(RowKey{1, 1}, 0, &table_);
  st_.InstallValue(e, Dense({0, 0}), 0, 0);
  st_.AddDelta(e, 0, Dense({7, -9}));
  const char* buffer = e->open.delta.data();
  ASSERT_NE(st_.Seal(e, 0, 0, &arena_), nullptr);
  ASSERT_EQ(st_.spare_deltas.size(), 1u);
  EXPECT_EQ(st_.spare_deltas[0], std::string(16, '\0'));
  ASSERT_EQ(e->pending.size(), 1u);
  EXPECT_EQ(e->pending[0].bytes(), Dense({7, -9}));  // the sealed bytes are the arena's
  CacheEntry* other = st_.FindOrCreate(RowKey{1, 2}, 0, &table_);
  st_.OpenZeroDelta(other, 0, 16);
  EXPECT_EQ(other->open.delta.data(), buffer);
  EXPECT_EQ(other->open.delta, Dense({0, 0}));
  EXPECT_EQ(st_.open_bytes, 16u);
  st_.AddDelta(other, 0, Dense({2, 3}));  // the worker's update adds to it
  EXPECT_EQ(DecodeDense<int64_t>(other->open.delta), (std::vector<int64_t>{2, 3}));
  // A kept buffer of another size: zeroed to the size asked for.
  ASSERT_NE(st_.Seal(other, 0, 0, &arena_), nullptr);
  ASSERT_EQ(st_.spare_deltas.size(), 1u);
  TableState three{I64Schema(3), 0, nullptr};  // 24-byte deltas
  CacheEntry* wider = st_.FindOrCreate(RowKey{2, 1}, 0, &three);
  st_.OpenZeroDelta(wider, 1, 24);
  EXPECT_EQ(wider->open.delta, std::string(24, '\0'));
  EXPECT_TRUE(st_.spare_deltas.empty());
}

// The buffers kept for open deltas to come are bounded by spare_budget: a
// clock of many rows sealed at once keeps what fits and frees the rest, and
// every later open delta still gets its bytes.
TEST_F(RowCacheTest, KeptOpenBuffersStayWithinTheirBudget) {
  SpinLock lock(&st_.mu);                      // single-threaded; for the thread-safety analysis
  TableState wide{I64Schema(64), 0, nullptr};  // 512-byte deltas
  const std::string delta = EncodeDense(std::vector<int64_t>(64, 1));
  st_.spare_budget = 10 * 512;
  std::vector<CacheEntry*> rows;
  for (uint64_t r = 0; r < 100; ++r) {
    rows.push_back(st_.FindOrCreate(RowKey{1, r}, 0, &wide));
    st_.AddDelta(rows.back(), 0, delta);
  }
  for (CacheEntry* e : rows) ASSERT_NE(st_.Seal(e, 0, 0, &arena_), nullptr);
  EXPECT_LE(st_.spare_bytes, st_.spare_budget);
  EXPECT_GE(st_.spare_deltas.size(), 5u);  // kept some (malloc may round up)
  EXPECT_LE(st_.spare_deltas.size(), 10u);
  size_t kept_bytes = 0;
  for (const std::string& s : st_.spare_deltas) kept_bytes += s.capacity();
  EXPECT_EQ(kept_bytes, st_.spare_bytes);
  for (CacheEntry* e : rows) {
    st_.AddDelta(e, 1, delta);
    ASSERT_EQ(e->open.delta, delta);
  }
  EXPECT_TRUE(st_.spare_deltas.empty());
  EXPECT_EQ(st_.spare_bytes, 0u);
}

// Two workers a clock apart: a row's delta of clock c + 1 arrives while its
// open slot still holds clock c's. That delta takes a kept buffer as the open
// slot's does; else each clock's seals would keep one buffer more than the
// clock took, and the spares would grow to their bound over a long job.
TEST_F(RowCacheTest, ADeltaOfAClockAheadTakesAKeptBufferToo) {
  SpinLock lock(&st_.mu);                      // single-threaded; for the thread-safety analysis
  TableState wide{I64Schema(64), 0, nullptr};  // 512-byte deltas
  const std::string delta = EncodeDense(std::vector<int64_t>(64, 1));
  st_.spare_budget = 1000 * 512;
  std::vector<CacheEntry*> rows;
  for (uint64_t r = 0; r < 10; ++r) rows.push_back(st_.FindOrCreate(RowKey{1, r}, 0, &wide));
  for (CacheEntry* e : rows) st_.AddDelta(e, 0, delta);
  size_t most_kept = 0;
  for (ClockT c = 0; c < 50; ++c) {
    for (CacheEntry* e : rows) {
      st_.AddDelta(e, c + 1, delta);  // the worker a clock ahead
      ASSERT_NE(st_.Seal(e, c, 0, &arena_), nullptr);
      ASSERT_EQ(e->open.delta, delta);  // clock c + 1's delta moved to the open slot
    }
    most_kept = std::max(most_kept, st_.spare_deltas.size());
  }
  // One buffer per row and clock is taken and one given back: never more
  // kept than the rows' one clock.
  EXPECT_LE(most_kept, rows.size());
  EXPECT_LE(st_.spare_bytes, rows.size() * 1024);
}

// A row's first pending delta lies in its entry's own room; more spill to
// the heap in order, and shrinking brings the survivors back into the room.
TEST(PendingListTest, FirstDeltaInlineMoreOnTheHeapShrinkBackKeepsOrder) {
  alignas(PendingDelta) unsigned char room[sizeof(PendingDelta)];
  PendingList pl(room);
  auto delta = [](ClockT c) {
    return PendingDelta{c, std::string(64, static_cast<char>('a' + c)), {}, 0, false};
  };
  EXPECT_TRUE(pl.empty());
  EXPECT_EQ(pl.capacity(), 1u);
  pl.push_back(delta(0));
  EXPECT_TRUE(pl.inline_storage());
  EXPECT_EQ(static_cast<void*>(pl.data()), static_cast<void*>(room));
  for (ClockT c = 1; c < 5; ++c) pl.push_back(delta(c));
  EXPECT_FALSE(pl.inline_storage());
  ASSERT_EQ(pl.size(), 5u);
  EXPECT_GE(pl.capacity(), 5u);
  for (ClockT c = 0; c < 5; ++c) {
    EXPECT_EQ(pl[c].clock, c);
    EXPECT_EQ(pl[c].delta, std::string(64, static_cast<char>('a' + c))) << c;
  }
  // Remove the even clocks (the remove_if idiom of PurgeAcked).
  pl.erase(
      std::remove_if(pl.begin(), pl.end(), [](const PendingDelta& p) { return p.clock % 2 == 0; }),
      pl.end());
  ASSERT_EQ(pl.size(), 2u);
  pl.erase(pl.begin(), pl.begin());  // nothing, and the deltas intact
  ASSERT_EQ(pl.size(), 2u);
  EXPECT_EQ(pl[0].delta, std::string(64, 'b'));
  pl.ShrinkTo(2);
  EXPECT_EQ(pl.capacity(), 2u);
  EXPECT_FALSE(pl.inline_storage());
  pl.erase(pl.begin());
  pl.ShrinkTo(1);
  EXPECT_TRUE(pl.inline_storage());
  ASSERT_EQ(pl.size(), 1u);
  EXPECT_EQ(pl.back().clock, 3u);
  EXPECT_EQ(pl.back().delta, std::string(64, 'd'));
  // Shrinking never drops a delta: room for the two left.
  pl.push_back(delta(7));
  pl.ShrinkTo(1);
  ASSERT_EQ(pl.size(), 2u);
  EXPECT_EQ(pl[1].delta, std::string(64, 'h'));
  pl.clear();
  EXPECT_TRUE(pl.empty());
}

// An outage: a row is sealed in many clocks before any Ack, then the Acks
// purge them. The row must not keep the backlog's storage for the rest of the
// job (else memory grows with the job's length), nor more than room for one
// delta once nothing is pending, and it keeps its storage while deltas of
// consecutive clocks are in flight (no allocation per clock for a row
// updated in every clock).
TEST_F(RowCacheTest, PendingStorageOfAnOutageIsReleasedAfterItsAcks) {
  SpinLock lock(&st_.mu);  // single-threaded; for the thread-safety analysis
  CacheEntry* e = st_.FindOrCreate(RowKey{1, 1}, 0, &table_);
  st_.InstallValue(e, Dense({0, 0}), 0, 0);  // keeps the entry alive
  constexpr ClockT kBacklog = 64;
  for (ClockT c = 0; c < kBacklog; ++c) {
    st_.AddDelta(e, c, Dense({1, 1}));
    ASSERT_NE(st_.Seal(e, c, 0, &arena_), nullptr);
  }
  EXPECT_EQ(e->pending.size(), static_cast<size_t>(kBacklog));
  // The Acks come one clock at a time; the last two clocks stay unacked.
  for (ClockT c = 0; c + 2 < kBacklog; ++c) st_.PurgeAcked(RowKey{1, 1}, c);
  EXPECT_EQ(e->pending.size(), 2u);
  EXPECT_LE(e->pending.capacity(), kKeptPendingCapacity);
  // The kept deltas are intact (value = server + both).
  EXPECT_EQ(e->pending[0].clock, kBacklog - 2);
  EXPECT_EQ(e->pending[1].clock, kBacklog - 1);
  st_.InstallValue(e, Dense({0, 0}), 0, kBacklog - 2);
  EXPECT_EQ(Seen(*e), (std::vector<int64_t>{2, 2}));

  // Steady state: seal clock c, purge clock c - 1. The vector's storage stays
  // put (no allocation per row per clock).
  st_.PurgeAcked(RowKey{1, 1}, kBacklog - 2);
  const PendingDelta* storage = e->pending.data();
  for (ClockT c = kBacklog; c < kBacklog + 16; ++c) {
    st_.AddDelta(e, c, Dense({1, 1}));
    st_.Seal(e, c, 0, &arena_);
    st_.PurgeAcked(RowKey{1, 1}, c - 1);
    ASSERT_EQ(e->pending.size(), 1u);
    EXPECT_EQ(e->pending.data(), storage) << "clock " << c;
  }
  // Nothing pending: room for kKeptPendingCapacity deltas at most (every row
  // would otherwise keep the largest vector it ever needed), which the next
  // clock's sealed delta takes without an allocation; none when buffers are
  // not recycled (a memory budget).
  st_.PurgeAcked(RowKey{1, 1}, kBacklog + 15);
  EXPECT_TRUE(e->pending.empty());
  EXPECT_GE(e->pending.capacity(), 1u);
  EXPECT_LE(e->pending.capacity(), kKeptPendingCapacity);
  storage = e->pending.data();
  st_.AddDelta(e, kBacklog + 16, Dense({1, 1}));
  st_.Seal(e, kBacklog + 16, 0, &arena_);
  EXPECT_EQ(e->pending.data(), storage);
  st_.recycle_delta_buffers = false;
  st_.PurgeAcked(RowKey{1, 1}, kBacklog + 16);
  EXPECT_TRUE(e->pending.empty());
  EXPECT_EQ(e->pending.capacity(), 1u);
  EXPECT_TRUE(e->pending.inline_storage());
}

// Entries are placed in blocks: an erased entry's place is the next new
// entry's, which starts fresh (no value, no deltas, nothing in flight), and
// the entries left keep their contents.
TEST_F(RowCacheTest, AnErasedEntrysPlaceIsReusedByTheNextOneWhichStartsEmpty) {
  SpinLock lock(&st_.mu);  // single-threaded; for the thread-safety analysis
  std::vector<CacheEntry*> es;
  for (uint64_t r = 0; r < 200; ++r) {  // more than one block
    CacheEntry* e = st_.FindOrCreate(RowKey{1, r}, 0, &table_);
    st_.InstallValue(e, Dense({static_cast<int64_t>(r), 0}), 0, 0);
    es.push_back(e);
  }
  CacheEntry* gone = es[77];
  gone->reads_in_flight.push_back(3);
  gone->reads_in_flight.push_back(4);
  gone->ReadAnswered(3);
  gone->ReadAnswered(4);
  st_.DropValue(gone);
  st_.MaybeErase(gone);
  ASSERT_EQ(st_.Find(RowKey{1, 77}), nullptr);
  CacheEntry* fresh = st_.FindOrCreate(RowKey{1, 1000}, 0, &table_);
  EXPECT_EQ(fresh, gone);  // the erased entry's place
  EXPECT_FALSE(fresh->has_value);
  EXPECT_TRUE(fresh->value.empty());
  EXPECT_TRUE(fresh->pending.empty());
  EXPECT_TRUE(fresh->reads_in_flight.empty());
  EXPECT_EQ(fresh->key.row, 1000u);
  for (uint64_t r = 0; r < 200; ++r) {
    if (r == 77) continue;
    ASSERT_EQ(st_.Find(RowKey{1, r}), es[r]);
    EXPECT_EQ(Seen(*es[r]), (std::vector<int64_t>{static_cast<int64_t>(r), 0})) << r;
  }
}

// A row's Reads in flight: the first is held inline, more go beside it, and
// answering any of them keeps the others in order.
TEST(ReadsInFlightTest, HoldsReadsInOrderWhicheverIsAnswered) {
  CacheEntry e;
  EXPECT_FALSE(e.pinned());
  for (Version v : {5, 2, 9, 7}) e.reads_in_flight.push_back(v);
  EXPECT_TRUE(e.pinned());
  EXPECT_TRUE(e.ReadInFlightAtMost(2));
  EXPECT_FALSE(e.ReadInFlightAtMost(1));
  e.ReadAnswered(5);  // the inline one
  ASSERT_EQ(e.reads_in_flight.size(), 3u);
  EXPECT_EQ(e.reads_in_flight[0], 2);
  EXPECT_EQ(e.reads_in_flight[1], 9);
  EXPECT_EQ(e.reads_in_flight[2], 7);
  e.ReadAnswered(9);  // one beside it
  ASSERT_EQ(e.reads_in_flight.size(), 2u);
  EXPECT_EQ(e.reads_in_flight[1], 7);
  e.ReadAnswered(1);  // not in flight: nothing changes
  EXPECT_EQ(e.reads_in_flight.size(), 2u);
  e.ReadAnswered(2);
  e.ReadAnswered(7);
  EXPECT_TRUE(e.reads_in_flight.empty());
  EXPECT_FALSE(e.pinned());
  EXPECT_FALSE(e.ReadInFlightAtMost(100));
  e.reads_in_flight.push_back(11);  // inline again
  EXPECT_EQ(e.reads_in_flight[0], 11);
}

TEST_F(RowCacheTest, EvictionPrefersRowsOutsideTheLookAheadWindow) {
  SpinLock lock(&st_.mu);  // single-threaded; for the thread-safety analysis
  const size_t one = kEntryOverheadBytes + 16;
  st_.budget = 3 * one + one / 2;  // room for three rows
  std::vector<CacheEntry*> es;
  for (uint64_t r = 0; r < 6; ++r) {
    CacheEntry* e = st_.FindOrCreate(RowKey{1, r}, 0, &table_);
    // Rows 0, 2 and 4 were prefetched (look-ahead) and are not read yet.
    if (r % 2 == 0) e->look_ahead = kLookAheadChances;
    st_.InstallValue(e, Dense({0, 0}), 0, 0);  // referenced, as every new value
    es.push_back(e);
  }
  MarkRead(es[1]);  // a read row: referenced again
  std::vector<uint64_t> evicted;
  st_.EvictOverBudget([&](CacheEntry* e) { evicted.push_back(e->key.row); });
  EXPECT_LE(st_.bytes, st_.budget);
  // Every row outside the window goes before any row in it.
  std::sort(evicted.begin(), evicted.end());
  EXPECT_EQ(evicted, (std::vector<uint64_t>{1, 3, 5}));

  // Reading a look-ahead row ends its protection; rows of a window that
  // is never read lose it after a few passes of the hand, so the cache
  // still keeps its budget.
  MarkRead(es[0]);
  EXPECT_EQ(es[0]->look_ahead, 0);
  st_.budget = one;
  evicted.clear();
  st_.EvictOverBudget([&](CacheEntry* e) { evicted.push_back(e->key.row); });
  EXPECT_LE(st_.bytes, st_.budget);
  EXPECT_EQ(evicted.size(), 2u);
}

TEST_F(RowCacheTest, EvictionKeepsOplogAndSkipsPinned) {
  SpinLock lock(&st_.mu);  // single-threaded; for the thread-safety analysis
  const size_t one = kEntryOverheadBytes + 16;
  st_.budget = 2 * one + one / 2;  // room for two rows
  std::vector<CacheEntry*> es;
  for (uint64_t r = 0; r < 4; ++r) {
    CacheEntry* e = st_.FindOrCreate(RowKey{1, r}, 0, &table_);
    st_.InstallValue(e, Dense({0, 0}), 0, 0);
    es.push_back(e);
  }
  st_.AddDelta(es[0], 0, Dense({5, 5}));  // un-sent update
  es[1]->waiters = 1;                     // pinned by a reader
  int evicted = 0;
  st_.EvictOverBudget([&](CacheEntry*) { ++evicted; });
  EXPECT_LE(st_.bytes, st_.budget);
  EXPECT_EQ(evicted, 2);
  EXPECT_TRUE(es[1]->has_value);
  // Row 0 may have lost its value, never its delta.
  CacheEntry* e0 = st_.Find(RowKey{1, 0});
  ASSERT_NE(e0, nullptr);
  ASSERT_TRUE(e0->has_open);
  EXPECT_EQ(DecodeDense<int64_t>(e0->open.delta), (std::vector<int64_t>{5, 5}));
  size_t with_value = 0;
  for (uint64_t r = 0; r < 4; ++r) {
    CacheEntry* e = st_.Find(RowKey{1, r});
    if (e != nullptr && e->has_value) ++with_value;
  }
  EXPECT_EQ(with_value, st_.ring.size());
  EXPECT_EQ(with_value, 2u);
}

TEST_F(RowCacheTest, DenseCellAndSparseRows) {
  SpinLock lock(&st_.mu);  // single-threaded; for the thread-safety analysis
  CacheEntry* e = st_.FindOrCreate(RowKey{1, 1}, 0, &table_);
  st_.InstallValue(e, Dense({1, 1}), 0, 0);
  st_.AddDenseCell(e, 0, 1, 41.0);
  EXPECT_EQ(Seen(*e), (std::vector<int64_t>{1, 42}));
  EXPECT_EQ(DecodeDense<int64_t>(e->open.delta), (std::vector<int64_t>{0, 41}));

  TableSchema ss = I64Schema(0);
  ss.kind = RowKind::kSparse;
  TableState sparse(ss, 1, nullptr);
  CacheEntry* s = st_.FindOrCreate(RowKey{2, 1}, 0, &sparse);
  std::vector<std::pair<uint32_t, int64_t>> d1{{3, 5}}, d2{{1, 2}, {3, -5}};
  st_.AddDelta(s, 0, EncodeSparse(d1));
  st_.InstallValue(s, EncodeSparse(std::vector<std::pair<uint32_t, int64_t>>{{7, 1}}), 0, 0);
  st_.AddDelta(s, 0, EncodeSparse(d2));
  std::string scratch;
  auto v = DecodeSparse<int64_t>(ReaderView(*s, sparse.format, &scratch));
  EXPECT_EQ(v, (std::vector<std::pair<uint32_t, int64_t>>{{1, 2}, {7, 1}}));
  // Open bytes follow the sparse delta's size as it grows: the dense one's
  // 16 plus the coalesced sparse delta's current encoding.
  EXPECT_EQ(st_.open_bytes, 16u + s->open.delta.size());
  const size_t sparse_bytes = s->open.delta.size();
  st_.Seal(s, 0, 0, &arena_);
  EXPECT_EQ(st_.open_bytes, 16u);
  EXPECT_EQ(st_.PurgeAcked(RowKey{2, 1}, 0), sparse_bytes);
}

TEST(EntryTableTest, MatchesAStdMapUnderRandomInsertsAndErases) {
  EntryTable table;
  std::unordered_map<uint64_t, CacheEntry*> model;
  std::mt19937_64 rng(5);
  RowKeyHash hash;
  for (int i = 0; i < 20000; ++i) {
    RowKey key{static_cast<uint32_t>(rng() % 3), rng() % 500};
    uint64_t id = key.row * 4 + key.table;
    CacheEntry* found = table.Find(key, hash(key));
    auto it = model.find(id);
    ASSERT_EQ(found, it == model.end() ? nullptr : it->second);
    if (found == nullptr) {
      CacheEntry* e = table.Insert(key, hash(key));
      EXPECT_EQ(e->key, key);
      model[id] = e;
    } else if (rng() % 2 == 0) {
      table.Erase(key, hash(key));
      model.erase(id);
    }
    ASSERT_EQ(table.size(), model.size());
  }
  size_t n = 0;
  table.ForEach([&](CacheEntry* e) {
    ++n;
    EXPECT_EQ(model.at(e->key.row * 4 + e->key.table), e);
  });
  EXPECT_EQ(n, model.size());
}

}  // namespace
}  // namespace pace::client
