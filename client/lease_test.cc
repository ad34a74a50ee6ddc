// Worker::LeaseRows and ReleaseRows (client/pace.h): a worker updates rows it
// alone updates in place, through pointers to their cached values and to its
// open deltas. Against an embedded shard: exact totals in the process and at
// the shard (read back by a fresh process), other workers' reads of leased
// rows waiting for the release and their updates failing, the ends of a
// lease, rows that cannot be leased, eviction, argument errors. Against a
// scripted shard: a part of a clock sealed while rows are leased leaves them
// for a later part, and a value arriving for a leased row is installed at the
// release.
#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <functional>
#include <future>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <type_traits>
#include <utility>
#include <vector>

#include "client/client_impl.h"
#include "client/pace.h"
#include "client/scripted_channel_test_util.h"
#include "common/row.h"
#include "common/scoped_temp_dir.h"

namespace pace {
namespace {

using client::ScriptedChannel;

constexpr uint32_t kWidth = 4;

template <typename T>
constexpr ElementType kTypeOf = std::is_same_v<T, float>     ? ElementType::kF32
                                : std::is_same_v<T, double>  ? ElementType::kF64
                                : std::is_same_v<T, int32_t> ? ElementType::kI32
                                                             : ElementType::kI64;

TableSchema DenseSchema(ElementType type, uint32_t width = kWidth,
                        Consistency c = Consistency::kSsp, uint32_t staleness = 1) {
  TableSchema schema;
  schema.name = "leased";
  schema.type = type;
  schema.width = width;
  schema.consistency = c;
  schema.staleness = staleness;
  return schema;
}

std::vector<uint64_t> RowRange(uint64_t first, uint64_t n) {
  std::vector<uint64_t> rows(n);
  for (uint64_t i = 0; i < n; ++i) rows[i] = first + i;
  return rows;
}

// What LeaseRows hands out. Filled with a non-null sentinel before the call,
// so that a row left unset is not taken for one set to nullptr.
template <typename T>
struct Leased {
  std::vector<const T*> values;
  std::vector<T*> deltas;
};

template <typename T>
Status Lease(Worker* w, const Table& t, const std::vector<uint64_t>& rows, Leased<T>* l) {
  static T sentinel[kWidth];
  l->values.assign(rows.size(), sentinel);
  l->deltas.assign(rows.size(), sentinel);
  return w->LeaseRows(t, rows, l->values.data(), l->deltas.data());
}

// Workers wait here for each other after each clock.
class Lockstep {
 public:
  explicit Lockstep(int n) : n_(n) {}
  void Arrive() {
    std::unique_lock<std::mutex> l(mu_);
    const int round = round_;
    if (++arrived_ == n_) {
      arrived_ = 0;
      ++round_;
      cv_.notify_all();
      return;
    }
    cv_.wait(l, [&] { return round_ != round; });
  }

 private:
  const int n_;
  std::mutex mu_;
  std::condition_variable cv_;
  int arrived_ = 0;  // guarded by mu_
  int round_ = 0;    // guarded by mu_
};

// f's result; after 10 s a test failure, and unblock() (if given), which lets
// the blocked call return.
Status Await(std::future<Status>& f, const std::function<void()>& unblock) {
  if (f.wait_for(std::chrono::seconds(10)) != std::future_status::ready) {
    ADD_FAILURE() << "call still blocked after 10 s";
    if (unblock) unblock();
  }
  return f.get();
}

class LeaseTest : public ::testing::Test {
 protected:
  // --- Embedded -------------------------------------------------------------
  // A process on dir_ with table t_ of `schema` and `workers` workers w_.
  void OpenEmbedded(const TableSchema& schema, int workers, ClientOptions o = {}) {
    o.data_dir = dir_.path();
    options_ = o;
    ASSERT_TRUE(Client::Open(o, &client_).ok());
    ASSERT_TRUE(client_->CreateTable(schema, &t_).ok());
    w_.resize(workers);
    for (auto& w : w_) ASSERT_TRUE(client_->RegisterWorker(&w).ok());
  }

  // Ends the process after the shard applied every clock its workers
  // finished (REQUIRES: the workers left are at one clock) and opens a fresh
  // one on the store, with one worker w_[0]: it reads what the shard stored.
  void Reopen() {
    for (auto& w : w_) {
      if (w != nullptr) {
        ASSERT_TRUE(w->GlobalBarrier().ok());
        break;
      }
    }
    const std::string name = t_.name();
    w_.clear();
    ASSERT_TRUE(client_->Flush().ok());
    client_.reset();
    ASSERT_TRUE(Client::Open(options_, &client_).ok());
    ASSERT_TRUE(client_->OpenTable(name, &t_).ok());
    w_.resize(1);
    ASSERT_TRUE(client_->RegisterWorker(&w_[0]).ok());
  }

  template <typename T>
  std::vector<T> Get(Worker* w, uint64_t row) {
    std::vector<T> x(t_.schema().width);
    const Status s = w->Get(t_, row, x.data());
    EXPECT_TRUE(s.ok()) << "row " << row << ": " << s.ToString();
    return x;
  }

  // --- Scripted -------------------------------------------------------------
  // A process on a scripted shard ch_ with table t_ of `schema` (id `id`).
  void OpenScripted(const ClientOptions& o, const TableSchema& schema, uint32_t id) {
    ASSERT_TRUE(client::OpenOnScriptedShard(o, &client_, &ch_).ok());
    ASSERT_TRUE(client::CreateTableOnScriptedShard(client_.get(), ch_, schema, id, &t_).ok());
  }

  // Auto mode as a shard that adds every Apply to stored_ and answers Reads
  // with it (StartSummingShard).
  void StartSummingShard(uint32_t width) { client::StartSummingShard(ch_, width, &mu_, &stored_); }

  // Fails the scripted shard: a call blocked on it returns.
  void FailShard() { ch_->Deliver(net::Error{0, StatusCode::kInternal, "test deadline"}); }

  template <typename T>
  void ExpectLeasedDeltasAddUpExactly();
  template <typename T>
  void ExpectExactTotalsOfTwoWorkers();

  ScopedTempDir dir_;
  ClientOptions options_;
  // Declared before client_, so that they outlive its channel's auto thread.
  std::mutex mu_;
  std::map<uint64_t, std::vector<int64_t>> stored_;  // guarded by mu_
  std::unique_ptr<Client> client_;
  ScriptedChannel* ch_ = nullptr;
  Table t_;
  // Declared after client_: a worker never outlives its client.
  std::vector<std::unique_ptr<Worker>> w_;
};

// Rows written at clock 0 are leased at clock 1 and updated through their
// deltas: while leased the owner reads them as value + delta, after the
// release another worker does, and the shard stores initial + deltas.
template <typename T>
void LeaseTest::ExpectLeasedDeltasAddUpExactly() {
  ASSERT_NO_FATAL_FAILURE(OpenEmbedded(DenseSchema(kTypeOf<T>), 2));
  Worker* a = w_[0].get();
  Worker* b = w_[1].get();
  const std::vector<uint64_t> rows = RowRange(10, 6);
  auto initial = [](uint64_t r, uint32_t k) { return static_cast<T>(r * 10 + k); };
  auto delta = [](size_t i, uint32_t k) { return static_cast<T>((i + 1) * (k + 1)); };
  for (uint64_t r : rows) {
    std::vector<T> x(kWidth);
    for (uint32_t k = 0; k < kWidth; ++k) x[k] = initial(r, k);
    ASSERT_TRUE(a->Inc(t_, r, x.data()).ok());
  }
  ASSERT_TRUE(a->Clock().ok());
  ASSERT_TRUE(b->Clock().ok());  // clock 0 is sent: its rows can be leased at clock 1

  Leased<T> l;
  ASSERT_TRUE(Lease(a, t_, rows, &l).ok());
  for (size_t i = 0; i < rows.size(); ++i) {
    ASSERT_NE(l.values[i], nullptr) << "row " << rows[i];
    ASSERT_NE(l.deltas[i], nullptr) << "row " << rows[i];
    for (uint32_t k = 0; k < kWidth; ++k) {
      EXPECT_EQ(l.values[i][k] + l.deltas[i][k], initial(rows[i], k)) << "row " << rows[i];
    }
  }
  for (int pass = 0; pass < 2; ++pass) {
    for (size_t i = 0; i < rows.size(); ++i) {
      for (uint32_t k = 0; k < kWidth; ++k) l.deltas[i][k] += delta(i, k);
    }
  }
  for (size_t i = 0; i < rows.size(); ++i) {
    const std::vector<T> x = Get<T>(a, rows[i]);  // the owner's read, while leased
    for (uint32_t k = 0; k < kWidth; ++k) {
      EXPECT_EQ(x[k], initial(rows[i], k) + 2 * delta(i, k)) << "row " << rows[i];
      EXPECT_EQ(l.values[i][k] + l.deltas[i][k], x[k]) << "row " << rows[i];
    }
  }
  a->ReleaseRows();
  for (size_t i = 0; i < rows.size(); ++i) {
    const std::vector<T> x = Get<T>(b, rows[i]);
    for (uint32_t k = 0; k < kWidth; ++k) {
      EXPECT_EQ(x[k], initial(rows[i], k) + 2 * delta(i, k)) << "row " << rows[i];
    }
  }
  ASSERT_TRUE(a->Clock().ok());
  ASSERT_TRUE(b->Clock().ok());
  ASSERT_NO_FATAL_FAILURE(Reopen());
  for (size_t i = 0; i < rows.size(); ++i) {
    const std::vector<T> x = Get<T>(w_[0].get(), rows[i]);
    for (uint32_t k = 0; k < kWidth; ++k) {
      EXPECT_EQ(x[k], initial(rows[i], k) + 2 * delta(i, k)) << "stored row " << rows[i];
    }
  }
}

TEST_F(LeaseTest, LeasedDeltasAddUpExactlyI64) { ExpectLeasedDeltasAddUpExactly<int64_t>(); }
TEST_F(LeaseTest, LeasedDeltasAddUpExactlyI32) { ExpectLeasedDeltasAddUpExactly<int32_t>(); }
TEST_F(LeaseTest, LeasedDeltasAddUpExactlyF32) { ExpectLeasedDeltasAddUpExactly<float>(); }
TEST_F(LeaseTest, LeasedDeltasAddUpExactlyF64) { ExpectLeasedDeltasAddUpExactly<double>(); }

// Two workers in lockstep over several clocks. Each owns rows that it leases
// in two chunks per clock (the second LeaseRows ends the first's leases) and
// once more (the first chunk again, whose deltas hold the clock's first
// add), and both Inc shared rows as usual and read them while holding
// leases. Every lease reads as every update so far; the totals are exact in
// the process and at the shard. Deltas are multiples of 1/4 for floats: every
// sum is exact.
template <typename T>
void LeaseTest::ExpectExactTotalsOfTwoWorkers() {
  constexpr int kWorkers = 2, kClocks = 6;
  constexpr uint64_t kShared = 4, kOwn = 40;  // rows [0, kShared) shared, then kOwn per worker
  ASSERT_NO_FATAL_FAILURE(OpenEmbedded(DenseSchema(kTypeOf<T>), kWorkers));
  auto delta = [](uint64_t r, int c, uint32_t k) {
    T x = static_cast<T>(r % 5 + static_cast<uint64_t>(c) + k + 1);
    if constexpr (std::is_floating_point_v<T>) x /= 4;
    return x;
  };
  auto own_rows = [](int id, int chunk) {
    return RowRange(kShared + id * kOwn + chunk * kOwn / 2, kOwn / 2);
  };
  Lockstep lockstep(kWorkers);
  auto work = [&](int id) {
    Worker* w = w_[id].get();
    std::map<uint64_t, std::vector<T>> want;  // own rows with every update so far
    for (int chunk = 0; chunk < 2; ++chunk) {
      for (uint64_t r : own_rows(id, chunk)) want[r].assign(kWidth, T{0});
    }
    auto lease_and_add = [&](const std::vector<uint64_t>& rows, int c) {
      Leased<T> l;
      const Status s = Lease(w, t_, rows, &l);
      EXPECT_TRUE(s.ok()) << s.ToString();
      for (size_t i = 0; i < rows.size(); ++i) {
        std::vector<T>& x = want[rows[i]];
        std::vector<T> d(kWidth);
        for (uint32_t k = 0; k < kWidth; ++k) d[k] = delta(rows[i], c, k);
        // Neither leased by the other worker nor holding an unsent update
        // (both finished the clock before): every row is leased.
        if (s.ok() && l.values[i] != nullptr && l.deltas[i] != nullptr) {
          for (uint32_t k = 0; k < kWidth; ++k) {
            EXPECT_EQ(l.values[i][k] + l.deltas[i][k], x[k])
                << "worker " << id << " row " << rows[i] << " clock " << c;
            l.deltas[i][k] += d[k];
          }
        } else {
          ADD_FAILURE() << "worker " << id << " could not lease row " << rows[i] << " at clock "
                        << c;
          EXPECT_TRUE(w->Inc(t_, rows[i], d.data()).ok());
        }
        for (uint32_t k = 0; k < kWidth; ++k) x[k] += d[k];
      }
    };
    const std::vector<T> mine(kWidth, static_cast<T>(id + 1));
    for (int c = 0; c < kClocks; ++c) {
      lease_and_add(own_rows(id, 0), c);
      lease_and_add(own_rows(id, 1), c);
      for (uint64_t r = 0; r < kShared; ++r) {
        EXPECT_TRUE(w->Inc(t_, r, mine.data()).ok());
        // Not leased by anyone: read as usual while this worker holds leases.
        std::vector<T> x(kWidth);
        const Status s = w->Get(t_, r, x.data());
        EXPECT_TRUE(s.ok()) << s.ToString();
        // Every Inc of the clocks before (both finished them) and this one's.
        EXPECT_GE(x[0], static_cast<T>(3 * c + id + 1)) << "shared row " << r << " clock " << c;
        EXPECT_LE(x[0], static_cast<T>(3 * (c + 1))) << "shared row " << r << " clock " << c;
      }
      lease_and_add(own_rows(id, 0), c);  // again in the same clock
      EXPECT_TRUE(w->Clock().ok());
      lockstep.Arrive();
    }
  };
  std::thread t0(work, 0), t1(work, 1);
  t0.join();
  t1.join();
  auto expect_totals = [&](Worker* w, const char* where) {
    for (uint64_t r = 0; r < kShared; ++r) {
      const std::vector<T> x = Get<T>(w, r);
      for (uint32_t k = 0; k < kWidth; ++k) {
        EXPECT_EQ(x[k], static_cast<T>(3 * kClocks)) << where << " shared row " << r;
      }
    }
    for (int id = 0; id < kWorkers; ++id) {
      for (int chunk = 0; chunk < 2; ++chunk) {
        for (uint64_t r : own_rows(id, chunk)) {
          const std::vector<T> x = Get<T>(w, r);
          for (uint32_t k = 0; k < kWidth; ++k) {
            T want{0};
            for (int c = 0; c < kClocks; ++c) {
              want += delta(r, c, k);
              if (chunk == 0) want += delta(r, c, k);
            }
            EXPECT_EQ(x[k], want) << where << " row " << r << " element " << k;
          }
        }
      }
    }
  };
  expect_totals(w_[0].get(), "in the process:");
  ASSERT_NO_FATAL_FAILURE(Reopen());
  expect_totals(w_[0].get(), "stored:");
}

TEST_F(LeaseTest, ExactTotalsOfTwoWorkersLeasingTheirRowsAndIncingSharedOnesI64) {
  ExpectExactTotalsOfTwoWorkers<int64_t>();
}

TEST_F(LeaseTest, ExactTotalsOfTwoWorkersLeasingTheirRowsAndIncingSharedOnesF32) {
  ExpectExactTotalsOfTwoWorkers<float>();
}

TEST_F(LeaseTest, DuplicateRowsGetTheSamePointers) {
  ASSERT_NO_FATAL_FAILURE(OpenEmbedded(DenseSchema(ElementType::kI64), 1));
  Worker* w = w_[0].get();
  const std::vector<uint64_t> rows = {3, 8, 3, 3, 8};
  Leased<int64_t> l;
  ASSERT_TRUE(Lease(w, t_, rows, &l).ok());
  for (size_t i = 0; i < rows.size(); ++i) {
    ASSERT_NE(l.values[i], nullptr) << i;
    ASSERT_NE(l.deltas[i], nullptr) << i;
  }
  EXPECT_EQ(l.values[2], l.values[0]);
  EXPECT_EQ(l.values[3], l.values[0]);
  EXPECT_EQ(l.values[4], l.values[1]);
  EXPECT_EQ(l.deltas[2], l.deltas[0]);
  EXPECT_EQ(l.deltas[3], l.deltas[0]);
  EXPECT_EQ(l.deltas[4], l.deltas[1]);
  EXPECT_NE(l.values[0], l.values[1]);
  EXPECT_NE(l.deltas[0], l.deltas[1]);
  for (size_t i = 0; i < rows.size(); ++i) {
    for (uint32_t k = 0; k < kWidth; ++k) l.deltas[i][k] += 1;
  }
  w->ReleaseRows();
  EXPECT_EQ(Get<int64_t>(w, 3), std::vector<int64_t>(kWidth, 3));
  EXPECT_EQ(Get<int64_t>(w, 8), std::vector<int64_t>(kWidth, 2));
}

// Every update of a leased row by another worker fails, and changes nothing;
// other rows are updated as usual, and the row again after the release.
TEST_F(LeaseTest, AnotherWorkersUpdatesOfALeasedRowFailUntilTheRelease) {
  ASSERT_NO_FATAL_FAILURE(OpenEmbedded(DenseSchema(ElementType::kI64), 2));
  Worker* a = w_[0].get();
  Worker* b = w_[1].get();
  Leased<int64_t> l;
  ASSERT_TRUE(Lease(a, t_, {5}, &l).ok());
  ASSERT_NE(l.deltas[0], nullptr);
  for (uint32_t k = 0; k < kWidth; ++k) l.deltas[0][k] += 2;
  const std::vector<int64_t> ones(kWidth, 1), twos(kWidth, 2);
  const std::vector<uint64_t> five = {5};
  EXPECT_EQ(b->Inc(t_, 5, ones.data()).code(), StatusCode::kFailedPrecondition) << "Inc";
  EXPECT_EQ(b->Inc(t_, five, ones.data()).code(), StatusCode::kFailedPrecondition) << "batched Inc";
  EXPECT_EQ(b->IncDiff(t_, five, twos.data(), ones.data()).code(), StatusCode::kFailedPrecondition)
      << "IncDiff";
  EXPECT_EQ(b->IncCell(t_, 5, 0, 1.0).code(), StatusCode::kFailedPrecondition) << "IncCell";
  EXPECT_EQ(b->Inc(t_, 5, std::vector<std::pair<uint32_t, int64_t>>{{1, 1}}).code(),
            StatusCode::kFailedPrecondition)
      << "Inc of (column, delta) pairs";
  EXPECT_EQ(b->BatchInc(t_, five, {EncodeDense(ones)}).code(), StatusCode::kFailedPrecondition)
      << "BatchInc";
  EXPECT_TRUE(b->Inc(t_, 6, ones.data()).ok());  // a row not leased
  a->ReleaseRows();
  EXPECT_TRUE(b->Inc(t_, 5, ones.data()).ok());
  EXPECT_EQ(Get<int64_t>(b, 5), std::vector<int64_t>(kWidth, 3));
  EXPECT_EQ(Get<int64_t>(b, 6), std::vector<int64_t>(kWidth, 1));
  ASSERT_TRUE(a->Clock().ok());
  ASSERT_TRUE(b->Clock().ok());
  ASSERT_NO_FATAL_FAILURE(Reopen());
  EXPECT_EQ(Get<int64_t>(w_[0].get(), 5), std::vector<int64_t>(kWidth, 3));
  EXPECT_EQ(Get<int64_t>(w_[0].get(), 6), std::vector<int64_t>(kWidth, 1));
}

// Other workers' reads of a leased row (Get, and GetRows with other rows)
// wait for the release, and then read the owner's deltas, also those added
// while they waited.
TEST_F(LeaseTest, AnotherWorkersReadOfALeasedRowWaitsForTheRelease) {
  ASSERT_NO_FATAL_FAILURE(OpenEmbedded(DenseSchema(ElementType::kI64), 3));
  Worker* a = w_[0].get();
  Worker* b = w_[1].get();
  Worker* c = w_[2].get();
  Leased<int64_t> l;
  ASSERT_TRUE(Lease(a, t_, {7}, &l).ok());
  ASSERT_NE(l.deltas[0], nullptr);
  for (uint32_t k = 0; k < kWidth; ++k) l.deltas[0][k] += 3;
  std::atomic<bool> get_returned{false}, get_rows_returned{false};
  std::vector<int64_t> got(kWidth, -1), got_rows(3 * kWidth, -1);
  auto get = std::async(std::launch::async, [&] {
    const Status s = b->Get(t_, 7, got.data());
    get_returned.store(true);
    return s;
  });
  auto get_rows = std::async(std::launch::async, [&] {
    const Status s = c->GetRows(t_, {1, 7, 2}, got_rows.data());
    get_rows_returned.store(true);
    return s;
  });
  std::this_thread::sleep_for(std::chrono::milliseconds(200));
  EXPECT_FALSE(get_returned.load()) << "Get read a leased row before its release";
  EXPECT_FALSE(get_rows_returned.load()) << "GetRows read a leased row before its release";
  for (uint32_t k = 0; k < kWidth; ++k) l.deltas[0][k] += 4 * (k + 1);  // while they wait
  a->ReleaseRows();
  EXPECT_TRUE(Await(get, nullptr).ok());
  EXPECT_TRUE(Await(get_rows, nullptr).ok());
  for (uint32_t k = 0; k < kWidth; ++k) {
    const int64_t want = 3 + 4 * (k + 1);
    EXPECT_EQ(got[k], want) << k;
    EXPECT_EQ(got_rows[kWidth + k], want) << k;
    EXPECT_EQ(got_rows[k], 0) << k;
    EXPECT_EQ(got_rows[2 * kWidth + k], 0) << k;
  }
}

// Two workers holding leases, each reading the other's leased row: neither
// waits (each would wait for the other forever); they fail. A row no longer
// leased is read as usual by a worker holding leases.
TEST_F(LeaseTest, AReadThatWouldWaitForALeaseFailsWhileItsWorkerHoldsLeases) {
  ASSERT_NO_FATAL_FAILURE(OpenEmbedded(DenseSchema(ElementType::kI64), 2));
  Worker* a = w_[0].get();
  Worker* b = w_[1].get();
  Leased<int64_t> la, lb;
  ASSERT_TRUE(Lease(a, t_, {1}, &la).ok());
  ASSERT_TRUE(Lease(b, t_, {2}, &lb).ok());
  ASSERT_NE(la.deltas[0], nullptr);
  ASSERT_NE(lb.deltas[0], nullptr);
  for (uint32_t k = 0; k < kWidth; ++k) {
    la.deltas[0][k] += 5;
    lb.deltas[0][k] += 6;
  }
  // In threads: a read that waits would otherwise hang the test; the other
  // worker's release lets it return.
  auto read = [&](Worker* w, std::vector<uint64_t> rows, Worker* other) {
    auto f = std::async(std::launch::async, [w, rows, this] {
      std::vector<int64_t> x(rows.size() * kWidth);
      return rows.size() == 1 ? w->Get(t_, rows[0], x.data()) : w->GetRows(t_, rows, x.data());
    });
    return Await(f, [other] { other->ReleaseRows(); });
  };
  EXPECT_EQ(read(a, {2}, b).code(), StatusCode::kFailedPrecondition) << "Get";
  EXPECT_EQ(read(b, {1}, a).code(), StatusCode::kFailedPrecondition) << "Get";
  EXPECT_EQ(read(a, {0, 2}, b).code(), StatusCode::kFailedPrecondition) << "GetRows";
  b->ReleaseRows();
  // a still holds row 1: its reads of row 2 no longer wait for anyone.
  EXPECT_EQ(Get<int64_t>(a, 2), std::vector<int64_t>(kWidth, 6));
  EXPECT_EQ(Get<int64_t>(a, 1), std::vector<int64_t>(kWidth, 5));
  a->ReleaseRows();
  EXPECT_EQ(Get<int64_t>(b, 1), std::vector<int64_t>(kWidth, 5));
}

// Clock() ends the worker's leases: another worker's read of the row no
// longer waits, and its update succeeds.
TEST_F(LeaseTest, ClockEndsTheLeases) {
  ASSERT_NO_FATAL_FAILURE(OpenEmbedded(DenseSchema(ElementType::kI64), 2));
  Worker* a = w_[0].get();
  Worker* b = w_[1].get();
  Leased<int64_t> l;
  ASSERT_TRUE(Lease(a, t_, {4}, &l).ok());
  ASSERT_NE(l.deltas[0], nullptr);
  for (uint32_t k = 0; k < kWidth; ++k) l.deltas[0][k] += 3;
  ASSERT_TRUE(a->Clock().ok());
  std::vector<int64_t> got(kWidth, -1);
  auto get = std::async(std::launch::async, [&] { return b->Get(t_, 4, got.data()); });
  EXPECT_TRUE(Await(get, [a] { a->ReleaseRows(); }).ok());
  EXPECT_EQ(got, std::vector<int64_t>(kWidth, 3));
  const std::vector<int64_t> ones(kWidth, 1);
  EXPECT_TRUE(b->Inc(t_, 4, ones.data()).ok());
  ASSERT_TRUE(b->Clock().ok());
  ASSERT_NO_FATAL_FAILURE(Reopen());
  EXPECT_EQ(Get<int64_t>(w_[0].get(), 4), std::vector<int64_t>(kWidth, 4));
}

// Leases add up over LeaseRows calls (a row leased again gets the same
// pointers) and end with the worker's destruction; the deltas added through
// them are kept.
TEST_F(LeaseTest, LeasesAddUpAndTheWorkersDestructionEndsThem) {
  ASSERT_NO_FATAL_FAILURE(OpenEmbedded(DenseSchema(ElementType::kI64), 2));
  Worker* a = w_[0].get();
  Worker* b = w_[1].get();
  const std::vector<int64_t> ones(kWidth, 1);
  Leased<int64_t> l;
  ASSERT_TRUE(Lease(a, t_, {1}, &l).ok());
  ASSERT_NE(l.deltas[0], nullptr);
  for (uint32_t k = 0; k < kWidth; ++k) l.deltas[0][k] += 2;
  int64_t* first = l.deltas[0];
  ASSERT_TRUE(Lease(a, t_, {2, 1}, &l).ok());
  ASSERT_NE(l.deltas[0], nullptr);
  EXPECT_EQ(l.deltas[1], first) << "row 1, leased again, gets the same delta";
  for (uint32_t k = 0; k < kWidth; ++k) l.deltas[0][k] += 3;
  EXPECT_EQ(b->Inc(t_, 1, ones.data()).code(), StatusCode::kFailedPrecondition)
      << "row 1 is still leased: leases add up";
  EXPECT_EQ(b->Inc(t_, 2, ones.data()).code(), StatusCode::kFailedPrecondition);
  w_[0].reset();  // a's clock 0 is b's too: b finishing it sends a's deltas
  EXPECT_TRUE(b->Inc(t_, 1, ones.data()).ok()) << "row 1 still leased after its worker left";
  EXPECT_TRUE(b->Inc(t_, 2, ones.data()).ok()) << "row 2 still leased after its worker left";
  EXPECT_EQ(Get<int64_t>(b, 1), std::vector<int64_t>(kWidth, 3));
  EXPECT_EQ(Get<int64_t>(b, 2), std::vector<int64_t>(kWidth, 4));
  ASSERT_TRUE(b->Clock().ok());
  ASSERT_NO_FATAL_FAILURE(Reopen());
  EXPECT_EQ(Get<int64_t>(w_[0].get(), 1), std::vector<int64_t>(kWidth, 3));
  EXPECT_EQ(Get<int64_t>(w_[0].get(), 2), std::vector<int64_t>(kWidth, 4));
}

// ReleaseRows(count) ends the oldest leases first, call by call (a row leased
// again in a later call keeps its place); the rest stay leased, and every
// delta added through the pointers reaches the shard once.
TEST_F(LeaseTest, ReleasingACountEndsTheLeasesOfTheEarliestCallsFirst) {
  ASSERT_NO_FATAL_FAILURE(OpenEmbedded(DenseSchema(ElementType::kI64), 2));
  Worker* a = w_[0].get();
  Worker* b = w_[1].get();
  const std::vector<int64_t> ones(kWidth, 1);
  Leased<int64_t> first, second, third;
  ASSERT_TRUE(Lease(a, t_, {1, 2}, &first).ok());
  ASSERT_TRUE(Lease(a, t_, {3}, &second).ok());
  ASSERT_TRUE(Lease(a, t_, {2, 4}, &third).ok());  // row 2 again: not a new lease
  EXPECT_EQ(a->leased_rows(), 4u);
  for (const Leased<int64_t>* l : {&first, &second, &third}) {
    for (int64_t* d : l->deltas) {
      ASSERT_NE(d, nullptr);
      for (uint32_t k = 0; k < kWidth; ++k) d[k] += 10;
    }
  }
  a->ReleaseRows(0);
  EXPECT_EQ(a->leased_rows(), 4u) << "a count of 0 releases nothing";
  a->ReleaseRows(2);  // the first call's rows: 1 and 2
  EXPECT_EQ(a->leased_rows(), 2u);
  EXPECT_TRUE(b->Inc(t_, 1, ones.data()).ok()) << "row 1 released";
  EXPECT_TRUE(b->Inc(t_, 2, ones.data()).ok()) << "row 2 released (first leased in the first call)";
  EXPECT_EQ(b->Inc(t_, 3, ones.data()).code(), StatusCode::kFailedPrecondition) << "row 3 leased";
  EXPECT_EQ(b->Inc(t_, 4, ones.data()).code(), StatusCode::kFailedPrecondition) << "row 4 leased";
  // The later calls' pointers stay valid.
  for (uint32_t k = 0; k < kWidth; ++k) second.deltas[0][k] += 100;
  for (uint32_t k = 0; k < kWidth; ++k) third.deltas[1][k] += 100;
  a->ReleaseRows(10);  // more than it holds: all
  EXPECT_EQ(a->leased_rows(), 0u);
  EXPECT_TRUE(b->Inc(t_, 3, ones.data()).ok());
  EXPECT_TRUE(b->Inc(t_, 4, ones.data()).ok());
  ASSERT_TRUE(a->Clock().ok());
  ASSERT_TRUE(b->Clock().ok());
  ASSERT_NO_FATAL_FAILURE(Reopen());
  EXPECT_EQ(Get<int64_t>(w_[0].get(), 1), std::vector<int64_t>(kWidth, 11));
  EXPECT_EQ(Get<int64_t>(w_[0].get(), 2), std::vector<int64_t>(kWidth, 21));  // two calls' adds
  EXPECT_EQ(Get<int64_t>(w_[0].get(), 3), std::vector<int64_t>(kWidth, 111));
  EXPECT_EQ(Get<int64_t>(w_[0].get(), 4), std::vector<int64_t>(kWidth, 111));
}

// A moving window of leases (pace_mf's): calls released oldest first while
// later calls lease more, past the point where the released ones are dropped
// from the worker's list. Each release ends exactly its call's rows, and
// every delta reaches the shard once.
TEST_F(LeaseTest, AMovingWindowReleasesEachCallsRowsInTurn) {
  ASSERT_NO_FATAL_FAILURE(OpenEmbedded(DenseSchema(ElementType::kI64), 2));
  Worker* a = w_[0].get();
  Worker* b = w_[1].get();
  const std::vector<int64_t> ones(kWidth, 1);
  auto add = [](const Leased<int64_t>& l, int64_t x) {
    for (int64_t* d : l.deltas) {
      ASSERT_NE(d, nullptr);
      for (uint32_t k = 0; k < kWidth; ++k) d[k] += x;
    }
  };
  auto leased = [&](uint64_t row) {
    return b->Inc(t_, row, ones.data()).code() == StatusCode::kFailedPrecondition;
  };
  Leased<int64_t> c1, c2, c3, c4;
  ASSERT_TRUE(Lease(a, t_, {1, 2}, &c1).ok());
  ASSERT_TRUE(Lease(a, t_, {3}, &c2).ok());
  ASSERT_TRUE(Lease(a, t_, {4, 5}, &c3).ok());
  ASSERT_NO_FATAL_FAILURE(add(c1, 10));
  ASSERT_NO_FATAL_FAILURE(add(c2, 10));
  ASSERT_NO_FATAL_FAILURE(add(c3, 10));
  a->ReleaseRows(2);  // c1
  EXPECT_EQ(a->leased_rows(), 3u);
  a->ReleaseRows(1);  // c2: the released ones are now most of the list
  EXPECT_EQ(a->leased_rows(), 2u);
  ASSERT_TRUE(Lease(a, t_, {6, 4}, &c4).ok());  // row 4 again: not a new lease
  EXPECT_EQ(a->leased_rows(), 3u);
  EXPECT_EQ(c4.deltas[1], c3.deltas[0]) << "a row leased again gets the same pointers";
  for (uint32_t k = 0; k < kWidth; ++k) c4.deltas[0][k] += 10;
  EXPECT_FALSE(leased(1));
  EXPECT_FALSE(leased(2));
  EXPECT_FALSE(leased(3));
  EXPECT_TRUE(leased(4));
  EXPECT_TRUE(leased(5));
  EXPECT_TRUE(leased(6));
  a->ReleaseRows(2);  // c3's rows, 4 and 5 (row 4 is c3's, not c4's)
  EXPECT_EQ(a->leased_rows(), 1u);
  EXPECT_FALSE(leased(4));
  EXPECT_FALSE(leased(5));
  EXPECT_TRUE(leased(6));
  a->ReleaseRows(1);
  EXPECT_EQ(a->leased_rows(), 0u);
  EXPECT_FALSE(leased(6));
  ASSERT_TRUE(a->Clock().ok());
  ASSERT_TRUE(b->Clock().ok());
  ASSERT_NO_FATAL_FAILURE(Reopen());
  // Each row: 10 through its lease and 1 from b's one Inc that was not
  // refused (the refused ones added nothing).
  for (uint64_t row = 1; row <= 6; ++row) {
    EXPECT_EQ(Get<int64_t>(w_[0].get(), row), std::vector<int64_t>(kWidth, 11)) << "row " << row;
  }
}

// Rows of a table this process created, never read, are leased without a
// Read: the lease initializes them as a Get would (rows_initialized).
TEST_F(LeaseTest, NewRowsOfATableTheProcessCreatedAreLeasedWithoutReads) {
  TableSchema schema = DenseSchema(ElementType::kF32);
  schema.init.kind = InitKind::kUniform;
  schema.init.a = -1;
  schema.init.b = 1;
  ASSERT_NO_FATAL_FAILURE(OpenEmbedded(schema, 1));
  Worker* a = w_[0].get();
  const std::vector<uint64_t> rows = RowRange(100, 50);
  Leased<float> l;
  ASSERT_TRUE(Lease(a, t_, rows, &l).ok());
  std::vector<std::vector<float>> initial(rows.size());
  for (size_t i = 0; i < rows.size(); ++i) {
    ASSERT_NE(l.values[i], nullptr) << rows[i];
    std::string bytes;
    InitRow(t_.schema(), rows[i], &bytes);
    ASSERT_EQ(bytes.size(), kWidth * sizeof(float));
    initial[i].assign(reinterpret_cast<const float*>(bytes.data()),
                      reinterpret_cast<const float*>(bytes.data()) + kWidth);
    EXPECT_EQ(std::vector<float>(l.values[i], l.values[i] + kWidth), initial[i]) << rows[i];
    for (uint32_t k = 0; k < kWidth; ++k) l.deltas[i][k] += 0.5f;
  }
  const TableStats ts = client_->Stats().tables.at(0);
  EXPECT_EQ(ts.rows_fetched, 0u);
  EXPECT_EQ(ts.rows_initialized, rows.size());
  ASSERT_TRUE(a->Clock().ok());
  ASSERT_NO_FATAL_FAILURE(Reopen());
  for (size_t i = 0; i < rows.size(); ++i) {
    std::vector<float> want(kWidth);
    for (uint32_t k = 0; k < kWidth; ++k) want[k] = initial[i][k] + 0.5f;
    EXPECT_EQ(Get<float>(w_[0].get(), rows[i]), want) << rows[i];
  }
}

// A row another worker leased comes back as nullptr (without waiting for the
// release); the call leases the other rows, and the row stays the other
// worker's.
TEST_F(LeaseTest, ARowAnotherWorkerLeasedComesBackAsNullptr) {
  ASSERT_NO_FATAL_FAILURE(OpenEmbedded(DenseSchema(ElementType::kI64), 2));
  Worker* a = w_[0].get();
  Worker* b = w_[1].get();
  Leased<int64_t> la, lb;
  ASSERT_TRUE(Lease(a, t_, {1, 2}, &la).ok());
  ASSERT_NE(la.deltas[1], nullptr);
  for (uint32_t k = 0; k < kWidth; ++k) la.deltas[1][k] += 7;
  auto lease = std::async(std::launch::async, [&] { return Lease(b, t_, {2, 3, 2}, &lb); });
  ASSERT_TRUE(Await(lease, [a] { a->ReleaseRows(); }).ok());
  EXPECT_EQ(lb.values[0], nullptr);
  EXPECT_EQ(lb.deltas[0], nullptr);
  EXPECT_EQ(lb.values[2], nullptr);
  EXPECT_EQ(lb.deltas[2], nullptr);
  ASSERT_NE(lb.values[1], nullptr);
  ASSERT_NE(lb.deltas[1], nullptr);
  for (uint32_t k = 0; k < kWidth; ++k) lb.deltas[1][k] += 4;
  const std::vector<int64_t> ones(kWidth, 1);
  EXPECT_EQ(b->Inc(t_, 2, ones.data()).code(), StatusCode::kFailedPrecondition);
  a->ReleaseRows();
  b->ReleaseRows();
  EXPECT_EQ(Get<int64_t>(a, 2), std::vector<int64_t>(kWidth, 7));
  EXPECT_EQ(Get<int64_t>(a, 3), std::vector<int64_t>(kWidth, 4));
  ASSERT_TRUE(a->Clock().ok());
  ASSERT_TRUE(b->Clock().ok());
  ASSERT_NO_FATAL_FAILURE(Reopen());
  EXPECT_EQ(Get<int64_t>(w_[0].get(), 1), std::vector<int64_t>(kWidth, 0));
  EXPECT_EQ(Get<int64_t>(w_[0].get(), 2), std::vector<int64_t>(kWidth, 7));
  EXPECT_EQ(Get<int64_t>(w_[0].get(), 3), std::vector<int64_t>(kWidth, 4));
}

// A worker ahead of the process clock cannot lease a row holding an update of
// an earlier clock not sent yet (any worker's); a row holding none it leases
// (the only two reasons for nullptr are another worker's lease and such an
// update); once the process clock passes that clock it leases them all.
TEST_F(LeaseTest, AWorkerAheadOfTheProcessClockLeasesNothing) {
  ASSERT_NO_FATAL_FAILURE(OpenEmbedded(DenseSchema(ElementType::kI64), 2));
  Worker* a = w_[0].get();
  Worker* b = w_[1].get();
  const std::vector<int64_t> ones(kWidth, 1), twos(kWidth, 2);
  ASSERT_TRUE(a->Inc(t_, 5, ones.data()).ok());
  ASSERT_TRUE(b->Inc(t_, 7, twos.data()).ok());
  ASSERT_TRUE(a->Clock().ok());  // a at clock 1, the process at 0: clock 0 not sent
  Leased<int64_t> l;
  ASSERT_TRUE(Lease(a, t_, {5, 6, 7}, &l).ok());
  for (size_t i = 0; i < 3; ++i) {
    EXPECT_EQ(l.values[i], nullptr) << i;
    EXPECT_EQ(l.deltas[i], nullptr) << i;
  }
  // The rows are a's to update as usual, and not leased: b updates one.
  ASSERT_TRUE(a->Inc(t_, 6, std::vector<int64_t>(kWidth, 3).data()).ok());
  ASSERT_TRUE(b->Inc(t_, 6, std::vector<int64_t>(kWidth, 0).data()).ok());
  a->ReleaseRows();
  ASSERT_TRUE(b->Clock().ok());  // the process clock reaches 1: clock 0 is sent
  ASSERT_TRUE(Lease(a, t_, {5, 7}, &l).ok());
  for (size_t i = 0; i < 2; ++i) {
    ASSERT_NE(l.values[i], nullptr) << i;
    ASSERT_NE(l.deltas[i], nullptr) << i;
    for (uint32_t k = 0; k < kWidth; ++k) {
      EXPECT_EQ(l.values[i][k] + l.deltas[i][k], static_cast<int64_t>(i + 1)) << i;
      l.deltas[i][k] += 10;
    }
  }
  a->ReleaseRows();
  ASSERT_TRUE(a->Clock().ok());
  ASSERT_TRUE(b->Clock().ok());
  ASSERT_NO_FATAL_FAILURE(Reopen());
  EXPECT_EQ(Get<int64_t>(w_[0].get(), 5), std::vector<int64_t>(kWidth, 11));
  EXPECT_EQ(Get<int64_t>(w_[0].get(), 6), std::vector<int64_t>(kWidth, 3));
  EXPECT_EQ(Get<int64_t>(w_[0].get(), 7), std::vector<int64_t>(kWidth, 12));
}

// Parts of a clock are sealed while rows are leased (small bounds): the
// leased rows' deltas, added before and after the parts, and updates of the
// same rows after the release, all reach the shard exactly once.
TEST_F(LeaseTest, LeasedDeltasReachTheShardExactlyWhenTheClockLeavesInParts) {
  ClientOptions o;
  o.open_delta_mb = 1;  // parts of 512 KiB
  o.unacked_mb = 64;
  constexpr uint32_t kW = 1024;  // 8 KiB rows: 64 to a part
  constexpr uint64_t kOthers = 256;
  ASSERT_NO_FATAL_FAILURE(OpenEmbedded(DenseSchema(ElementType::kI64, kW), 1, o));
  Worker* w = w_[0].get();
  const std::vector<uint64_t> leased = RowRange(0, 8);
  Leased<int64_t> l;
  ASSERT_TRUE(Lease(w, t_, leased, &l).ok());
  for (size_t i = 0; i < leased.size(); ++i) {
    ASSERT_NE(l.deltas[i], nullptr) << i;
    for (uint32_t k = 0; k < kW; ++k) l.deltas[i][k] += static_cast<int64_t>(1000 * (i + 1) + k);
  }
  for (uint64_t r = 100; r < 100 + kOthers; ++r) {
    const std::vector<int64_t> d(kW, static_cast<int64_t>(r % 7 + 1));
    ASSERT_TRUE(w->Inc(t_, r, d.data()).ok());
  }
  for (size_t i = 0; i < leased.size(); ++i) {
    for (uint32_t k = 0; k < kW; ++k) l.deltas[i][k] += 1;
  }
  w->ReleaseRows();
  const std::vector<int64_t> tens(kW, 10);
  for (uint64_t r : leased) ASSERT_TRUE(w->Inc(t_, r, tens.data()).ok());
  ASSERT_TRUE(w->Clock().ok());
  ASSERT_TRUE(client_->Flush().ok());
  // The worker waits in Inc while its clock's open deltas are at two parts:
  // a part was sealed before the release.
  EXPECT_GE(client_->Stats().batches_sent, 2u) << "clock 0 left whole: the test tests no parts";
  ASSERT_NO_FATAL_FAILURE(Reopen());
  for (size_t i = 0; i < leased.size(); ++i) {
    const std::vector<int64_t> x = Get<int64_t>(w_[0].get(), leased[i]);
    for (uint32_t k : {0u, 1u, kW - 1}) {
      EXPECT_EQ(x[k], static_cast<int64_t>(1000 * (i + 1) + k + 11)) << "row " << leased[i];
    }
  }
  for (uint64_t r = 100; r < 100 + kOthers; ++r) {
    const std::vector<int64_t> x = Get<int64_t>(w_[0].get(), r);
    EXPECT_EQ(x[0], static_cast<int64_t>(r % 7 + 1)) << "row " << r;
    EXPECT_EQ(x[kW - 1], static_cast<int64_t>(r % 7 + 1)) << "row " << r;
  }
}

// What the parts carry: a part sealed while rows are leased holds none of
// them; the clock's later parts carry their deltas, those added after the
// part too, exactly once.
TEST_F(LeaseTest, APartSealedWhileRowsAreLeasedLeavesThemForALaterPart) {
  ClientOptions o;
  o.open_delta_mb = 1;           // parts of 512 KiB
  o.unacked_mb = 64;             // parts need not wait for Acks
  constexpr uint32_t kW = 1024;  // 8 KiB rows: 64 to a part
  ASSERT_NO_FATAL_FAILURE(OpenScripted(o, DenseSchema(ElementType::kI64, kW), 1));
  StartSummingShard(kW);
  std::unique_ptr<Worker> w;
  ASSERT_TRUE(client_->RegisterWorker(&w).ok());
  const std::vector<uint64_t> leased = RowRange(0, 4);
  Leased<int64_t> l;
  ASSERT_TRUE(Lease(w.get(), t_, leased, &l).ok());
  for (size_t i = 0; i < leased.size(); ++i) {
    ASSERT_NE(l.deltas[i], nullptr) << i;
    for (uint32_t k = 0; k < kW; ++k) l.deltas[i][k] += static_cast<int64_t>(100 * (i + 1) + k);
  }
  const std::vector<int64_t> ones(kW, 1);
  const uint64_t others = 3 * Client::Impl::kOpenDeltaCheckEvery;  // three parts' worth
  for (uint64_t r = 1000; r < 1000 + others; ++r) ASSERT_TRUE(w->Inc(t_, r, ones.data()).ok());
  net::Apply first;
  ASSERT_TRUE(ch_->Next(&first)) << "no part sent while the rows were leased";
  const std::vector<net::Apply> sealed_while_leased = ch_->All<net::Apply>();
  for (const net::Apply& a : sealed_while_leased) {
    EXPECT_EQ(a.clock, 0);
    EXPECT_TRUE(a.more);
    EXPECT_FALSE(a.updates.empty());
    for (const net::DeltaRow& u : a.updates) {
      EXPECT_GE(u.row, 1000u) << "part " << a.part << " carries leased row " << u.row;
    }
  }
  for (size_t i = 0; i < leased.size(); ++i) {
    for (uint32_t k = 0; k < kW; ++k) {
      l.deltas[i][k] += 1;
      ASSERT_EQ(l.values[i][k] + l.deltas[i][k], static_cast<int64_t>(100 * (i + 1) + k + 1));
    }
  }
  w->ReleaseRows();
  ASSERT_TRUE(w->Clock().ok());
  auto flush = std::async(std::launch::async, [&] { return client_->Flush(); });
  ASSERT_TRUE(Await(flush, [this] { FailShard(); }).ok());
  std::lock_guard<std::mutex> lock(mu_);
  for (size_t i = 0; i < leased.size(); ++i) {
    ASSERT_EQ(stored_[leased[i]].size(), kW) << "row " << leased[i] << " never sent";
    for (uint32_t k : {0u, 1u, kW - 1}) {
      EXPECT_EQ(stored_[leased[i]][k], static_cast<int64_t>(100 * (i + 1) + k + 1))
          << "row " << leased[i];
    }
  }
  for (uint64_t r = 1000; r < 1000 + others; ++r) {
    ASSERT_EQ(stored_[r].size(), kW) << "row " << r;
    EXPECT_EQ(stored_[r][0], 1) << "row " << r;
    EXPECT_EQ(stored_[r][kW - 1], 1) << "row " << r;
  }
}

// Leased rows whose deltas alone pass two parts (which no part may carry
// before the release) do not hold their worker, in LeaseRows or Inc, waiting
// for a part to be sealed: it finishes the clock, and every delta reaches the
// shard.
TEST_F(LeaseTest, LeasedDeltasOverTwoPartsDoNotHoldTheWorker) {
  ClientOptions o;
  o.open_delta_mb = 1;  // parts of 512 KiB
  o.unacked_mb = 64;
  constexpr uint32_t kW = 1024;         // 8 KiB rows: 64 to a part
  constexpr uint64_t kLeased = 160;     // 1.25 MiB
  constexpr uint64_t kOthers = 3 * 64;  // 1.5 MiB
  ASSERT_NO_FATAL_FAILURE(OpenScripted(o, DenseSchema(ElementType::kI64, kW), 1));
  StartSummingShard(kW);
  std::unique_ptr<Worker> w;
  ASSERT_TRUE(client_->RegisterWorker(&w).ok());
  std::atomic<int> stage{0};  // where the worker is: for the message of a test that hangs
  const char* const kStages[] = {"LeaseRows", "Inc", "Clock"};
  auto job = std::async(std::launch::async, [&]() -> Status {
    Leased<int64_t> l;
    RETURN_IF_ERROR(Lease(w.get(), t_, RowRange(0, kLeased), &l));
    for (uint64_t i = 0; i < kLeased; ++i) {
      if (l.deltas[i] == nullptr) return Status::Internal("row not leased");
      for (uint32_t k = 0; k < kW; ++k) l.deltas[i][k] += 2;
    }
    stage.store(1);
    const std::vector<int64_t> ones(kW, 1);
    for (uint64_t r = 1000; r < 1000 + kOthers; ++r) RETURN_IF_ERROR(w->Inc(t_, r, ones.data()));
    w->ReleaseRows();
    stage.store(2);
    return w->Clock();
  });
  const Status s = Await(job, [&] {
    ADD_FAILURE() << "the worker waits in " << kStages[stage.load()];
    FailShard();
  });
  ASSERT_TRUE(s.ok()) << s.ToString();
  auto flush = std::async(std::launch::async, [&] { return client_->Flush(); });
  ASSERT_TRUE(Await(flush, [this] { FailShard(); }).ok());
  std::lock_guard<std::mutex> lock(mu_);
  for (uint64_t r = 0; r < kLeased; ++r) {
    ASSERT_EQ(stored_[r].size(), kW) << "row " << r;
    EXPECT_EQ(stored_[r][0], 2) << "row " << r;
    EXPECT_EQ(stored_[r][kW - 1], 2) << "row " << r;
  }
  for (uint64_t r = 1000; r < 1000 + kOthers; ++r) {
    ASSERT_EQ(stored_[r].size(), kW) << "row " << r;
    EXPECT_EQ(stored_[r][0], 1) << "row " << r;
  }
}

// A fresher value of a leased row (a push after the shard applied a clock)
// does not change the leased value; it is installed at the release, with the
// owner's delta on top.
TEST_F(LeaseTest, AValueArrivingForALeasedRowIsInstalledAtTheRelease) {
  ClientOptions o;
  o.num_clients = 2;  // client 1 adds to the row too
  ASSERT_NO_FATAL_FAILURE(
      OpenScripted(o, DenseSchema(ElementType::kI64, kWidth, Consistency::kEssp, 2), 3));
  std::unique_ptr<Worker> w, reader;
  ASSERT_TRUE(client_->RegisterWorker(&w).ok());
  ASSERT_TRUE(client_->RegisterWorker(&reader).ok());
  auto row = [](int64_t v) { return EncodeDense(std::vector<int64_t>(kWidth, v)); };
  // Clock 0: the row is read from the shard (5) and subscribed to.
  std::vector<int64_t> x(kWidth, -1);
  auto get = std::async(std::launch::async, [&] { return w->Get(t_, 0, x.data()); });
  net::Read read;
  ASSERT_TRUE(ch_->Next(&read));
  ch_->Deliver(net::ReadReply{read.req_id, 0, 0, {{t_.id(), 0, row(5)}}, 0});
  ASSERT_TRUE(Await(get, [this] { FailShard(); }).ok());
  ASSERT_EQ(x, std::vector<int64_t>(kWidth, 5));
  ASSERT_TRUE(w->Clock().ok());
  ASSERT_TRUE(reader->Clock().ok());
  net::Apply a0;
  ASSERT_TRUE(ch_->Next(&a0));
  ASSERT_EQ(a0.clock, 0);
  ch_->Deliver(net::Ack{0, false, 0});
  // Clock 1: leased from the cache (version 0 is fresh enough for s = 2).
  Leased<int64_t> l;
  ASSERT_TRUE(Lease(w.get(), t_, {0}, &l).ok());
  ASSERT_NE(l.values[0], nullptr);
  ASSERT_NE(l.deltas[0], nullptr);
  for (uint32_t k = 0; k < kWidth; ++k) {
    EXPECT_EQ(l.values[0][k], 5);
    l.deltas[0][k] += 2;
  }
  // The shard applied clock 0 of both clients (client 1 added 95).
  ch_->Deliver(net::Push{1, 1, {{t_.id(), 0, row(100)}}, 0});
  ch_->Deliver(net::PushDone{1, 1});
  for (uint32_t k = 0; k < kWidth; ++k) {
    EXPECT_EQ(l.values[0][k], 5) << "the value of a leased row changed";
  }
  EXPECT_EQ(Get<int64_t>(w.get(), 0), std::vector<int64_t>(kWidth, 7));  // the owner's read
  w->ReleaseRows();
  EXPECT_EQ(Get<int64_t>(reader.get(), 0), std::vector<int64_t>(kWidth, 102));
  EXPECT_EQ(Get<int64_t>(w.get(), 0), std::vector<int64_t>(kWidth, 102));
}

// Leased rows stay cached while many more rows than the cache holds stream
// through it: reading them again fetches nothing, the pointers still read
// value + delta, and the totals are exact.
TEST_F(LeaseTest, LeasedRowsAreNotEvicted) {
  ClientOptions o;
  o.cache_mb = 1;
  constexpr uint32_t kW = 512;  // 4 KiB rows: the cache holds ~250
  ASSERT_NO_FATAL_FAILURE(OpenEmbedded(DenseSchema(ElementType::kI64, kW), 1, o));
  Worker* w = w_[0].get();
  const std::vector<uint64_t> leased = RowRange(0, 8);
  for (uint64_t r : leased) {
    const std::vector<int64_t> d(kW, static_cast<int64_t>(r + 1));
    ASSERT_TRUE(w->Inc(t_, r, d.data()).ok());
  }
  ASSERT_TRUE(w->Clock().ok());
  Leased<int64_t> l;
  ASSERT_TRUE(Lease(w, t_, leased, &l).ok());
  for (size_t i = 0; i < leased.size(); ++i) {
    ASSERT_NE(l.values[i], nullptr) << i;
    ASSERT_NE(l.deltas[i], nullptr) << i;
    for (uint32_t k = 0; k < kW; ++k) l.deltas[i][k] += 10;
  }
  std::vector<int64_t> sink(100 * kW);
  for (uint64_t first = 1000; first < 3000; first += 100) {
    ASSERT_TRUE(w->GetRows(t_, RowRange(first, 100), sink.data()).ok());
  }
  auto misses = [&] {
    const TableStats ts = client_->Stats().tables.at(0);
    return ts.rows_fetched + ts.rows_initialized;
  };
  EXPECT_GT(client_->Stats().tables.at(0).evictions, 0u);
  const uint64_t before = misses();
  for (size_t i = 0; i < leased.size(); ++i) {
    const int64_t want = static_cast<int64_t>(leased[i] + 11);
    for (uint32_t k : {0u, kW - 1}) EXPECT_EQ(l.values[i][k] + l.deltas[i][k], want) << i;
    EXPECT_EQ(Get<int64_t>(w, leased[i]), std::vector<int64_t>(kW, want));
  }
  EXPECT_EQ(misses(), before) << "a leased row was evicted";
  for (size_t i = 0; i < leased.size(); ++i) {
    for (uint32_t k = 0; k < kW; ++k) l.deltas[i][k] += 100;
  }
  w->ReleaseRows();
  ASSERT_TRUE(w->Clock().ok());
  ASSERT_NO_FATAL_FAILURE(Reopen());
  for (uint64_t r : leased) {
    EXPECT_EQ(Get<int64_t>(w_[0].get(), r),
              std::vector<int64_t>(kW, static_cast<int64_t>(r + 111)));
  }
}

TEST_F(LeaseTest, SparseVapAndMistypedLeasesAreInvalidArguments) {
  ASSERT_NO_FATAL_FAILURE(OpenEmbedded(DenseSchema(ElementType::kF32), 1));
  Worker* w = w_[0].get();
  TableSchema sparse_schema;
  sparse_schema.name = "sparse";
  sparse_schema.kind = RowKind::kSparse;
  sparse_schema.type = ElementType::kF64;
  sparse_schema.width = 0;
  sparse_schema.consistency = Consistency::kSsp;
  sparse_schema.staleness = 1;
  TableSchema vap_schema = DenseSchema(ElementType::kF32);
  vap_schema.name = "vap";
  vap_schema.consistency = Consistency::kVap;
  vap_schema.value_bound = 4;
  Table sparse, vap;
  ASSERT_TRUE(client_->CreateTable(sparse_schema, &sparse).ok());
  ASSERT_TRUE(client_->CreateTable(vap_schema, &vap).ok());
  const std::vector<uint64_t> rows = {1, 2};
  Leased<float> f;
  Leased<double> d;
  Leased<int32_t> i;
  EXPECT_EQ(Lease(w, sparse, rows, &d).code(), StatusCode::kInvalidArgument) << "sparse";
  EXPECT_EQ(Lease(w, vap, rows, &f).code(), StatusCode::kInvalidArgument) << "vap";
  EXPECT_EQ(Lease(w, t_, rows, &d).code(), StatusCode::kInvalidArgument) << "f32 as f64";
  EXPECT_EQ(Lease(w, t_, rows, &i).code(), StatusCode::kInvalidArgument) << "f32 as i32";
  EXPECT_FALSE(Lease(w, Table(), rows, &f).ok()) << "no table";
  // The right type leases.
  ASSERT_TRUE(Lease(w, t_, rows, &f).ok());
  EXPECT_NE(f.values[0], nullptr);
  EXPECT_NE(f.deltas[1], nullptr);
  w->ReleaseRows();
  w->ReleaseRows();  // without leases: a no-op
}

}  // namespace
}  // namespace pace
