// Property test: the client's rebasing (client/row_cache: AddDelta, Seal,
// InstallValue, ReaderView) and the shard's merge operator (storage/row_merge,
// in a real RocksDB with flushes and compactions) produce the same bytes.
//
// Read-my-writes (docs/design.md, "Read-my-writes") needs this bit for bit: a client shows
// its workers `server value + own unacknowledged deltas`, computed with
// common/ arithmetic on its side, and the shard later computes the same sum
// with its merge operator. Each schedule plays one row of a random format
// (dense or sparse, f32/f64/i32/i64, zeros initializer: a nonzero
// initializer is added after the stored sum, see docs/storage-format.md
// section 5) through random Incs, clocks, shard applies, other writers'
// deltas, installs of the shard's value, evictions, flushes and compactions,
// and checks after every step:
//   - while the installed value has seen no other writer since the install,
//     the reader's view equals the shard's stored bytes plus this process's
//     not-yet-applied deltas in clock order;
//   - at quiet points (every batch sealed and applied), the client's value
//     equals the shard's stored value byte for byte.
// Flushes and compactions are frequent so that operands are merged in every
// way RocksDB does (partially at flush, fully at compaction and on read):
// letting the operator merge float operands partially (reassociating them)
// fails this test within the first ten seeds, as does the client adding its
// sealed deltas out of clock order.
// A failure names its seed; PACE_REBASE_SEED=N replays just that schedule.
#include <gtest/gtest.h>
#include <rocksdb/db.h>
#include <rocksdb/options.h>

#include <cstdlib>
#include <deque>
#include <filesystem>
#include <iterator>
#include <memory>
#include <string>
#include <type_traits>
#include <utility>
#include <vector>

#include "client/row_cache.h"
#include "common/element.h"
#include "common/random.h"
#include "common/row.h"
#include "common/scoped_temp_dir.h"
#include "storage/row_merge.h"

namespace pace::client {
namespace {

constexpr int kSchedules = 300;  // per run, over all formats
constexpr int kStepsPerSchedule = 120;

// Draws from the Rng of common/random.h.
class Random {
 public:
  explicit Random(uint64_t seed) : rng_(seed) {}
  uint64_t Below(uint64_t n) { return rng_.UniformInt(n); }
  bool OneIn(uint64_t n) { return Below(n) == 0; }
  uint64_t Bits() { return rng_.Next(); }

 private:
  Rng rng_;
};

// A random element: floats of mixed magnitudes and signs (so sums round and
// cancel), integers from small ones to full range (so sums wrap).
template <typename T>
T RandomElement(Random* rnd) {
  if constexpr (std::is_integral_v<T>) {
    if (rnd->OneIn(3)) return static_cast<T>(rnd->Bits());
    return static_cast<T>(static_cast<int64_t>(rnd->Below(7)) - 3);
  } else {
    static constexpr double kScales[] = {1e-7, 0.1, 1, 3, 1e4, 1e8, 1e15};
    double v = static_cast<double>(rnd->Below(9)) - 4;
    if (rnd->OneIn(2)) v += static_cast<double>(rnd->Below(1000)) / 997.0;
    return static_cast<T>(v * kScales[rnd->Below(std::size(kScales))]);
  }
}

template <typename T>
std::string RandomDeltaTyped(const RowFormat& f, Random* rnd) {
  if (f.kind == RowKind::kDense) {
    std::vector<T> v(f.width);
    for (T& x : v) x = rnd->OneIn(4) ? T(0) : RandomElement<T>(rnd);
    return EncodeDense(v);
  }
  std::vector<std::pair<uint32_t, T>> entries;
  for (uint32_t c = 0; c < f.width; ++c) {
    if (rnd->OneIn(3)) entries.emplace_back(c, rnd->OneIn(6) ? T(0) : RandomElement<T>(rnd));
  }
  return EncodeSparse(entries);
}

std::string RandomDelta(const RowFormat& f, Random* rnd) {
  return VisitElementType(f.type,
                          [&](auto zero) { return RandomDeltaTyped<decltype(zero)>(f, rnd); });
}

std::string Tagged(const RowFormat& f, std::string_view payload) {
  std::string out(1, static_cast<char>(RowTag(f)));
  out.append(payload);
  return out;
}

// The shard's side: one row in a real RocksDB with the shard's merge operator,
// written as ShardStore writes (sparse explicit zeros stripped first).
class ShardRow {
 public:
  ShardRow(rocksdb::DB* db, std::string key, const RowFormat& f)
      : db_(db), key_(std::move(key)), f_(f) {}

  void Apply(std::string_view delta) {
    std::string stripped;
    if (f_.kind == RowKind::kSparse && SparseHasZero(f_, delta)) {
      StripSparseZeros(f_, delta, &stripped);
      delta = stripped;
    }
    ASSERT_TRUE(db_->Merge(rocksdb::WriteOptions(), key_, Tagged(f_, delta)).ok());
  }
  const std::string& key() const { return key_; }
  // The stored value's payload (the zero row if never written).
  std::string Value() const {
    std::string stored;
    rocksdb::Status s = db_->Get(rocksdb::ReadOptions(), key_, &stored);
    if (s.IsNotFound()) return ZeroRow(f_);
    EXPECT_TRUE(s.ok()) << s.ToString();
    std::string_view payload;
    Status p = ParseStoredRow(f_, stored, &payload);
    EXPECT_TRUE(p.ok()) << p.ToString();
    return std::string(payload);
  }

 private:
  rocksdb::DB* const db_;
  const std::string key_;
  const RowFormat f_;
};

struct Batch {
  ClockT clock;
  std::string delta;  // empty: this clock's batch had no delta of the row
};

// Plays one schedule; returns normally or with gtest failures recorded.
void RunSchedule(rocksdb::DB* db, uint64_t seed) {
  SCOPED_TRACE("PACE_REBASE_SEED=" + std::to_string(seed));
  Random rnd(seed);
  TableSchema schema;
  schema.id = 1;
  schema.name = "t";
  schema.kind = rnd.OneIn(2) ? RowKind::kDense : RowKind::kSparse;
  schema.type = static_cast<ElementType>(1 + rnd.Below(4));
  schema.width = static_cast<uint32_t>(1 + rnd.Below(12));
  TableState table(schema, 0, nullptr);
  const RowFormat& f = table.format;
  SCOPED_TRACE(std::string(RowKindName(f.kind)) + " " + std::string(ElementTypeName(f.type)) +
               " x " + std::to_string(f.width));

  CacheStripe st;
  ByteArena arena;        // the sealed deltas' (outliving them, as a batch's does)
  SpinLock lock(&st.mu);  // single-threaded; for the thread-safety analysis
  st.budget = 1 << 20;
  const RowKey key{1, seed};
  CacheEntry* e = st.FindOrCreate(key, 0, &table);
  ShardRow shard(db, "row-" + std::to_string(seed), f);

  ClockT clock = 0;             // the clock workers add to
  ClockT applied = 0;           // shard's applied clock of this process
  std::deque<Batch> in_flight;  // sealed, not yet applied by the shard
  bool others_since_install = true;

  // Installs the shard's value as a Read reply would.
  auto install = [&]() REQUIRES(st.mu) {
    st.InstallValue(e, shard.Value(), /*v=*/0, applied);
    others_since_install = false;
  };
  // The reader's view must be the shard's bytes + unapplied own deltas.
  auto check_view = [&] {
    if (!e->has_value || others_since_install) return;
    std::string want = shard.Value();
    for (const Batch& b : in_flight) {
      if (!b.delta.empty()) AddRowUnchecked(f, &want, b.delta);
    }
    if (e->has_open) AddRowUnchecked(f, &want, e->open.delta);
    std::string scratch;
    ASSERT_EQ(ReaderView(*e, f, &scratch), want);
  };

  for (int step = 0; step < kStepsPerSchedule; ++step) {
    switch (rnd.Below(10)) {
      case 0:
      case 1:
      case 2:  // a worker's Inc
        if (f.kind == RowKind::kDense && rnd.OneIn(3)) {
          // Client::Inc of one cell: a double converted to the element type.
          const double v = IsIntegral(f.type) ? static_cast<double>(rnd.Below(7)) - 3
                                              : RandomElement<double>(&rnd);
          st.AddDenseCell(e, clock, static_cast<uint32_t>(rnd.Below(f.width)), v);
        } else {
          st.AddDelta(e, clock, RandomDelta(f, &rnd));
        }
        break;
      case 3: {  // the clock ends: its batch is sealed and sent
        const PendingDelta* p = st.Seal(e, clock, 0, &arena);
        in_flight.push_back(Batch{clock, p != nullptr ? std::string(p->bytes()) : std::string()});
        ++clock;
        break;
      }
      case 4:
      case 5:  // the shard applies the oldest batch and acknowledges it
        if (!in_flight.empty()) {
          const Batch b = std::move(in_flight.front());
          in_flight.pop_front();
          if (!b.delta.empty()) shard.Apply(b.delta);
          applied = b.clock + 1;
          st.PurgeAcked(key, b.clock);
          e = st.FindOrCreate(key, 0, &table);  // PurgeAcked may erase an empty entry
        }
        break;
      case 6:  // another process's delta reaches the shard
        shard.Apply(RandomDelta(f, &rnd));
        others_since_install = true;
        break;
      case 7:  // a Read reply (or push) installs the shard's value
        install();
        break;
      case 8:  // eviction
        if (rnd.OneIn(3)) {
          st.DropValue(e);
        } else if (rnd.OneIn(6)) {  // operands move to an SST
          ASSERT_TRUE(db->Flush(rocksdb::FlushOptions()).ok());
        } else if (rnd.OneIn(12)) {  // the row's operands merge into a base value
          const rocksdb::Slice k = shard.key();
          ASSERT_TRUE(db->CompactRange(rocksdb::CompactRangeOptions(), &k, &k).ok());
        }
        break;
      case 9:  // a quiet point: everything sealed and applied
        if (!rnd.OneIn(3)) break;
        if (const PendingDelta* p = st.Seal(e, clock, 0, &arena)) {
          in_flight.push_back(Batch{clock, std::string(p->bytes())});
        }
        ++clock;
        while (!in_flight.empty()) {
          if (!in_flight.front().delta.empty()) shard.Apply(in_flight.front().delta);
          applied = in_flight.front().clock + 1;
          st.PurgeAcked(key, in_flight.front().clock);
          in_flight.pop_front();
        }
        e = st.FindOrCreate(key, 0, &table);
        if (e->has_value && !others_since_install) {
          ASSERT_EQ(e->value, shard.Value()) << "client value != shard value at a quiet point";
        }
        if (!e->has_value) install();
        break;
    }
    check_view();
    if (::testing::Test::HasFatalFailure()) return;
  }
}

class RebaseMergePropertyTest : public ::testing::Test {
 protected:
  void SetUp() override {
    ASSERT_FALSE(dir_.path().empty());
    rocksdb::Options o;
    o.create_if_missing = true;
    o.merge_operator = NewRowAddMergeOperator();
    o.write_buffer_size = 64 << 10;  // small memtables: operands spread over SSTs
    rocksdb::DB* db = nullptr;
    rocksdb::Status s = rocksdb::DB::Open(o, dir_.path() + "/db", &db);
    ASSERT_TRUE(s.ok()) << s.ToString();
    db_.reset(db);
  }

  // In memory where there is a tmpfs: the test flushes often and waits for
  // each flush's fsyncs, which only slow it down.
  ScopedTempDir dir_{"pace-rebase-test",
                     std::filesystem::is_directory("/dev/shm") ? "/dev/shm" : ""};
  std::unique_ptr<rocksdb::DB> db_;
};

TEST_F(RebaseMergePropertyTest, ClientRebasingEqualsShardMergeBitForBit) {
  if (const char* one = std::getenv("PACE_REBASE_SEED")) {
    RunSchedule(db_.get(), std::strtoull(one, nullptr, 10));
    return;
  }
  for (uint64_t seed = 1; seed <= kSchedules; ++seed) {
    RunSchedule(db_.get(), seed);
    if (HasFatalFailure()) return;
  }
}

}  // namespace
}  // namespace pace::client
