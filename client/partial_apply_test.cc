// Partial Apply on the client (docs/wire-protocol.md, "Apply parts"), against
// a scripted shard: a worker at the process clock whose open deltas pass
// open_delta_mb sends them early as parts of its clock (Apply{more}); values
// stamped with the parts they hold are rebased on exactly the parts not in
// them (read-my-writes: never a part twice, never one missing); the last part
// completes the clock; a part re-sent after a reconnect is acknowledged as a
// duplicate without failing the client; a process started on a shard that
// holds parts of its clock from a previous process numbers its parts after
// them.
#include <gtest/gtest.h>

#include <chrono>
#include <future>
#include <memory>
#include <string>
#include <vector>

#include "client/client_impl.h"
#include "client/pace.h"
#include "client/scripted_channel_test_util.h"

namespace pace {
namespace {

using client::ScriptedChannel;

constexpr uint32_t kWidth = 8192;  // 64 KiB of i64 per row: 16 rows = 1 MiB
// Rows per part: the bound is checked every kOpenDeltaCheckEvery Incs, and
// that many rows (4 MiB) are over the 1 MiB bound.
constexpr uint64_t kRowsPerPart = Client::Impl::kOpenDeltaCheckEvery;

std::string Row(int64_t v) { return EncodeDense(std::vector<int64_t>(kWidth, v)); }

class PartialApplyTest : public ::testing::Test {
 protected:
  // `welcome`: the shard's (applied clock, parts) for this client.
  void Open(net::Welcome welcome = {}) {
    ClientOptions o;
    o.open_delta_mb = 1;
    o.unacked_mb = 64;  // parts need not wait for Acks here
    Open(o, welcome);
  }
  void Open(const ClientOptions& o, net::Welcome welcome = {}) {
    ASSERT_TRUE(client::OpenOnScriptedShard(o, welcome, &client_, &ch_).ok());
    TableSchema schema;
    schema.name = "p";
    schema.type = ElementType::kI64;
    schema.width = kWidth;
    schema.consistency = Consistency::kEssp;
    schema.staleness = 2;
    ASSERT_TRUE(client::CreateTableOnScriptedShard(client_.get(), ch_, schema, 3, &t_).ok());
    ASSERT_TRUE(client_->RegisterWorker(&w_).ok());
  }

  // Incs rows [0, n) by v (every element).
  void IncRows(uint64_t n, int64_t v) {
    std::vector<int64_t> d(kWidth, v);
    for (uint64_t r = 0; r < n; ++r) ASSERT_TRUE(w_->Inc(t_, r, d.data()).ok());
  }

  // Element 0 of `row` as the worker reads it; `answer` plays the shard for
  // the Read it sends (cache miss).
  int64_t GetWithReply(uint64_t row,
                       const std::function<net::ReadReply(const net::Read&)>& answer) {
    int64_t x = -1;
    auto f = std::async(std::launch::async, [&] {
      return w_->Read(t_, row, [&](const RowView& v) { x = v.dense<int64_t>()[0]; });
    });
    net::Read r;
    EXPECT_TRUE(ch_->Next(&r));
    ch_->Deliver(answer(r));
    EXPECT_TRUE(f.get().ok());
    return x;
  }

  std::unique_ptr<Client> client_;
  ScriptedChannel* ch_ = nullptr;
  Table t_;
  std::unique_ptr<Worker> w_;
};

// With the default bounds (256 MiB each, no memory budget) a part is capped
// at 32 MiB: a clock of 40 MiB leaves its first 32 MiB as a part while the
// worker is still in the clock (the sealer sends it), not all of it in
// Clock(); every row is in exactly one part.
TEST_F(PartialApplyTest, WithTheDefaultBoundsAPartIsAtMost32MiB) {
  Open(ClientOptions{});
  constexpr uint64_t kPartRows = (uint64_t{32} << 20) / (kWidth * sizeof(int64_t));  // 512
  IncRows(kPartRows, 1);  // 32 MiB: the bound's check at the 512th Inc seals them
  net::Apply p0;
  ASSERT_TRUE(ch_->Next(&p0));
  EXPECT_EQ(p0.clock, 0);
  EXPECT_EQ(p0.part, 0u);
  EXPECT_TRUE(p0.more);
  EXPECT_EQ(p0.updates.size(), kPartRows);
  // 8 MiB more, then Clock(): the last part holds them.
  std::vector<int64_t> d(kWidth, 2);
  for (uint64_t r = kPartRows; r < kPartRows + 128; ++r) ASSERT_TRUE(w_->Inc(t_, r, d.data()).ok());
  ASSERT_TRUE(w_->Clock().ok());
  net::Apply last;
  ASSERT_TRUE(ch_->Next(&last));
  EXPECT_EQ(last.clock, 0);
  EXPECT_EQ(last.part, 1u);
  EXPECT_FALSE(last.more);
  ASSERT_EQ(last.updates.size(), 128u);
  for (const net::DeltaRow& u : last.updates) {
    EXPECT_GE(u.row, kPartRows);
    EXPECT_EQ(DecodeDense<int64_t>(u.bytes)[0], 2);
  }
  ch_->Deliver(net::Ack{0, false, 0});
  ch_->Deliver(net::Ack{0, false, 1});
  ASSERT_TRUE(client_->Flush().ok());
  EXPECT_EQ(client_->Stats().unacked_bytes, 0u);
}

TEST_F(PartialApplyTest, ValuesHoldingPartsOfTheOpenClockAreRebasedOnTheOthersOnly) {
  Open();
  IncRows(kRowsPerPart, 1);  // over the bound: part 0 of clock 0
  net::Apply p0;
  ASSERT_TRUE(ch_->Next(&p0));
  EXPECT_EQ(p0.clock, 0);
  EXPECT_EQ(p0.part, 0u);
  EXPECT_TRUE(p0.more);
  EXPECT_EQ(p0.updates.size(), kRowsPerPart);
  IncRows(kRowsPerPart, 10);  // part 1
  net::Apply p1;
  ASSERT_TRUE(ch_->Next(&p1));
  EXPECT_EQ(p1.clock, 0);
  EXPECT_EQ(p1.part, 1u);
  EXPECT_TRUE(p1.more);
  IncRows(1, 100);                                   // open
  EXPECT_EQ(client_->Stats().open_delta_waits, 0u);  // the process clock never waits

  // The shard has part 0 in row 0 (1000 from others + 1): the worker sees it
  // plus part 1 and its open delta, part 0 once.
  EXPECT_EQ(GetWithReply(0,
                         [](const net::Read& r) {
                           return net::ReadReply{r.req_id, 0, 0, {{3, 0, Row(1001)}}, 1};
                         }),
            1111);
  // Row 1 from a value without any of our parts: both parts are added.
  EXPECT_EQ(GetWithReply(1,
                         [](const net::Read& r) {
                           return net::ReadReply{r.req_id, 0, 0, {{3, 1, Row(5)}}, 0};
                         }),
            16);
  // A push of row 0 holding parts 0 and 1: only the open delta is added.
  ch_->Deliver(net::Push{0, 0, {{3, 0, Row(2011)}}, 2});
  ASSERT_TRUE(w_->Get(t_, 0, std::vector<int64_t>(kWidth).data()).ok());
  {
    std::vector<int64_t> got(kWidth);
    ASSERT_TRUE(w_->Get(t_, 0, got.data()).ok());
    EXPECT_EQ(got[0], 2111);
    EXPECT_EQ(got[kWidth - 1], 2111);
  }

  // Part 0 acknowledged: a value without it can no longer be rebased (its
  // deltas are purged); the client refetches instead of guessing.
  ch_->Deliver(net::Ack{0, false, 0});
  ch_->Deliver(net::Push{0, 0, {{3, 1, Row(5)}}, 0});
  net::Read again;
  ASSERT_TRUE(ch_->Next(&again));
  EXPECT_EQ(again.rows, std::vector<uint64_t>{1});
  ch_->Deliver(net::ReadReply{again.req_id, 0, 0, {{3, 1, Row(6)}}, 1});  // part 0 in
  {
    std::vector<int64_t> got(kWidth);
    ASSERT_TRUE(w_->Get(t_, 1, got.data()).ok());
    EXPECT_EQ(got[0], 16);  // 5 + 1 (part 0, in the value) + 10 (part 1, added)
  }

  // Clock(): the last part completes clock 0, with what was still open.
  ASSERT_TRUE(w_->Clock().ok());
  net::Apply last;
  ASSERT_TRUE(ch_->Next(&last));
  EXPECT_EQ(last.clock, 0);
  EXPECT_EQ(last.part, 2u);
  EXPECT_FALSE(last.more);
  ASSERT_EQ(last.updates.size(), 1u);
  EXPECT_EQ(DecodeDense<int64_t>(last.updates[0].bytes)[0], 100);
  ch_->Deliver(net::Ack{0, false, 1});
  ch_->Deliver(net::Ack{0, false, 2});
  EXPECT_TRUE(client_->Flush().ok());
  EXPECT_EQ(client_->Stats().unacked_bytes, 0u);
  // Clock 0 complete at the shard: a value stamped (1, 0) holds all of it.
  ch_->Deliver(net::Push{1, 1, {{3, 0, Row(3111)}}, 0});
  ch_->Deliver(net::PushDone{1, 1});
  std::vector<int64_t> got(kWidth);
  ASSERT_TRUE(w_->Get(t_, 0, got.data()).ok());
  EXPECT_EQ(got[0], 3111);
}

// A process of client 0 ended after parts 0 and 1 of clock 5 reached the
// shard. Its replacement re-runs clock 5: its parts are numbered 2, 3, ...
// (the shard applies them after the two it has, instead of skipping the
// re-run's first two whatever they hold), and its values are rebased on its
// own parts only.
TEST_F(PartialApplyTest, AProcessResumingAHalfAppliedClockNumbersItsPartsAfterTheShards) {
  net::Welcome w;
  w.applied_clock = 5;
  w.applied_parts = 2;
  w.shard_clock = 5;
  Open(w);
  EXPECT_EQ(w_->clock(), 5);
  IncRows(kRowsPerPart, 1);
  net::Apply p;
  ASSERT_TRUE(ch_->Next(&p));
  EXPECT_EQ(p.clock, 5);
  EXPECT_EQ(p.part, 2u);
  EXPECT_TRUE(p.more);
  EXPECT_EQ(p.updates.size(), kRowsPerPart);
  // Row 0 from a value holding the two old parts only (stamped (5, 2)): this
  // process's part is added; from one holding it too (5, 3): not again.
  EXPECT_EQ(GetWithReply(0,
                         [](const net::Read& r) {
                           return net::ReadReply{r.req_id, 5, 5, {{3, 0, Row(700)}}, 2};
                         }),
            701);
  EXPECT_EQ(GetWithReply(1,
                         [](const net::Read& r) {
                           return net::ReadReply{r.req_id, 5, 5, {{3, 1, Row(701)}}, 3};
                         }),
            701);
  ch_->Deliver(net::Ack{5, false, 2});  // not a duplicate: no fencing error
  ASSERT_TRUE(w_->Clock().ok());
  net::Apply last;
  ASSERT_TRUE(ch_->Next(&last));
  EXPECT_EQ(last.clock, 5);
  EXPECT_EQ(last.part, 3u);
  EXPECT_FALSE(last.more);
  ch_->Deliver(net::Ack{5, false, 3});
  ASSERT_TRUE(client_->Flush().ok());
  EXPECT_EQ(client_->Stats().unacked_bytes, 0u);
  // The next clock starts at part 0 again.
  IncRows(kRowsPerPart, 1);
  net::Apply next;
  ASSERT_TRUE(ch_->Next(&next));
  EXPECT_EQ(next.clock, 6);
  EXPECT_EQ(next.part, 0u);
}

// One Ack covering a whole clock and a later part (acknowledgements are
// cumulative) completes the clock for Flush.
TEST_F(PartialApplyTest, AnAckThroughAPartCompletesTheClocksBeforeIt) {
  Open();
  ASSERT_TRUE(w_->Clock().ok());  // clock 0, whole (empty)
  IncRows(kRowsPerPart, 1);       // part 0 of clock 1
  net::Apply a0, p0;
  ASSERT_TRUE(ch_->Next(&a0));
  ASSERT_TRUE(ch_->Next(&p0));
  ASSERT_EQ(p0.clock, 1);
  ASSERT_TRUE(p0.more);
  ch_->Deliver(net::Ack{1, false, 0});
  auto flush = std::async(std::launch::async, [&] { return client_->Flush(); });
  if (flush.wait_for(std::chrono::seconds(5)) != std::future_status::ready) {
    ADD_FAILURE() << "Flush still waits for clock 0";
    ch_->Deliver(net::Error{0, StatusCode::kInternal, "test deadline"});  // unblocks it
  }
  EXPECT_TRUE(flush.get().ok());
}

TEST_F(PartialApplyTest, APartResentAfterAReconnectIsAcknowledgedAsADuplicateOnce) {
  Open();
  IncRows(kRowsPerPart, 1);
  net::Apply p0;
  ASSERT_TRUE(ch_->Next(&p0));
  ASSERT_TRUE(p0.more);
  // The shard applied part 0 but its Ack was lost with the connection.
  ch_->listener()->OnDisconnect(0, Status::Unavailable("test"));
  net::Welcome w;
  w.num_shards = 1;
  w.num_clients = 1;
  w.applied_clock = 0;
  w.applied_parts = 1;
  ch_->listener()->OnReconnect(0, w);
  net::Apply resent;
  ASSERT_TRUE(ch_->Next(&resent));
  EXPECT_EQ(resent.clock, 0);
  EXPECT_EQ(resent.part, 0u);
  EXPECT_TRUE(resent.more);
  ASSERT_EQ(resent.updates.size(), p0.updates.size());
  for (size_t i = 0; i < p0.updates.size(); ++i) {
    EXPECT_EQ(resent.updates[i].bytes, p0.updates[i].bytes) << i;
  }
  ch_->Deliver(net::Ack{0, true, 0});  // skipped by the shard: expected
  IncRows(2, 7);
  ASSERT_TRUE(w_->Clock().ok());
  net::Apply last;
  ASSERT_TRUE(ch_->Next(&last));
  EXPECT_EQ(last.part, 1u);
  EXPECT_FALSE(last.more);
  EXPECT_EQ(last.updates.size(), 2u);
  ch_->Deliver(net::Ack{0, false, 1});
  EXPECT_TRUE(client_->Flush().ok());
  // Part 0 went out twice in all (once, then re-sent), never a third time.
  int part0 = 0;
  for (const net::Apply& a : ch_->All<net::Apply>()) part0 += a.clock == 0 && a.part == 0;
  EXPECT_EQ(part0, 2);
  // A later part sent only once and acknowledged as a duplicate: someone
  // else is this client.
  IncRows(kRowsPerPart, 1);
  net::Apply p;
  ASSERT_TRUE(ch_->Next(&p));
  EXPECT_EQ(p.clock, 1);
  EXPECT_EQ(p.part, 0u);
  ch_->Deliver(net::Ack{1, true, 0});
  EXPECT_EQ(w_->Clock().code(), StatusCode::kFailedPrecondition);
}

}  // namespace
}  // namespace pace
