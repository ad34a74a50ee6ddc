// The client's read path under shard trouble, against scripted shards: no
// read is stranded by an unhealthy shard, a shard's transient (retriable)
// errors are retried with backoff and counted, and errors that cannot succeed
// by asking again fail at once with the shard's message. Every blocking call
// runs with a deadline (Await), so a regression fails instead of hanging.
#include <gtest/gtest.h>

#include <chrono>
#include <future>
#include <map>
#include <memory>
#include <mutex>
#include <numeric>
#include <string>
#include <thread>
#include <vector>

#include "client/client_impl.h"
#include "client/pace.h"
#include "client/scripted_channel_test_util.h"
#include "common/hash.h"

namespace pace {
namespace {

using client::ScriptedChannel;

std::string I64(int64_t v) { return EncodeDense(std::vector<int64_t>{v}); }

class ReadErrorsTest : public ::testing::Test {
 protected:
  void Open(uint32_t num_shards, ClientOptions options = {}) {
    std::vector<std::unique_ptr<client::ShardChannel>> chans;
    for (uint32_t k = 0; k < num_shards; ++k) {
      net::Welcome w;
      w.shard_id = k;
      w.num_shards = num_shards;
      w.num_clients = options.num_clients;
      auto ch = std::make_unique<ScriptedChannel>(k, w);
      chs_.push_back(ch.get());
      chans.push_back(std::move(ch));
    }
    ASSERT_TRUE(Client::Impl::Create(options, std::move(chans), false, &client_).ok());
  }

  // Creates an i64 table of width 1, every scripted shard answering.
  Table Create(const std::string& name, Consistency c, uint32_t s, uint32_t id) {
    TableSchema schema;
    schema.name = name;
    schema.type = ElementType::kI64;
    schema.width = 1;
    schema.consistency = c;
    schema.staleness = s;
    Table t;
    auto f = std::async(std::launch::async, [&] { return client_->CreateTable(schema, &t); });
    for (ScriptedChannel* ch : chs_) {
      net::CreateTable req;
      EXPECT_TRUE(ch->Next(&req));
      TableSchema created = req.schema;
      created.id = id;
      ch->Deliver(net::TablesReply{req.req_id, {created}});
    }
    EXPECT_TRUE(Await(f).ok());
    return t;
  }

  // f's result; if it is not ready within 10 s, a test failure, and every
  // shard is failed so that the blocked call returns instead of hanging.
  Status Await(std::future<Status>& f) {
    if (f.wait_for(std::chrono::seconds(10)) != std::future_status::ready) {
      ADD_FAILURE() << "call still blocked after 10 s";
      for (ScriptedChannel* ch : chs_) {
        ch->Deliver(net::Error{0, StatusCode::kInternal, "test deadline"});
      }
    }
    return f.get();
  }

  std::unique_ptr<Client> client_;
  std::vector<ScriptedChannel*> chs_;  // by shard id, owned by client_
};

// Regression: a Prefetch that met an unhealthy shard used to return
// with the healthy shards' rows marked in flight but never sent, so a later
// Get of those rows waited forever.
TEST_F(ReadErrorsTest, PrefetchSendsTheHealthyShardsReadsAndReportsTheUnhealthyOne) {
  ClientOptions o;
  o.shard_timeout_ms = 1;
  Open(2, o);
  Table t = Create("t", Consistency::kSsp, 0, 7);
  std::unique_ptr<Worker> w;
  ASSERT_TRUE(client_->RegisterWorker(&w).ok());
  std::vector<uint64_t> on[2];
  for (uint64_t r = 0; on[0].size() < 3 || on[1].size() < 2; ++r) on[ShardOf(7, r, 2)].push_back(r);

  chs_[1]->listener()->OnDisconnect(1, Status::Unavailable("test: shard 1 went away"));
  std::this_thread::sleep_for(std::chrono::milliseconds(5));  // > shard_timeout_ms
  // The unhealthy shard's rows come between healthy ones.
  Status s = w->Prefetch(t, {on[0][0], on[0][1], on[1][0], on[0][2], on[1][1]});
  EXPECT_EQ(s.code(), StatusCode::kUnavailable) << s.ToString();
  EXPECT_NE(s.message().find("scripted shard 1 unreachable"), std::string::npos) << s.ToString();
  net::Read r;
  ASSERT_TRUE(chs_[0]->Next(&r));
  EXPECT_EQ(r.rows, (std::vector<uint64_t>{on[0][0], on[0][1], on[0][2]}));
  EXPECT_TRUE(chs_[1]->All<net::Read>().empty());

  // A Get of a prefetched row of the healthy shard is served by that Read.
  // (The reply is delivered first: a Get that has to wait fails as soon as
  // any shard is past shard_timeout_ms, since its wait may depend on the lost
  // shard — client/read_path.cc WaitForRow.)
  int64_t x = 0;
  chs_[0]->Deliver(net::ReadReply{
      r.req_id, 0, 0, {{7, on[0][0], I64(10)}, {7, on[0][1], I64(11)}, {7, on[0][2], I64(12)}}});
  auto f = std::async(std::launch::async, [&] { return w->Get(t, on[0][2], &x); });
  ASSERT_TRUE(Await(f).ok());
  EXPECT_EQ(x, 12);
  f = std::async(std::launch::async, [&] { return w->Get(t, on[0][0], &x); });
  ASSERT_TRUE(Await(f).ok());
  EXPECT_EQ(x, 10);
  EXPECT_EQ(chs_[0]->All<net::Read>().size(), 1u);  // both Gets were served by the prefetch

  // A Get of the unhealthy shard's row fails with its error.
  f = std::async(std::launch::async, [&] { return w->Get(t, on[1][0], &x); });
  s = Await(f);
  EXPECT_EQ(s.code(), StatusCode::kUnavailable) << s.ToString();
  EXPECT_NE(s.message().find("scripted shard 1 unreachable"), std::string::npos) << s.ToString();
}

// A row the shard sends as absent (no record) is installed as its table's
// initializer; one marked absent that carries bytes fails the shard with a
// message naming the row.
TEST_F(ReadErrorsTest, AbsentRowsAreTheInitializerAndAbsentWithBytesIsRefused) {
  Open(1);
  Table t = Create("t", Consistency::kSsp, 0, 5);
  std::unique_ptr<Worker> w;
  ASSERT_TRUE(client_->RegisterWorker(&w).ok());
  int64_t x = -1;
  auto f = std::async(std::launch::async, [&] { return w->Get(t, 3, &x); });
  net::Read r;
  ASSERT_TRUE(chs_[0]->Next(&r));
  chs_[0]->Deliver(net::ReadReply{r.req_id, 0, 0, {net::RowData{5, 3, "", /*absent=*/true}}});
  ASSERT_TRUE(Await(f).ok());
  EXPECT_EQ(x, 0);

  f = std::async(std::launch::async, [&] { return w->Get(t, 4, &x); });
  ASSERT_TRUE(chs_[0]->Next(&r));
  chs_[0]->Deliver(net::ReadReply{r.req_id, 0, 0, {net::RowData{5, 4, I64(9), /*absent=*/true}}});
  Status s = Await(f);
  EXPECT_EQ(s.code(), StatusCode::kCorruption) << s.ToString();
  EXPECT_NE(s.message().find("row 5/4 is marked absent (no record) but carries 8 bytes"),
            std::string::npos)
      << s.ToString();
}

// Regression: a shard's transient answer (too many parked reads) is
// retried, not fatal. Shard 1 refuses the first kFailures Reads; the job still
// reads exact values under bsp, with read-my-writes, and ends with exact totals.
TEST_F(ReadErrorsTest, ResourceExhaustedReadsAreRetriedAndTheJobEndsExact) {
  Open(2);
  constexpr uint32_t kTable = 3;
  Table t = Create("t", Consistency::kBsp, 0, kTable);
  constexpr int kRows = 8, kClocks = 6, kFailures = 5;
  std::mutex mu;
  std::map<uint64_t, int64_t> stored;  // the shards' row values, guarded by mu
  auto value = [&](uint32_t, uint64_t row) {
    std::lock_guard<std::mutex> l(mu);
    return I64(stored[row]);
  };
  auto apply = [&](const net::Apply& a) {
    std::lock_guard<std::mutex> l(mu);
    for (const net::DeltaRow& u : a.updates) stored[u.row] += DecodeDense<int64_t>(u.bytes).at(0);
  };
  chs_[1]->FailReads(kFailures, StatusCode::kResourceExhausted,
                     "too many parked reads (1) on this connection", /*retriable=*/true);
  for (ScriptedChannel* ch : chs_) ch->StartAuto(value, 0, apply);

  std::unique_ptr<Worker> w;
  ASSERT_TRUE(client_->RegisterWorker(&w).ok());
  std::vector<uint64_t> rows(kRows);
  std::iota(rows.begin(), rows.end(), 0);
  auto job = std::async(std::launch::async, [&]() -> Status {
    for (int64_t c = 0; c < kClocks; ++c) {
      RETURN_IF_ERROR(w->Prefetch(t, rows));
      for (uint64_t r : rows) {
        const int64_t step = static_cast<int64_t>(r) + 1;
        int64_t x = -1;
        RETURN_IF_ERROR(w->Get(t, r, &x));
        EXPECT_EQ(x, c * step) << "clock " << c << " row " << r;
        RETURN_IF_ERROR(w->Inc(t, r, &step));
        RETURN_IF_ERROR(w->Get(t, r, &x));
        EXPECT_EQ(x, (c + 1) * step) << "read-my-writes, clock " << c << " row " << r;
      }
      RETURN_IF_ERROR(w->Clock());
    }
    RETURN_IF_ERROR(client_->Flush());
    for (uint64_t r : rows) {
      int64_t x = -1;
      RETURN_IF_ERROR(w->Get(t, r, &x));
      EXPECT_EQ(x, kClocks * (static_cast<int64_t>(r) + 1)) << "row " << r;
    }
    return Status::OK();
  });
  Status s = Await(job);
  ASSERT_TRUE(s.ok()) << s.ToString();
  {
    std::lock_guard<std::mutex> l(mu);
    for (uint64_t r : rows) EXPECT_EQ(stored[r], kClocks * (static_cast<int64_t>(r) + 1));
  }
  EXPECT_EQ(chs_[1]->failed_reads(), kFailures);
  EXPECT_EQ(client_->Stats().requests_retried, static_cast<uint64_t>(kFailures));
}

// An error the shard does not mark retriable cannot succeed by asking again:
// the first one fails the shard at once, with the shard's message.
TEST_F(ReadErrorsTest, UnknownTableIsFatalAtOnceWithItsMessage) {
  Open(1);
  Table t = Create("t", Consistency::kSsp, 0, 9);
  chs_[0]->FailReads(1, StatusCode::kNotFound, "unknown table id 9", /*retriable=*/false);
  chs_[0]->StartAuto([](uint32_t, uint64_t) { return I64(0); }, 0);
  std::unique_ptr<Worker> w;
  ASSERT_TRUE(client_->RegisterWorker(&w).ok());
  int64_t x = 0;
  auto f = std::async(std::launch::async, [&] { return w->Get(t, 1, &x); });
  Status s = Await(f);
  EXPECT_EQ(s.code(), StatusCode::kNotFound) << s.ToString();
  EXPECT_NE(s.message().find("Read of table 9 failed: unknown table id 9"), std::string::npos)
      << s.ToString();
  EXPECT_EQ(chs_[0]->All<net::Read>().size(), 1u);
  EXPECT_EQ(client_->Stats().requests_retried, 0u);
  EXPECT_EQ(w->Clock().code(), StatusCode::kNotFound);  // the shard stays failed
}

// Retriable errors that go on for shard_timeout_ms fail the shard with the
// last error in the message.
TEST_F(ReadErrorsTest, RetriableErrorsFailTheShardAfterTheTimeout) {
  ClientOptions o;
  o.shard_timeout_ms = 50;
  o.retry_backoff_max_ms = 8;
  Open(1, o);
  Table t = Create("t", Consistency::kSsp, 0, 4);
  chs_[0]->FailReads(1 << 30, StatusCode::kResourceExhausted, "too many parked reads (7)",
                     /*retriable=*/true);
  chs_[0]->StartAuto([](uint32_t, uint64_t) { return I64(0); }, 0);
  std::unique_ptr<Worker> w;
  ASSERT_TRUE(client_->RegisterWorker(&w).ok());
  int64_t x = 0;
  auto f = std::async(std::launch::async, [&] { return w->Get(t, 1, &x); });
  Status s = Await(f);
  EXPECT_EQ(s.code(), StatusCode::kResourceExhausted) << s.ToString();
  EXPECT_NE(s.message().find("still failing after"), std::string::npos) << s.ToString();
  EXPECT_NE(s.message().find("last error: too many parked reads (7)"), std::string::npos)
      << s.ToString();
  const uint64_t retried = client_->Stats().requests_retried;
  EXPECT_GE(retried, 2u);  // 50 ms of backoffs of at most 8 ms
  EXPECT_EQ(static_cast<uint64_t>(chs_[0]->failed_reads()), retried + 1);
}

// Table calls retry retriable errors too (with a fresh req_id); other errors
// are returned as the shard sent them.
TEST_F(ReadErrorsTest, CallsRetryRetriableErrors) {
  Open(1);
  TableSchema schema;
  schema.name = "c";
  schema.type = ElementType::kI64;
  schema.width = 1;
  Table t;
  auto f = std::async(std::launch::async, [&] { return client_->CreateTable(schema, &t); });
  net::CreateTable req, again;
  ASSERT_TRUE(chs_[0]->Next(&req));
  chs_[0]->Deliver(net::Error{req.req_id, StatusCode::kUnavailable, "busy", /*retriable=*/true});
  ASSERT_TRUE(chs_[0]->Next(&again));
  EXPECT_NE(again.req_id, req.req_id);
  TableSchema created = again.schema;
  created.id = 2;
  chs_[0]->Deliver(net::TablesReply{again.req_id, {created}});
  ASSERT_TRUE(Await(f).ok());
  EXPECT_EQ(t.id(), 2u);
  EXPECT_EQ(client_->Stats().requests_retried, 1u);

  schema.name = "d";
  f = std::async(std::launch::async, [&] { return client_->CreateTable(schema, &t); });
  ASSERT_TRUE(chs_[0]->Next(&req));
  chs_[0]->Deliver(net::Error{req.req_id, StatusCode::kInvalidArgument, "bad schema"});
  Status s = Await(f);
  EXPECT_EQ(s.code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(s.message(), "bad schema");
  EXPECT_EQ(client_->Stats().requests_retried, 1u);
}

// Waits have no poll interval: a call waiting for a reply is woken by the
// shard's failure itself.
TEST_F(ReadErrorsTest, ACallWaitingForAReplyIsWokenByTheShardsFailure) {
  Open(1);
  std::vector<TableSchema> tables;
  auto f = std::async(std::launch::async, [&] { return client_->ListTables(&tables); });
  net::ListTables req;
  ASSERT_TRUE(chs_[0]->Next(&req));
  chs_[0]->Deliver(net::Error{0, StatusCode::kInternal, "shard broke"});
  Status s = Await(f);
  EXPECT_EQ(s.code(), StatusCode::kInternal);
  EXPECT_NE(s.message().find("shard broke"), std::string::npos) << s.ToString();
}

}  // namespace
}  // namespace pace
