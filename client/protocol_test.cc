// The client's protocol behaviour against a scripted shard: exact messages,
// rebasing of server values on the process's own deltas, ESSP push versions,
// re-sending after a reconnect, timeouts, eviction unsubscribes.
#include <gtest/gtest.h>

#include <algorithm>
#include <future>
#include <map>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "client/client_impl.h"
#include "client/pace.h"
#include "client/scripted_channel_test_util.h"

namespace pace {
namespace {

using client::ScriptedChannel;

std::string I64(std::vector<int64_t> v) { return EncodeDense(v); }

class ProtocolTest : public ::testing::Test {
 protected:
  void Open(ClientOptions options = {}) {
    ASSERT_TRUE(client::OpenOnScriptedShard(options, &client_, &ch_).ok());
  }

  Table Create(const std::string& name, Consistency c, uint32_t s, uint32_t id,
               uint32_t width = 1) {
    TableSchema schema;
    schema.name = name;
    schema.type = ElementType::kI64;
    schema.width = width;
    schema.consistency = c;
    schema.staleness = s;
    Table t;
    EXPECT_TRUE(client::CreateTableOnScriptedShard(client_.get(), ch_, schema, id, &t).ok());
    return t;
  }

  // Starts a Get in another thread.
  std::future<Status> AsyncGet(Worker* w, const Table& t, uint64_t row, int64_t* out,
                               Version* version = nullptr) {
    return std::async(std::launch::async, [=] {
      return w->Read(t, row, [&](const RowView& v) {
        *out = v.dense<int64_t>()[0];
        if (version != nullptr) *version = v.version;
      });
    });
  }

  // True once table `index` has counted `n` blocked reads (within 10 s): a
  // Get started in another thread is then waiting in the client, not about
  // to start.
  bool WaitBlocked(size_t index, uint64_t n) {
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(10);
    while (client_->Stats().tables.at(index).reads_blocked < n) {
      if (std::chrono::steady_clock::now() > deadline) return false;
      std::this_thread::sleep_for(std::chrono::milliseconds(1));
    }
    return true;
  }

  // True once Unsubscribes for `n` rows of `table` have been sent (within
  // 10 s).
  bool WaitUnsubscribed(uint32_t table, uint64_t n) {
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(10);
    for (;;) {
      uint64_t rows = 0;
      for (const auto& u : ch_->All<net::Unsubscribe>()) {
        if (u.table == table) rows += u.rows.size();
      }
      if (rows >= n) return rows == n;
      if (std::chrono::steady_clock::now() > deadline) return false;
      std::this_thread::sleep_for(std::chrono::milliseconds(1));
    }
  }

  std::unique_ptr<Client> client_;
  ScriptedChannel* ch_ = nullptr;
};

TEST_F(ProtocolTest, ServerValuesAreRebasedOnOwnUnacknowledgedDeltas) {
  Open();
  Table t = Create("t", Consistency::kSsp, 5, 7);
  std::unique_ptr<Worker> w;
  ASSERT_TRUE(client_->RegisterWorker(&w).ok());
  int64_t one = 1, ten = 10, seven = 7, x = 0;
  ASSERT_TRUE(w->Inc(t, 1, &one).ok());
  ASSERT_TRUE(w->Clock().ok());  // Apply{0}: row 1 += 1
  net::Apply a0;
  ASSERT_TRUE(ch_->Next(&a0));
  EXPECT_EQ(a0.clock, 0);
  ASSERT_EQ(a0.updates.size(), 1u);
  EXPECT_EQ(a0.updates[0].bytes, I64({1}));
  ASSERT_TRUE(w->Inc(t, 1, &ten).ok());  // clock 1, open

  // A value from before batch 0 was applied (applied clock 0): both deltas are added.
  auto f = AsyncGet(w.get(), t, 1, &x);
  net::Read r;
  ASSERT_TRUE(ch_->Next(&r));
  EXPECT_EQ(r.min_version, 0);
  EXPECT_FALSE(r.subscribe);
  ch_->Deliver(net::ReadReply{r.req_id, 0, 0, {{7, 1, I64({100})}}});
  ASSERT_TRUE(f.get().ok());
  EXPECT_EQ(x, 111);

  ch_->Deliver(net::Ack{0, false});  // batch 0 durable: its delta leaves the oplog
  ASSERT_TRUE(w->Inc(t, 1, &seven).ok());
  ASSERT_TRUE(w->Get(t, 1, &x).ok());  // cache hit, read-my-writes
  EXPECT_EQ(x, 118);

  for (int i = 0; i < 5; ++i) ASSERT_TRUE(w->Clock().ok());  // worker at 6: needs v >= 1
  f = AsyncGet(w.get(), t, 1, &x);
  ASSERT_TRUE(ch_->Next(&r));
  EXPECT_EQ(r.min_version, 1);
  // A value claiming applied clock 0 after the Ack of batch 0 cannot be
  // rebased (that delta is purged): the client must ask again, not guess.
  ch_->Deliver(net::ReadReply{r.req_id, 1, 0, {{7, 1, I64({100})}}});
  net::Read again;
  ASSERT_TRUE(ch_->Next(&again));
  EXPECT_EQ(again.min_version, 1);
  // Applied clock 2: batches 0 and 1 are in; our clock-1 delta (17) is not
  // added twice, nothing else is pending.
  ch_->Deliver(net::ReadReply{again.req_id, 1, 2, {{7, 1, I64({1000 + 1 + 17})}}});
  ASSERT_TRUE(f.get().ok());
  EXPECT_EQ(x, 1018);
}

TEST_F(ProtocolTest, EveryProcessClockSendsOneBatchEvenIfEmpty) {
  Open();
  Table t = Create("t", Consistency::kSsp, 1, 3, 2);
  std::unique_ptr<Worker> a, b;
  ASSERT_TRUE(client_->RegisterWorker(&a).ok());
  ASSERT_TRUE(client_->RegisterWorker(&b).ok());
  int64_t d1[2] = {1, 2}, d2[2] = {10, 20};
  ASSERT_TRUE(a->Inc(t, 4, d1).ok());
  ASSERT_TRUE(a->Clock().ok());        // a at 1, b at 0: process clock stays 0
  ASSERT_TRUE(a->Inc(t, 4, d1).ok());  // a clock-1 update
  ASSERT_TRUE(b->Inc(t, 4, d2).ok());  // b clock-0 update
  EXPECT_TRUE(ch_->All<net::Apply>().empty());
  ASSERT_TRUE(b->Clock().ok());  // process clock 1: batch 0 = a's + b's clock-0 deltas
  net::Apply ap;
  ASSERT_TRUE(ch_->Next(&ap));
  EXPECT_EQ(ap.clock, 0);
  ASSERT_EQ(ap.updates.size(), 1u);
  EXPECT_EQ(ap.updates[0].bytes, I64({11, 22}));
  ASSERT_TRUE(a->Clock().ok());
  ASSERT_TRUE(b->Clock().ok());  // batch 1: a's second delta only
  ASSERT_TRUE(ch_->Next(&ap));
  EXPECT_EQ(ap.clock, 1);
  ASSERT_EQ(ap.updates.size(), 1u);
  EXPECT_EQ(ap.updates[0].bytes, I64({1, 2}));
  ASSERT_TRUE(a->Clock().ok());
  ASSERT_TRUE(b->Clock().ok());  // batch 2: empty but sent
  ASSERT_TRUE(ch_->Next(&ap));
  EXPECT_EQ(ap.clock, 2);
  EXPECT_TRUE(ap.updates.empty());
  b.reset();  // deregistering the slowest worker advances the process clock
  ASSERT_TRUE(a->Clock().ok());
  ASSERT_TRUE(ch_->Next(&ap));
  EXPECT_EQ(ap.clock, 3);
  EXPECT_EQ(client_->Stats().batches_sent, 4u);
}

// vap: a worker may not start its next clock while its process's
// unacknowledged updates to a row exceed v; the shard's Acks release it, and
// only once the rows are back within v.
TEST_F(ProtocolTest, VapClockWaitsForTheAcksThatBringARowWithinTheBound) {
  Open();
  TableSchema schema;
  schema.name = "v";
  schema.type = ElementType::kI64;
  schema.consistency = Consistency::kVap;
  schema.value_bound = 4;
  Table t;
  ASSERT_TRUE(client::CreateTableOnScriptedShard(client_.get(), ch_, schema, 3, &t).ok());
  std::unique_ptr<Worker> w;
  ASSERT_TRUE(client_->RegisterWorker(&w).ok());
  int64_t small = -3, big = 5;
  ASSERT_TRUE(w->Inc(t, 7, &small).ok());
  ASSERT_TRUE(w->Clock().ok());  // |-3| <= 4 in flight: no wait
  ASSERT_TRUE(w->Inc(t, 7, &big).ok());
  auto clock = std::async(std::launch::async, [&] { return w->Clock(); });
  // 3 + 5 in flight on row 7.
  EXPECT_EQ(clock.wait_for(std::chrono::milliseconds(100)), std::future_status::timeout);
  ch_->Deliver(net::Ack{0, false});  // 5 left: still over 4
  EXPECT_EQ(clock.wait_for(std::chrono::milliseconds(100)), std::future_status::timeout);
  ch_->Deliver(net::Ack{1, false});
  ASSERT_EQ(clock.wait_for(std::chrono::seconds(5)), std::future_status::ready);
  EXPECT_TRUE(clock.get().ok());
  EXPECT_EQ(w->clock(), 2);
  EXPECT_GT(client_->Stats().clock_blocked_seconds, 0.05);
  // Another table's updates never wait for the bound.
  Table e = Create("e", Consistency::kEssp, 1, 4);
  int64_t huge = 1000;
  ASSERT_TRUE(w->Inc(e, 1, &huge).ok());
  ASSERT_TRUE(w->Clock().ok());
}

// A worker that started a clock later than another leaves last-but-one: the
// other, still at the older clock, leaves after it without doing anything
// there. The clock the first finished is complete and its batch is sent (it
// used to stay open for ever: the deltas were never sent, yet every read of
// this process saw them).
TEST_F(ProtocolTest, TheLastWorkerToLeaveSendsTheClocksTheOthersFinished) {
  Open();
  Table t = Create("t", Consistency::kSsp, 1, 3, 2);
  std::unique_ptr<Worker> a, b;
  ASSERT_TRUE(client_->RegisterWorker(&a).ok());
  ASSERT_TRUE(a->Clock().ok());  // a at 1, alone: batch 0
  ASSERT_TRUE(client_->RegisterWorker(&b).ok());
  EXPECT_EQ(b->clock(), 1);
  int64_t d[2] = {1, 2};
  ASSERT_TRUE(a->Inc(t, 4, d).ok());
  ASSERT_TRUE(b->Inc(t, 5, d).ok());
  ASSERT_TRUE(a->Clock().ok());
  ASSERT_TRUE(b->Clock().ok());  // both at 2: batch 1
  ASSERT_TRUE(b->Inc(t, 5, d).ok());
  ASSERT_TRUE(b->Clock().ok());  // b finished clock 2, a (at 2) did nothing there
  b.reset();
  a.reset();  // the last worker leaves at 2: clock 2 is complete
  std::vector<net::Apply> sent = ch_->All<net::Apply>();
  ASSERT_EQ(sent.size(), 3u);
  EXPECT_EQ(sent[2].clock, 2);
  ASSERT_EQ(sent[2].updates.size(), 1u);
  EXPECT_EQ(sent[2].updates[0].row, 5u);
  EXPECT_EQ(sent[2].updates[0].bytes, I64({1, 2}));
  EXPECT_EQ(client_->Stats().open_delta_bytes, 0u);
  // A worker registered now starts at the process clock, 3.
  std::unique_ptr<Worker> c;
  ASSERT_TRUE(client_->RegisterWorker(&c).ok());
  EXPECT_EQ(c->clock(), 3);
}

TEST_F(ProtocolTest, EsspSubscribesOnceAndPushDoneRefreshesVersions) {
  Open();
  Table t = Create("e", Consistency::kEssp, 1, 2);
  std::unique_ptr<Worker> w;
  ASSERT_TRUE(client_->RegisterWorker(&w).ok());
  int64_t x = 0;
  Version v = -1;
  auto f = AsyncGet(w.get(), t, 9, &x, &v);
  net::Read r;
  ASSERT_TRUE(ch_->Next(&r));
  EXPECT_TRUE(r.subscribe);
  ch_->Deliver(net::ReadReply{r.req_id, 0, 0, {{2, 9, I64({5})}}});
  ASSERT_TRUE(f.get().ok());
  EXPECT_EQ(x, 5);
  ASSERT_TRUE(w->Clock().ok());
  ASSERT_TRUE(w->Clock().ok());  // worker at 2 needs v >= 1: waits for a push
  f = AsyncGet(w.get(), t, 9, &x, &v);
  ASSERT_TRUE(WaitBlocked(0, 2));
  ch_->Deliver(net::PushDone{1, 1});  // row unchanged, current as of 1
  ASSERT_TRUE(f.get().ok());
  EXPECT_EQ(x, 5);
  EXPECT_EQ(v, 1);
  ch_->Deliver(net::Push{2, 2, {{2, 9, I64({6})}}});
  ch_->Deliver(net::PushDone{2, 2});
  ASSERT_TRUE(w->Read(t, 9, [&](const RowView& rv) {
                 x = rv.dense<int64_t>()[0];
                 v = rv.version;
               }).ok());
  EXPECT_EQ(x, 6);
  EXPECT_EQ(v, 2);
  EXPECT_EQ(ch_->All<net::Read>().size(), 1u);  // pushes, not pulls
  ClientStats s = client_->Stats();
  EXPECT_EQ(s.tables[0].pushes_applied, 1u);
  EXPECT_EQ(s.tables[0].reads, 3u);
  EXPECT_EQ(s.tables[0].reads_blocked, 2u);
  EXPECT_EQ(s.tables[0].staleness_hist, (std::vector<uint64_t>{2, 1, 0}));
}

TEST_F(ProtocolTest, PrefetchBatchesMissesIntoOneReadAndNeverBlocks) {
  Open();
  Table t = Create("p", Consistency::kSsp, 1, 3);
  std::unique_ptr<Worker> w;
  ASSERT_TRUE(client_->RegisterWorker(&w).ok());
  // Row 1 is cached (fresh) first; Prefetch must skip it.
  int64_t x = 0;
  auto f = AsyncGet(w.get(), t, 1, &x);
  net::Read first;
  ASSERT_TRUE(ch_->Next(&first));
  ch_->Deliver(net::ReadReply{first.req_id, 0, 0, {{3, 1, I64({10})}}});
  ASSERT_TRUE(f.get().ok());

  // Returns at once with nothing answered, sending one Read for the misses
  // (duplicates collapsed).
  ASSERT_TRUE(w->Prefetch(t, {1, 2, 3, 2, 4}).ok());
  net::Read r;
  ASSERT_TRUE(ch_->Next(&r));
  EXPECT_EQ(r.rows, (std::vector<uint64_t>{2, 3, 4}));
  EXPECT_EQ(r.min_version, 0);  // clock 0, s = 1
  EXPECT_FALSE(r.subscribe);
  // Prefetching again while those are in flight sends nothing.
  ASSERT_TRUE(w->Prefetch(t, {2, 3, 4}).ok());
  // A Get of a prefetched row waits for that Read instead of sending its own.
  f = AsyncGet(w.get(), t, 3, &x);
  ASSERT_TRUE(WaitBlocked(0, 2));
  ch_->Deliver(
      net::ReadReply{r.req_id, 0, 0, {{3, 2, I64({20})}, {3, 3, I64({30})}, {3, 4, I64({40})}}});
  ASSERT_TRUE(f.get().ok());
  EXPECT_EQ(x, 30);
  for (uint64_t row : {2, 4}) {
    ASSERT_TRUE(w->Read(t, row, [&](const RowView& v) { x = v.dense<int64_t>()[0]; }).ok());
    EXPECT_EQ(x, static_cast<int64_t>(row) * 10);
  }
  EXPECT_EQ(ch_->All<net::Read>().size(), 2u);
  ClientStats s = client_->Stats();
  EXPECT_EQ(s.tables[0].rows_fetched, 4u);  // row 1's Get + three prefetched

  // Under ssp, rows that became too stale are prefetched again with the
  // worker's current bound: at clock 3 (s = 1) that is version 2.
  ASSERT_TRUE(w->Clock().ok());
  ASSERT_TRUE(w->Clock().ok());
  ASSERT_TRUE(w->Clock().ok());
  ch_->SkipAll();
  ASSERT_TRUE(w->Prefetch(t, {2}).ok());
  ASSERT_TRUE(ch_->Next(&r));
  EXPECT_EQ(r.rows, (std::vector<uint64_t>{2}));
  EXPECT_EQ(r.min_version, 2);
}

// Sparse rows have no known size: their prefetches are cut into Reads of a
// few rows each, so one reply cannot grow without bound.
TEST_F(ProtocolTest, SparsePrefetchesAreCutIntoSmallReads) {
  Open();
  TableSchema schema;
  schema.name = "sp";
  schema.kind = RowKind::kSparse;
  schema.type = ElementType::kF32;
  schema.width = 0;
  schema.consistency = Consistency::kSsp;
  schema.staleness = 1;
  Table t;
  ASSERT_TRUE(client::CreateTableOnScriptedShard(client_.get(), ch_, schema, 5, &t).ok());
  std::unique_ptr<Worker> w;
  ASSERT_TRUE(client_->RegisterWorker(&w).ok());
  std::vector<uint64_t> rows(100);
  for (uint64_t r = 0; r < rows.size(); ++r) rows[r] = r;
  ASSERT_TRUE(w->Prefetch(t, rows).ok());
  std::vector<net::Read> reads = ch_->All<net::Read>();
  ASSERT_EQ(reads.size(), 2u);
  EXPECT_EQ(reads[0].rows.size(), 64u);
  EXPECT_EQ(reads[1].rows.size(), 36u);
}

TEST_F(ProtocolTest, PrefetchSubscribesUnderEsspAndSkipsSubscribedRows) {
  Open();
  Table t = Create("q", Consistency::kEssp, 1, 4);
  std::unique_ptr<Worker> w;
  ASSERT_TRUE(client_->RegisterWorker(&w).ok());
  ASSERT_TRUE(w->Prefetch(t, {7, 8}).ok());
  net::Read r;
  ASSERT_TRUE(ch_->Next(&r));
  EXPECT_TRUE(r.subscribe);
  ch_->Deliver(net::ReadReply{r.req_id, 0, 0, {{4, 7, I64({1})}, {4, 8, I64({2})}}});
  // Wait until the reply is installed (a Get then hits).
  int64_t x = 0;
  ASSERT_TRUE(w->Read(t, 8, [&](const RowView& v) { x = v.dense<int64_t>()[0]; }).ok());
  EXPECT_EQ(x, 2);
  // Several clocks later the rows are stale, but pushes refresh subscribed
  // rows: no Read is sent.
  ASSERT_TRUE(w->Clock().ok());
  ASSERT_TRUE(w->Clock().ok());
  ASSERT_TRUE(w->Clock().ok());
  ASSERT_TRUE(w->Prefetch(t, {7, 8}).ok());
  EXPECT_EQ(ch_->All<net::Read>().size(), 1u);
}

TEST_F(ProtocolTest, ReconnectResendsBatchesReadsAndSubscriptions) {
  Open();
  Table t = Create("s", Consistency::kSsp, 0, 4);
  Table e = Create("e", Consistency::kEssp, 2, 5);
  std::unique_ptr<Worker> w;
  ASSERT_TRUE(client_->RegisterWorker(&w).ok());
  int64_t x = 0, one = 1;
  auto f = AsyncGet(w.get(), e, 3, &x);  // subscribe row e/3
  net::Read r;
  ASSERT_TRUE(ch_->Next(&r));
  ch_->Deliver(net::ReadReply{r.req_id, 0, 0, {{5, 3, I64({0})}}});
  ASSERT_TRUE(f.get().ok());
  ASSERT_TRUE(w->Inc(t, 1, &one).ok());
  ASSERT_TRUE(w->Clock().ok());
  ASSERT_TRUE(w->Inc(t, 2, &one).ok());
  ASSERT_TRUE(w->Clock().ok());
  ch_->Deliver(net::Ack{0, false});
  f = AsyncGet(w.get(), t, 8, &x);  // a Read in flight (bsp: min_version 2)
  net::Read pending;
  ASSERT_TRUE(ch_->Next(&pending));
  EXPECT_EQ(pending.min_version, 2);
  ch_->SkipAll();

  ch_->listener()->OnDisconnect(0, Status::Unavailable("test"));
  net::Welcome w2;
  w2.num_shards = 1;
  w2.applied_clock = 1;
  ch_->listener()->OnReconnect(0, w2);
  net::Apply resent;
  ASSERT_TRUE(ch_->Next(&resent));
  EXPECT_EQ(resent.clock, 1);  // batch 0 was acked; batch 1 was not
  ASSERT_EQ(resent.updates.size(), 1u);
  EXPECT_EQ(resent.updates[0].row, 2u);
  std::vector<net::Read> reads = ch_->All<net::Read>();
  ASSERT_GE(reads.size(), 2u);
  bool reissued = false, resubscribed = false;
  for (const net::Read& rd : reads) {
    if (rd.req_id == pending.req_id && rd.rows == pending.rows) reissued = true;
    if (rd.table == 5 && rd.rows == std::vector<uint64_t>{3} && rd.subscribe) resubscribed = true;
  }
  EXPECT_TRUE(reissued);
  EXPECT_TRUE(resubscribed);
  EXPECT_EQ(client_->Stats().batches_resent, 1u);
  ch_->Deliver(net::ReadReply{pending.req_id, 2, 2, {{4, 8, I64({42})}}});
  ASSERT_TRUE(f.get().ok());
  EXPECT_EQ(x, 42);
}

// After a reconnect the subscribed rows are subscribed again with one Read
// per table, not one per row (one per row was, in the 10-minute soak, 4,000
// requests in flight and 4,000 replies after every reconnect: ~1 MB of small
// allocations at once, which fragmented the client's heap).
TEST_F(ProtocolTest, ReconnectResubscribesEachTableWithOneRead) {
  Open();
  Table a = Create("a", Consistency::kEssp, 1, 5);
  Table b = Create("b", Consistency::kAsync, 0, 6);
  std::unique_ptr<Worker> w;
  ASSERT_TRUE(client_->RegisterWorker(&w).ok());
  std::vector<uint64_t> rows_a, rows_b;
  for (uint64_t r = 0; r < 300; ++r) rows_a.push_back(r);
  for (uint64_t r = 1000; r < 1100; ++r) rows_b.push_back(r);
  ASSERT_TRUE(w->Prefetch(a, rows_a).ok());
  ASSERT_TRUE(w->Prefetch(b, rows_b).ok());
  for (int i = 0; i < 2; ++i) {
    net::Read r;
    ASSERT_TRUE(ch_->Next(&r));
    ASSERT_TRUE(r.subscribe);
    net::ReadReply reply{r.req_id, 0, 0, {}};
    for (uint64_t row : r.rows) reply.rows.push_back({r.table, row, I64({7})});
    ch_->Deliver(std::move(reply));
  }
  ch_->SkipAll();

  ch_->listener()->OnDisconnect(0, Status::Unavailable("test"));
  net::Welcome w2;
  w2.num_shards = 1;
  ch_->listener()->OnReconnect(0, w2);
  std::vector<net::Read> reads = ch_->All<net::Read>();
  reads.erase(reads.begin(), reads.begin() + 2);  // the Prefetches
  ASSERT_EQ(reads.size(), 2u) << "one re-subscribing Read per table";
  std::map<uint32_t, std::vector<uint64_t>> again;
  for (const net::Read& r : reads) {
    EXPECT_TRUE(r.subscribe);
    EXPECT_EQ(r.min_version, 0);
    std::vector<uint64_t>& rows = again[r.table];
    rows.insert(rows.end(), r.rows.begin(), r.rows.end());
  }
  for (auto& [table, rows] : again) std::sort(rows.begin(), rows.end());
  EXPECT_EQ(again[5], rows_a);
  EXPECT_EQ(again[6], rows_b);
  // Answered, every row is subscribed again: once the rows are stale, a
  // Prefetch sends nothing (pushes refresh them) and a PushDone makes them
  // current.
  for (const net::Read& r : reads) {
    net::ReadReply reply{r.req_id, 0, 0, {}};
    for (uint64_t row : r.rows) reply.rows.push_back({r.table, row, I64({8})});
    ch_->Deliver(std::move(reply));
  }
  for (int c = 0; c < 3; ++c) ASSERT_TRUE(w->Clock().ok());
  ASSERT_TRUE(w->Prefetch(a, rows_a).ok());
  ASSERT_TRUE(w->Prefetch(b, rows_b).ok());
  EXPECT_EQ(ch_->All<net::Read>().size(), 4u);
  ch_->Deliver(net::PushDone{3, 3});
  int64_t x = 0;
  Version v = 0;
  ASSERT_TRUE(w->Read(a, 299, [&](const RowView& view) {
                 x = view.dense<int64_t>()[0];
                 v = view.version;
               }).ok());
  EXPECT_EQ(x, 8);
  EXPECT_EQ(v, 3);
}

// Fencing (docs/wire-protocol.md, Ack): a duplicate Ack for a batch this
// process sent once means another process applied it as this client: fatal,
// never a silent drop.
TEST_F(ProtocolTest, DuplicateAckForABatchSentOnceIsFatal) {
  Open();
  Table t = Create("s", Consistency::kSsp, 0, 4);
  std::unique_ptr<Worker> w;
  ASSERT_TRUE(client_->RegisterWorker(&w).ok());
  int64_t one = 1;
  ASSERT_TRUE(w->Inc(t, 1, &one).ok());
  ASSERT_TRUE(w->Clock().ok());
  net::Apply sent;
  ASSERT_TRUE(ch_->Next(&sent));
  EXPECT_EQ(sent.clock, 0);
  ch_->Deliver(net::Ack{0, true});
  Status s = client_->Flush();
  EXPECT_EQ(s.code(), StatusCode::kFailedPrecondition) << s.ToString();
  EXPECT_NE(s.message().find("another process is client 0"), std::string::npos) << s.ToString();
  EXPECT_NE(s.message().find("resumed twice"), std::string::npos) << s.ToString();
}

TEST_F(ProtocolTest, DuplicateAckForAResentBatchIsExpected) {
  Open();
  Table t = Create("s", Consistency::kSsp, 0, 4);
  std::unique_ptr<Worker> w;
  ASSERT_TRUE(client_->RegisterWorker(&w).ok());
  int64_t one = 1;
  ASSERT_TRUE(w->Inc(t, 1, &one).ok());
  ASSERT_TRUE(w->Clock().ok());
  net::Apply first;
  ASSERT_TRUE(ch_->Next(&first));
  ch_->listener()->OnDisconnect(0, Status::Unavailable("test"));
  net::Welcome w2;
  w2.num_shards = 1;
  w2.applied_clock = 1;  // batch 0 was applied, its Ack lost
  ch_->listener()->OnReconnect(0, w2);
  net::Apply resent;
  ASSERT_TRUE(ch_->Next(&resent));
  EXPECT_EQ(resent.clock, 0);
  ch_->Deliver(net::Ack{0, true});
  EXPECT_TRUE(client_->Flush().ok());
  // The next batch was sent once, after the reconnect: a duplicate is fatal.
  ASSERT_TRUE(w->Clock().ok());
  net::Apply next;
  ASSERT_TRUE(ch_->Next(&next));
  EXPECT_EQ(next.clock, 1);
  ch_->Deliver(net::Ack{1, true});
  EXPECT_EQ(client_->Flush().code(), StatusCode::kFailedPrecondition);
}

TEST_F(ProtocolTest, ShardAwayTooLongMakesCallsUnavailable) {
  ClientOptions o;
  o.shard_timeout_ms = 100;
  Open(o);
  Table t = Create("t", Consistency::kSsp, 0, 1);
  std::unique_ptr<Worker> w;
  ASSERT_TRUE(client_->RegisterWorker(&w).ok());
  int64_t x = 0, one = 1;
  ASSERT_TRUE(w->Inc(t, 1, &one).ok());
  ASSERT_TRUE(w->Clock().ok());
  ch_->listener()->OnDisconnect(0, Status::Unavailable("test"));
  auto start = std::chrono::steady_clock::now();
  Status s = w->Get(t, 5, &x);
  EXPECT_EQ(s.code(), StatusCode::kUnavailable) << s.ToString();
  EXPECT_NE(s.message().find("unreachable"), std::string::npos) << s.ToString();
  EXPECT_LT(std::chrono::steady_clock::now() - start, std::chrono::seconds(3));
  EXPECT_EQ(w->Clock().code(), StatusCode::kUnavailable);
  EXPECT_EQ(client_->Flush().code(), StatusCode::kUnavailable);  // batch 0 unacked
}

TEST_F(ProtocolTest, EvictingSubscribedRowsUnsubscribes) {
  ClientOptions o;
  o.cache_mb = 1;  // 16 KiB per stripe: a few 4 KiB rows each
  Open(o);
  Table t = Create("e", Consistency::kEssp, 0, 6, 512);
  ch_->StartAuto([](uint32_t, uint64_t) { return I64(std::vector<int64_t>(512, 3)); }, 0);
  std::unique_ptr<Worker> w;
  ASSERT_TRUE(client_->RegisterWorker(&w).ok());
  std::vector<int64_t> row(512);
  for (uint64_t r = 0; r < 1000; ++r) {
    ASSERT_TRUE(w->Get(t, r, row.data()).ok());
    ASSERT_EQ(row[511], 3);
  }
  ClientStats s = client_->Stats();
  EXPECT_GT(s.tables[0].evictions, 500u);
  EXPECT_LE(s.cache_bytes, (size_t{1} << 20) + 64 * (4096 + client::kEntryOverheadBytes));
  // Unsubscribes are queued and leave after the reply that evicted them has
  // been installed: wait for the last ones.
  EXPECT_TRUE(WaitUnsubscribed(6, s.tables[0].evictions));
  for (const auto& u : ch_->All<net::Unsubscribe>()) EXPECT_EQ(u.table, 6u);
}

TEST_F(ProtocolTest, UnsubscribesAreBatchedAndNeverOvertakeAResubscribingRead) {
  ClientOptions o;
  o.cache_mb = 1;  // 16 KiB per stripe: a few 4 KiB rows each
  Open(o);
  Table t = Create("e", Consistency::kEssp, 0, 6, 512);
  std::unique_ptr<Worker> w;
  ASSERT_TRUE(client_->RegisterWorker(&w).ok());
  constexpr uint64_t kRows = 300;
  std::vector<uint64_t> rows(kRows);
  for (uint64_t r = 0; r < kRows; ++r) rows[r] = r;
  // One Read for all rows: installing its reply evicts a third of them again
  // (the stripes hold about three rows each), and their Unsubscribes leave
  // as one message, not one per row or per stripe.
  ASSERT_TRUE(w->Prefetch(t, rows).ok());
  net::Read first;
  ASSERT_TRUE(ch_->Next(&first));
  ASSERT_EQ(first.rows.size(), kRows);
  net::ReadReply reply{first.req_id, 0, 0, {}};
  for (uint64_t r : first.rows) reply.rows.push_back({6, r, I64(std::vector<int64_t>(512, 3))});
  ch_->Deliver(std::move(reply));  // installed (and unsubscribed) when it returns
  std::vector<net::Unsubscribe> unsubs = ch_->All<net::Unsubscribe>();
  size_t unsub_rows = 0;
  for (const auto& u : unsubs) unsub_rows += u.rows.size();
  EXPECT_EQ(unsub_rows, client_->Stats().tables[0].evictions);
  EXPECT_GT(unsub_rows, kRows / 4);
  EXPECT_EQ(unsubs.size(), 1u);

  ch_->StartAuto([](uint32_t, uint64_t) { return I64(std::vector<int64_t>(512, 3)); }, 0);
  std::vector<int64_t> row(512);
  // Then every row is read twice: evicted ones are fetched (and subscribed)
  // again, one Read each, and evicted again.
  for (int pass = 0; pass < 2; ++pass) {
    for (uint64_t r = 0; r < kRows; ++r) {
      ASSERT_TRUE(w->Get(t, r, row.data()).ok());
      ASSERT_EQ(row[511], 3);
    }
  }
  const uint64_t evictions = client_->Stats().tables[0].evictions;
  EXPECT_GT(evictions, kRows);
  ASSERT_TRUE(WaitUnsubscribed(6, evictions));

  std::vector<net::Message> log = ch_->AllMessages();
  // Per row, the shard sees subscribe, unsubscribe, subscribe, ... in this
  // order: an Unsubscribe that overtook a later subscribing Read of its row
  // would leave the shard not pushing a row the client believes pushed.
  std::vector<int> subscribed(kRows, 0);
  for (const net::Message& m : log) {
    if (const auto* r = std::get_if<net::Read>(&m)) {
      ASSERT_TRUE(r->subscribe);
      for (uint64_t x : r->rows) {
        EXPECT_EQ(subscribed[x], 0) << "row " << x << " subscribed twice";
        subscribed[x] = 1;
      }
    } else if (const auto* u = std::get_if<net::Unsubscribe>(&m)) {
      for (uint64_t x : u->rows) {
        EXPECT_EQ(subscribed[x], 1) << "row " << x << " unsubscribed while not subscribed";
        subscribed[x] = 0;
      }
    }
  }
}

}  // namespace
}  // namespace pace
